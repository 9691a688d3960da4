"""Python execution in a sandboxed subprocess: `execute_python`.

Each call runs `sys.executable -I` in a fresh temporary folder with a minimal
environment (PATH, HOME, LANG, DATA_DIR; no API keys). Layers:

- `unshare --net --map-root-user` gives the process an empty network namespace where
  the kernel allows it (probed once);
- a prelude sets resource limits (memory, CPU, file size, processes) and installs an
  audit hook that refuses internet sockets, DNS look-ups and every way of starting a
  program, so those are blocked even without unshare;
- a wall-clock timeout kills the whole process group.

The audit hook is not a boundary against deliberately hostile code (ctypes can call
libc directly); the namespace and the rlimits are the kernel-enforced layers.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..compare.tool import Tool, ToolResult, ToolSettings

OUTPUT_MAX_BYTES = 32_000  # per stream, into the result
FILE_SIZE_LIMIT = 256 << 20  # RLIMIT_FSIZE: largest file the code may write (stdout included)
EXTRA_PROCESSES = 32  # RLIMIT_NPROC headroom above what our user already runs (threads count)

# Runs before the user's code (from main.py in the working folder). Limits are set here
# rather than in a preexec_fn, which is unsafe in a multi-threaded parent like the runner.
PRELUDE = r"""
import json, resource, sys, traceback

for _name, _value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, _name), (_value, _value))

_BLOCKED = {
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
    "pty.spawn", "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
    "socket.gethostbyaddr", "socket.getnameinfo",
}

def _guard(event, args):
    # socket.__new__ args: (socket, family, type, proto); 1 is AF_UNIX, the only family allowed
    if event in _BLOCKED or (event == "socket.__new__" and args[1] != 1):
        raise PermissionError(f"sandbox: {event} is not allowed (no network access, no subprocesses)")

sys.addaudithook(_guard)
sys.argv = ["main.py"]
with open("main.py", encoding="utf-8") as _file:
    _code = compile(_file.read(), "main.py", "exec")
try:
    exec(_code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as _error:
    traceback.print_exception(type(_error), _error, _error.__traceback__.tb_next)  # hide this prelude's frame
    sys.exit(1)
"""


@functools.cache
def network_namespace_available() -> bool:
    """Whether `unshare --net --map-root-user` works here (needs unprivileged user namespaces)."""
    if shutil.which("unshare") is None:
        return False
    try:
        probe = subprocess.run(["unshare", "--net", "--map-root-user", "true"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _user_task_count() -> int:
    """Threads our uid runs now: RLIMIT_NPROC counts all of them, so the limit must start above."""
    uid, count = os.getuid(), 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):  # the process ended while we looked
            continue
    return count


def _read_capped(stream: IO[bytes]) -> tuple[str, bool]:
    stream.seek(0)
    raw = stream.read(OUTPUT_MAX_BYTES + 1)
    return raw[:OUTPUT_MAX_BYTES].decode("utf-8", errors="replace"), len(raw) > OUTPUT_MAX_BYTES


@dataclass(frozen=True)
class SandboxRun:
    """How one sandboxed program ended; each stream capped at OUTPUT_MAX_BYTES."""

    exit_status: int  # negative: killed by that signal
    timed_out: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool


def _limits(timeout_s: float, memory_mb: int) -> dict[str, int]:
    return {
        "RLIMIT_AS": memory_mb << 20,
        "RLIMIT_CPU": math.ceil(timeout_s) + 1,
        "RLIMIT_FSIZE": FILE_SIZE_LIMIT,
        "RLIMIT_NPROC": _user_task_count() + EXTRA_PROCESSES,
    }


def _environment(home: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", **(extra or {})}


def _wait(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    try:
        process.wait(timeout=timeout_s)
        return False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # it may have ended just now
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return True


def run_sandboxed(
    code: str, *, timeout_s: float, memory_mb: int, env: Mapping[str, str] | None = None, stdin: bytes = b""
) -> SandboxRun:
    """Run `code` as main.py in a fresh temporary folder under every layer in the module docstring.

    `env` is added to the minimal environment; `stdin` is what the program reads on its stdin.
    """
    with (
        tempfile.TemporaryDirectory(prefix="sandbox-") as work,
        tempfile.TemporaryFile() as given,  # outside the sandbox folder, so the code cannot touch them
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        Path(work, "main.py").write_text(code, encoding="utf-8")
        given.write(stdin)
        given.seek(0)
        prefix = ["unshare", "--net", "--map-root-user"] if network_namespace_available() else []
        command = [*prefix, sys.executable, "-I", "-c", PRELUDE, json.dumps(_limits(timeout_s, memory_mb))]
        # start_new_session: its own process group, so a timeout kills everything it started
        process = subprocess.Popen(
            command,
            cwd=work,
            env=_environment(work, env),
            stdin=given,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = _wait(process, timeout_s)
        (stdout, out_cut), (stderr, err_cut) = _read_capped(out), _read_capped(err)
        return SandboxRun(process.returncode, timed_out, stdout, stderr, out_cut, err_cut)


class PythonTool(Tool):
    name = "execute_python"

    def __init__(self, settings: ToolSettings, data_dir: Path | None = None) -> None:
        self.settings = settings
        self.parameters = {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "A Python program; print what you need."}},
            "required": ["code"],
            "additionalProperties": False,
        }
        self.data_dir = data_dir.resolve() if data_dir else None
        where = " The data folder's path is in the DATA_DIR environment variable." if data_dir else ""
        self.description = (
            "Run a Python program in a fresh sandbox and get its stdout and stderr. "
            f"No network, no subprocesses, {settings.python_timeout_s:g}s and {settings.python_memory_mb} MB "
            f"limits; state does not persist between calls.{where}"
        )

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        run = run_sandboxed(
            arguments["code"],
            timeout_s=self.settings.python_timeout_s,
            memory_mb=self.settings.python_memory_mb,
            env={"DATA_DIR": str(self.data_dir)} if self.data_dir else None,
        )
        out, err = (run.stdout, run.stdout_truncated), (run.stderr, run.stderr_truncated)
        return self._result(run.exit_status, run.timed_out, out, err)

    def _result(self, status: int, timed_out: bool, out: tuple[str, bool], err: tuple[str, bool]) -> ToolResult:
        (stdout, out_cut), (stderr, err_cut) = out, err
        parts = [stdout] if stdout else []
        if stderr:
            parts.append(f"[stderr]\n{stderr}")
        if out_cut or err_cut:
            parts.append(f"[output truncated at {OUTPUT_MAX_BYTES} bytes per stream]")
        error = self._failure(status, timed_out, stderr)
        parts.append(f"[{error}]" if error else "[exit status 0]")
        data = {"exit_status": status, "timed_out": timed_out, "stdout": stdout, "stderr": stderr}
        return ToolResult(
            success=error is None, content="\n".join(parts), data=data, truncated=out_cut or err_cut, error=error
        )

    def _failure(self, status: int, timed_out: bool, stderr: str) -> str | None:
        if timed_out:
            return f"timed out after {self.settings.python_timeout_s:g}s; the process was killed"
        if status < 0:
            name = signal.Signals(-status).name
            hint = {"SIGXCPU": " (CPU time limit)", "SIGXFSZ": " (file size limit)"}.get(name, "")
            return f"killed by {name}{hint}"
        if status > 0:
            last = stderr.strip().splitlines()[-1:] or [""]
            return f"exit status {status}: {last[0]}" if last[0] else f"exit status {status}"
        return None
