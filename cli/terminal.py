"""The consoles' safe side: whatever a server, an agent or a dataset wrote (an error body, an answer, a task
id) reaches the terminal without its escape sequences or control characters (`core/sanitize.py`), so it
cannot move the cursor, clear the screen, retitle the window or hide a line.

    TerminalConsole          what the suite prints itself (messages, tables, progress)
    sanitize_log_records()   what any library logs: every log record of the process, whichever handler prints it
                             (the `mcp` library logs an agent's tool name as the agent sent it)
"""

from __future__ import annotations

import logging
from typing import Any

from rich.console import Console


class TerminalConsole(Console):
    """A rich Console whose `print` strips escape sequences and control characters from every text it is given
    (Rich passes ESC sequences through as they are), and prints `:name:` as it is: a task id or an answer saying
    `:warning:` is not an emoji (nor are Rich's 40 ms of emoji codes loaded for it)."""

    def __init__(self, *args: Any, **options: Any) -> None:
        options.setdefault("emoji", False)
        super().__init__(*args, **options)

    def print(self, *objects: Any, **options: Any) -> None:  # type: ignore[override]
        from ..core.sanitize import terminal_text  # here: `compare --help` must not load the core

        super().print(*(terminal_text(o) if isinstance(o, str) else o for o in objects), **options)


def sanitize_log_records() -> None:
    """From now on every log record this process makes is terminal-safe (`core/sanitize.py` `safe_log_record`),
    made so where records are made (the record factory), so no library's handler, Python's last-resort handler
    included, can print an escape sequence. The core is loaded with the first record: `--help` makes none."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "terminal_safe", False):
        return

    def make_safe(*args: Any, **kwargs: Any) -> logging.LogRecord:
        from ..core.sanitize import safe_log_record

        return safe_log_record(previous(*args, **kwargs))

    make_safe.terminal_safe = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make_safe)
