"""An external agent run WITHOUT a sandbox (`--unsandboxed-agents`, only where none can be made here).

This is NOT isolation: the agent runs as the suite's user on the host, as its own process group in a scratch
folder, with only the environment the suite gives it. It can read whatever that user can (task folders and gold
included), see the host's processes, and a child that calls setsid() escapes the group kill. What it does have:
the unit's wall time (the group is killed at the deadline, and when the suite exits however it exits: a watcher
process and `setpriv --pdeathsig`). Every external row of such a run says it ran unsandboxed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from ..core.sanitize import terminal_text
from ..tools.agent_sandbox import OUTPUT_LIMIT, STDERR_TAIL, AgentOutcome

_live_groups: set[int] = set()
_live_lock = threading.Lock()


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (the agent and the children it started); gone ones are fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_live_groups() -> None:
    """Kill every agent group still running (the run stops: Ctrl-C, SIGTERM, the end of the process)."""
    with _live_lock:
        groups = list(_live_groups)
    for pgid in groups:
        kill_group(pgid)


def run_unsandboxed(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> AgentOutcome:
    """Run the agent as its own process group; kill the group at the deadline and when it exits."""
    out_path, err_path = cwd / ".agent-stdout", cwd / ".agent-stderr"
    start = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # setpriv: the agent dies with this process even when it is killed (-9) and no cleanup runs
        process = subprocess.Popen(
            [*_die_with_parent(), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    with _live_lock:
        _live_groups.add(process.pid)
    watcher, lifeline = _watch_for_our_death(process.pid)
    timed_out = False
    try:
        process.wait(timeout=max(0.0, timeout_s))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(process.pid)  # at the deadline, and the children an agent that exited left behind
        process.wait()
        with _live_lock:
            _live_groups.discard(process.pid)
        _stop_watching(watcher, lifeline)
    seconds = time.perf_counter() - start
    stdout = out_path.read_text("utf-8", errors="replace")[:OUTPUT_LIMIT]
    stderr = terminal_text(err_path.read_text("utf-8", errors="replace").strip())[-STDERR_TAIL:]
    code = None if timed_out else process.returncode
    return AgentOutcome(code, stdout, stderr, timed_out, seconds, sandboxed=False)


def _watch_for_our_death(pgid: int) -> tuple[subprocess.Popen[bytes] | None, int]:
    """A watcher that kills the agent's group when this process ends however it ends (`kill -9`, or the CLI's
    `os._exit` at Ctrl-C, which runs no exit hook): it waits on a pipe whose only writer is this process, and
    reads end-of-file when the process is gone. Returns the watcher and the pipe's write end."""
    readable, lifeline = os.pipe()  # close-on-exec: no agent or other child inherits the write end
    try:
        watcher = subprocess.Popen(
            ["sh", "-c", f"read _; kill -9 -{pgid} 2>/dev/null"],  # the pipe is its stdin (dash: no `--`)
            stdin=readable,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C of the run's terminal must not stop it before the agent
        )
    except OSError:
        watcher = None
    finally:
        os.close(readable)
    return watcher, lifeline


def _stop_watching(watcher: subprocess.Popen[bytes] | None, lifeline: int) -> None:
    if watcher is not None:
        watcher.kill()  # before closing the pipe: the group is already gone, its number must not be reused
        watcher.wait()
    os.close(lifeline)


def _die_with_parent() -> list[str]:
    return ["setpriv", "--pdeathsig", "KILL", "--"] if Path("/usr/bin/setpriv").is_file() else []


def _register_exit_hook() -> None:
    """Kill the agents before the interpreter waits for the unit threads at exit (which wait for the agents):
    threading's exit hooks run before those joins; `atexit` would run after them."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(kill_live_groups)
    atexit.register(kill_live_groups)


_register_exit_hook()
