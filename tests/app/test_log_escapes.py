"""What a library logs quotes agents and servers (the `mcp` library logs an agent's tool name as sent): no log
record of the suite's process carries an escape sequence to the terminal, whichever handler prints it."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT

HOSTILE_TOOL = "run_sql\x1b]0;pwned\x07\x1b[2J\x1b[31m"


def test_a_logged_tool_name_reaches_stderr_without_its_escape_sequences() -> None:
    program = f"""
import logging
from data_agent_compare.cli.terminal import sanitize_log_records
sanitize_log_records()
sanitize_log_records()  # twice: idempotent
log = logging.getLogger("mcp.server.lowlevel.server")
log.warning("Processing request of type CallToolRequest for %s", {HOSTILE_TOOL!r})
try:
    raise ValueError({HOSTILE_TOOL!r})
except ValueError:
    log.exception("tool failed")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT.parent, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr
    assert "CallToolRequest for run_sql\n" in done.stderr  # the text kept, whole sequences gone
    assert "ValueError: run_sql" in done.stderr and "Traceback" in done.stderr


def test_the_command_line_and_its_workers_install_the_safe_records() -> None:
    assert "sanitize_log_records()" in (ROOT / "cli/main.py").read_text(encoding="utf-8")
    assert "install_safe_log_records()" in (ROOT / "engine/executors.py").read_text(encoding="utf-8")
