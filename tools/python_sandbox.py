"""Python execution in a bubblewrap sandbox: `execute_python`, and `run_sandboxed` for other code we do not trust.

Each call runs `sys.executable -I` under bubblewrap (`bwrap`, 0.8 or newer); the kernel enforces:

- A private mount namespace whose root is an empty tmpfs showing only, read-only: `/usr` and the
  `/bin`, `/sbin`, `/lib*` links, the base interpreter (`sys.base_prefix`), and of a virtualenv
  only its `pyvenv.cfg`, interpreter link and site-packages. The suite itself is masked (an empty
  tmpfs over its package folder, `/dev/null` over its dist-info, `.pth` and editable finder), so
  neither the checkout nor the gold answers in it can be read, and `data_agent_compare` does not
  import. No `/etc`, `/home`, `/root`, `/tmp`, `/sys`. The task's data is read-only at `/data`
  (`DATA_DIR`); `run_sandboxed(read_only=...)` shows further folders read-only at their own path.
  The only writable place is `/scratch`, the working folder and HOME: a tmpfs of at most
  SCRATCH_MAX_BYTES that vanishes with the call. Input files (`main.py`, DAB's `variables.json`)
  are copied into it, read-only, before the program starts.
- Own network namespace (only its own loopback: no host service, no abstract Unix socket of the
  host, no route out), own PID, IPC and UTS namespaces, `/proc` of its own PID namespace, a minimal
  `/dev`. `--new-session` (no terminal), `--die-with-parent`.
- An unprivileged user: uid/gid 65534, no capabilities, no_new_privs. Run by another user, bwrap
  creates a user namespace (uid 65534 inside, the caller outside). Run by root, bwrap runs
  privileged and `setpriv` drops to uid 65534 in the host's user namespace instead: RLIMIT_NPROC
  never binds processes whose host uid is 0, and bwrap maps the sandbox uid onto the caller's,
  so a user namespace would leave a root caller's sandbox without a process limit.
- rlimits set before the code runs: RLIMIT_AS (memory), RLIMIT_CPU (the wall-clock timeout, or
  `cpu_s` when given: DAB's validators get a CPU budget apart from their wall time), RLIMIT_FSIZE, RLIMIT_NPROC
  (PROCESS_LIMIT processes and threads; as root, on top of uid 65534's other tasks on the host).
- A wall-clock timeout: the sandbox's init is killed, which kills every process of its PID
  namespace (also children that called setsid()); the call returns once they are gone. Ctrl-C
  while waiting does the same; if the caller dies, `--die-with-parent` does.
- An empty environment but PATH, HOME=/scratch, LANG and DATA_DIR; bwrap itself gets none either.
  bwrap reads its options from a file descriptor (`--args`), so the sandbox's `/proc/1/cmdline`
  (bwrap's init) names no host folder.
- A seccomp filter (tools/seccomp.py, `--seccomp`) refusing new namespaces, mounts, ptrace, bpf,
  perf_event_open, userfaultfd, keyrings, kernel modules, io_uring and memfd_create.
- Memory that tmpfs pages could pin outside RLIMIT_AS stays inside the memory budget: `/scratch`
  (at most a quarter of it, SCRATCH_MAX_BYTES) and a writable `/dev/shm` (a sixteenth, at most
  SHM_MAX_BYTES) are tmpfs mounts of bounded size, RLIMIT_AS is the budget minus both, and
  memfd_create is refused.

Consequences: as root, folders shown in the sandbox must be readable by uid 65534 (`chmod -R o+rX`);
an unreadable data folder is refused with that advice. Exit statuses above 128 are reported as the
signal 128+n (bwrap passes a killed program's signal on that way, as a shell does).

An audit hook stays as a convenience layer, not a boundary: it refuses internet sockets, DNS and
starting programs with a clear message. In the sandbox `os.fork` is allowed (multiprocessing works;
the process limit binds).

Where bwrap cannot run (not installed, too old, the kernel refuses namespaces: probed once,
`sandbox_problem()`), `run_sandboxed` raises SandboxUnavailable unless the caller allows the
unsandboxed fallback (`ToolSettings.unsafe_python`, `--unsafe-python`). That fallback is NOT a
sandbox: `sys.executable -I` in a temporary folder on the host, with the rlimits, the audit hook
(which then also refuses os.fork) and `unshare --net` when available; the code can read and write
whatever the caller can, and a child that calls setsid() can outlive it.
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
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from pydantic import Field

from ..core.tool import Tool, ToolError, ToolResult, ToolSettings
from .bubblewrap import (
    JOIN_CGROUPS,
    NOBODY,
    SANDBOX_PATH,
    anonymous_file,
    bwrap_path,
    check_readable,
    drop_to_user,
    exit_status,
    isolation_options,
    mount_options,
    privileged,
    python_mounts,
    sandbox_init,
    suite_masks,
    system_mounts,
    task_count,
    tear_down,
)
from .parameters import Parameters, parameters_schema
from .sandbox_memory import describe as describe_memory
from .sandbox_memory import memory_mode, sandbox_cgroup
from .seccomp import SeccompUnavailable, seccomp_program

SandboxMode = Literal["bubblewrap", "unsafe", "unavailable"]

OUTPUT_MAX_BYTES = 32_000  # per stream, into the result
FILE_SIZE_LIMIT = 256 << 20  # RLIMIT_FSIZE: largest file the code may write (stdout included)
SCRATCH_MAX_BYTES = 256 << 20  # size of the writable tmpfs
SHM_MAX_BYTES = 64 << 20  # size of /dev/shm (multiprocessing's semaphores live there)
PROCESS_LIMIT = 128  # RLIMIT_NPROC in the sandbox: processes and threads (numpy starts one per CPU)
EXTRA_PROCESSES = 32  # unsafe fallback: RLIMIT_NPROC headroom above what our user already runs
SANDBOX_UID = NOBODY
SCRATCH = "/scratch"
DATA_MOUNT = "/data"
INPUT_FILE_MODE = "0444"
UNSAFE_NOTE = "[ran WITHOUT the sandbox: bubblewrap is unavailable and --unsafe-python is set]"

# Runs before the code (main.py in the working folder). Limits are set here rather than in a
# preexec_fn, which is unsafe in a multi-threaded parent like the runner.
PRELUDE = r"""
import json, os, resource, sys, traceback

os.environ.pop("PWD", None)  # bwrap sets it on --chdir; the environment is only what we set
_config = json.loads(sys.argv[1])
for _name, _value in _config["limits"].items():
    resource.setrlimit(getattr(resource, _name), (_value, _value))

_BLOCKED = {
    "subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "pty.spawn",
    "socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr",
    "socket.getnameinfo",
}
if _config["block_fork"]:
    _BLOCKED |= {"os.fork", "os.forkpty"}

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


class SandboxUnavailable(RuntimeError):
    """bwrap cannot run here and the caller did not allow the unsandboxed fallback."""


@dataclass(frozen=True)
class SandboxRun:
    """How one sandboxed program ended; each stream capped at OUTPUT_MAX_BYTES."""

    exit_status: int  # negative: killed by that signal
    timed_out: bool
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    mode: Literal["bubblewrap", "unsafe"] = "bubblewrap"
    memory_peak_bytes: int | None = None  # all the sandbox's processes together (its memory cgroup); None: unknown


# ---------------------------------------------------------------- availability


@functools.cache
def sandbox_problem() -> str | None:
    """Why bubblewrap cannot run here, or None when it can (probed once per process)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    if privileged() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed; as root it drops the sandbox to uid 65534"
    try:
        seccomp_program()
    except SeccompUnavailable as unavailable:
        return str(unavailable)
    try:
        probe = _run_bubblewrap({"main.py": "print('ok')"}, timeout_s=30, memory_mb=512)
    except OSError as error:
        return f"bwrap failed to start: {error}"
    if probe.exit_status == 0 and probe.stdout == "ok\n":
        return None
    detail = " ".join(probe.stderr.split())[:300] or f"exit status {probe.exit_status}"
    needs_newer = " (bubblewrap 0.8 or newer is needed)" if "Unknown option" in probe.stderr else ""
    return f"bwrap failed: {detail}{needs_newer}"


def sandbox_mode(settings: ToolSettings) -> SandboxMode:
    """How execute_python runs under these settings: bubblewrap whenever it works; `unsafe` only as
    the fallback the user allowed with --unsafe-python; else `unavailable` (calls are refused)."""
    if sandbox_problem() is None:
        return "bubblewrap"
    return "unsafe" if settings.unsafe_python else "unavailable"


def sandbox_memory_budget(settings: ToolSettings) -> str | None:
    """The manifest's line on the sandbox's memory budget (tools/sandbox_memory.py); None without the sandbox."""
    if sandbox_mode(settings) != "bubblewrap":
        return None
    return describe_memory(memory_mode(), settings.python_memory_mb)


def refusal(problem: str) -> str:
    return (
        f"execute_python is refused: the bubblewrap sandbox cannot run here ({problem}). "
        "Install bubblewrap (apt-get install bubblewrap), or pass --unsafe-python to run "
        "model-written Python without a sandbox."
    )


# ---------------------------------------------------------------- running


def run_sandboxed(
    code: str,
    *,
    timeout_s: float,
    memory_mb: int,
    data_dir: Path | None = None,
    read_only: Sequence[Path] = (),
    files: Mapping[str, str | bytes] | None = None,
    stdin: bytes = b"",
    allow_unsandboxed: bool = False,
    cpu_s: float | None = None,
) -> SandboxRun:
    """Run `code` as main.py under every layer in the module docstring.

    `data_dir` is shown read-only at /data (DATA_DIR), each of `read_only` read-only at its own
    path; `files` (name -> content) are put in the working folder first; `stdin` is the program's
    stdin. Without bubblewrap this raises SandboxUnavailable, or with `allow_unsandboxed` runs
    the unsandboxed fallback (`SandboxRun.mode == "unsafe"`). A folder to show that uid 65534
    cannot read (root callers) is a PermissionError, a missing one a FileNotFoundError.
    """
    inputs = {"main.py": code, **(files or {})}
    problem = sandbox_problem()
    if problem is None:
        return _run_bubblewrap(inputs, timeout_s, memory_mb, data_dir, read_only, stdin, cpu_s)
    if not allow_unsandboxed:
        raise SandboxUnavailable(refusal(problem))
    return _run_unsafe(inputs, timeout_s, memory_mb, data_dir, stdin, cpu_s)


def _run_bubblewrap(
    inputs: Mapping[str, str | bytes],
    timeout_s: float,
    memory_mb: int,
    data_dir: Path | None = None,
    read_only: Sequence[Path] = (),
    stdin: bytes = b"",
    cpu_s: float | None = None,
    seccomp_filter: bool = True,  # False only to measure what the filter costs
) -> SandboxRun:
    shown = [*([data_dir] if data_dir else []), *read_only]
    if privileged():
        check_readable(shown)
    with contextlib.ExitStack() as stack:
        input_fds = {name: anonymous_file(stack, content).fileno() for name, content in inputs.items()}
        given = anonymous_file(stack, stdin)
        info, out, err = (stack.enter_context(tempfile.TemporaryFile()) for _ in range(3))
        processes = PROCESS_LIMIT + task_count(SANDBOX_UID) if privileged() else None
        scratch, shm = tmpfs_sizes(memory_mb)
        limits = _limits(timeout_s if cpu_s is None else cpu_s, memory_mb, processes)
        limits["RLIMIT_AS"] -= scratch + shm  # what the tmpfs mounts can hold is memory too
        single_process = memory_mode() == "single process"  # no cgroup: one process is the whole budget
        config = {"limits": limits, "block_fork": single_process}
        program = [sys.executable, "-I", "-c", PRELUDE, json.dumps(config)]
        filter_program = seccomp_program(single_process=single_process)
        seccomp = anonymous_file(stack, filter_program).fileno() if seccomp_filter else None
        command = bubblewrap_command(program, data_dir, read_only, input_fds, info.fileno(), seccomp, memory_mb)
        options, program_part = command[1 : command.index("--")], command[command.index("--") :]
        args = anonymous_file(stack, b"".join(option.encode() + b"\0" for option in options))
        cgroup = stack.enter_context(sandbox_cgroup(memory_mb << 20))  # removed after the teardown below
        launch = ["/bin/sh", "-c", JOIN_CGROUPS, "sh", str(cgroup.procs), "--", command[0]] if cgroup else ["bwrap"]
        # bwrap gets an empty environment too: the sandbox's /proc/1/environ is bwrap's; and its
        # options by fd, so /proc/1/cmdline shows only "<bwrap> --args N -- <program>"
        process = subprocess.Popen(
            [*launch, "--args", str(args.fileno()), *program_part],
            executable=None if cgroup else command[0],
            env={},
            cwd="/",
            stdin=given,
            stdout=out,
            stderr=err,
            pass_fds=[*input_fds.values(), info.fileno(), args.fileno(), *([seccomp] if seccomp else [])],
            start_new_session=True,  # Ctrl-C in the terminal reaches us, not bwrap: we tear it down
        )
        timed_out = _supervise(process, info.fileno(), timeout_s)
        (stdout, out_cut), (stderr, err_cut) = _read_capped(out), _read_capped(err)
        peak = cgroup.peak_bytes() if cgroup else None
        status = exit_status(process.returncode)
        return SandboxRun(status, timed_out, stdout, stderr, out_cut, err_cut, memory_peak_bytes=peak)


def _supervise(process: subprocess.Popen[bytes], info_fd: int, timeout_s: float) -> bool:
    """Wait for the program (True if it timed out), then end the whole sandbox before returning.

    bwrap exits as soon as the program does, while its init (pid 1 of the sandbox) still waits
    for orphans such as a setsid() child. So the init is followed by a pidfd taken while bwrap
    still runs, and killed at the end whatever happened: the kernel then kills every process of
    the PID namespace, and the init's pidfd turns readable only once they are all gone.
    """
    deadline = time.monotonic() + timeout_s
    init = None
    try:
        init = sandbox_init(process, info_fd, deadline)
        process.wait(timeout=max(0.0, deadline - time.monotonic()))
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
    except BaseException:  # Ctrl-C or another error while waiting: nothing may outlive the call
        tear_down(process, init)
        raise
    tear_down(process, init)
    return timed_out


# ---------------------------------------------------------------- the bwrap command line


def bubblewrap_command(
    program: Sequence[str],
    data_dir: Path | None = None,
    read_only: Sequence[Path] = (),
    input_fds: Mapping[str, int] | None = None,
    info_fd: int | None = None,
    seccomp_fd: int | None = None,
    memory_mb: int | None = None,
) -> list[str]:
    """The bwrap command line running `program` (see the module docstring for each layer);
    `memory_mb` sizes the tmpfs mounts (default: their maximum)."""
    mounts = system_mounts()
    python_mounts(mounts)
    mounts.show(Path(p).resolve() for p in read_only)
    suite_masks(mounts)
    command = [bwrap_path(), *isolation_options(), *mount_options(mounts)]
    command += ["--proc", "/proc", "--dev", "/dev"]
    scratch, shm = tmpfs_sizes(memory_mb)
    command += ["--perms", "1777", "--size", str(scratch), "--tmpfs", SCRATCH]
    command += ["--perms", "1777", "--size", str(shm), "--tmpfs", "/dev/shm"]
    for name, fd in (input_fds or {}).items():
        command += ["--perms", INPUT_FILE_MODE, "--file", str(fd), f"{SCRATCH}/{name}"]
    environment = {"PATH": SANDBOX_PATH, "HOME": SCRATCH, "LANG": "C.UTF-8"}
    if data_dir is not None:
        command += ["--ro-bind", str(data_dir), DATA_MOUNT]
        environment["DATA_DIR"] = DATA_MOUNT
    command += ["--chdir", SCRATCH, "--clearenv"]
    for name, value in environment.items():
        command += ["--setenv", name, value]
    if info_fd is not None:
        command += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        command += ["--seccomp", str(seccomp_fd)]
    return [*command, "--", *drop_to_user(), *program]


def tmpfs_sizes(memory_mb: int | None) -> tuple[int, int]:
    """Bytes of /scratch and /dev/shm for a memory budget: a quarter and a sixteenth of it, at most
    SCRATCH_MAX_BYTES and SHM_MAX_BYTES."""
    if memory_mb is None:
        return SCRATCH_MAX_BYTES, SHM_MAX_BYTES
    budget = memory_mb << 20
    return min(SCRATCH_MAX_BYTES, budget // 4), min(SHM_MAX_BYTES, budget // 16)


# ---------------------------------------------------------------- limits and output


def _limits(cpu_s: float, memory_mb: int, processes: int | None) -> dict[str, int]:
    limits = {
        "RLIMIT_AS": memory_mb << 20,
        "RLIMIT_CPU": math.ceil(cpu_s) + 1,
        "RLIMIT_FSIZE": FILE_SIZE_LIMIT,
    }
    return limits if processes is None else {**limits, "RLIMIT_NPROC": processes}


def _read_capped(stream: IO[bytes]) -> tuple[str, bool]:
    stream.seek(0)
    raw = stream.read(OUTPUT_MAX_BYTES + 1)
    return raw[:OUTPUT_MAX_BYTES].decode("utf-8", errors="replace"), len(raw) > OUTPUT_MAX_BYTES


# ---------------------------------------------------------------- the unsandboxed fallback


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


def _run_unsafe(
    inputs: Mapping[str, str | bytes],
    timeout_s: float,
    memory_mb: int,
    data_dir: Path | None,
    stdin: bytes,
    cpu_s: float | None = None,
) -> SandboxRun:
    """NOT a sandbox (module docstring): only rlimits, the audit hook and, where possible, no network."""
    with (
        tempfile.TemporaryDirectory(prefix="sandbox-") as work,
        tempfile.TemporaryFile() as given,  # outside the working folder, so the code cannot touch them
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
    ):
        for name, content in inputs.items():
            Path(work, name).write_bytes(content.encode() if isinstance(content, str) else content)
        given.write(stdin)
        given.seek(0)
        cpu = timeout_s if cpu_s is None else cpu_s
        limits = _limits(cpu, memory_mb, task_count(os.getuid()) + EXTRA_PROCESSES)
        prefix = ["unshare", "--net", "--map-root-user"] if network_namespace_available() else []
        command = [*prefix, sys.executable, "-I", "-c", PRELUDE, json.dumps({"limits": limits, "block_fork": True})]
        environment = {"PATH": SANDBOX_PATH, "HOME": work, "LANG": "C.UTF-8"}
        if data_dir is not None:
            environment["DATA_DIR"] = str(data_dir)
        process = subprocess.Popen(
            command, cwd=work, env=environment, stdin=given, stdout=out, stderr=err, start_new_session=True
        )
        timed_out = _wait_unsafe(process, timeout_s)
        (stdout, out_cut), (stderr, err_cut) = _read_capped(out), _read_capped(err)
        return SandboxRun(process.returncode, timed_out, stdout, stderr, out_cut, err_cut, mode="unsafe")


def _wait_unsafe(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    try:
        process.wait(timeout=timeout_s)
        return False
    except BaseException as interruption:  # kill its process group (a setsid() child escapes it)
        with contextlib.suppress(ProcessLookupError):  # it may have ended just now
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if isinstance(interruption, subprocess.TimeoutExpired):
            return True
        raise


# ---------------------------------------------------------------- the tool


class PythonParameters(Parameters):
    code: str = Field(description="A Python program; print what you need.")


class PythonTool(Tool):
    """execute_python: the program runs under bubblewrap; where bubblewrap cannot run, calls are
    refused, unless `settings.unsafe_python` allows running it UNSANDBOXED (said in each result)."""

    name = "execute_python"

    def __init__(self, settings: ToolSettings, data_dir: Path | None = None) -> None:
        self.settings = settings
        self.parameters = parameters_schema(PythonParameters)
        self.data_dir = data_dir.resolve() if data_dir else None
        where = " The data folder's path is in the DATA_DIR environment variable." if data_dir else ""
        self.description = (
            "Run a Python program in a fresh sandbox and get its stdout and stderr. "
            f"No network, no subprocesses, {settings.python_timeout_s:g}s and {settings.python_memory_mb} MB "
            f"limits; state does not persist between calls.{where}"
        )

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return self.execute(arguments["code"], data_dir=self.data_dir)

    def execute(
        self, program: str, *, files: Mapping[str, str | bytes] | None = None, data_dir: Path | None = None
    ) -> ToolResult:
        """Run `program` as main.py with `files` beside it; a refusal is a ToolError the agent reads."""
        try:
            run = run_sandboxed(
                program,
                timeout_s=self.settings.python_timeout_s,
                memory_mb=self.settings.python_memory_mb,
                data_dir=data_dir,
                files=files,
                allow_unsandboxed=self.settings.unsafe_python,
            )
        except (SandboxUnavailable, OSError) as error:  # refused, or a data folder it cannot show
            raise ToolError(str(error)) from None
        return self._result(run)

    def _result(self, run: SandboxRun) -> ToolResult:
        stdout, stderr, cut = run.stdout, run.stderr, run.stdout_truncated or run.stderr_truncated
        parts = [stdout] if stdout else []
        if stderr:
            parts.append(f"[stderr]\n{stderr}")
        if cut:
            parts.append(f"[output truncated at {OUTPUT_MAX_BYTES} bytes per stream]")
        error = self._failure(run.exit_status, run.timed_out, stderr)
        if error and run.exit_status == -signal.SIGKILL and self._budget_reached(run):
            error += f" (all its processes together reached the {self.settings.python_memory_mb} MB memory limit)"
        parts.append(f"[{error}]" if error else "[exit status 0]")
        if run.mode == "unsafe":
            parts.append(UNSAFE_NOTE)
        data = {
            "exit_status": run.exit_status,
            "timed_out": run.timed_out,
            "stdout": stdout,
            "stderr": stderr,
            "sandbox": run.mode,
        }
        return ToolResult(success=error is None, content="\n".join(parts), data=data, truncated=cut, error=error)

    def _budget_reached(self, run: SandboxRun) -> bool:
        """The sandbox's memory cgroup killed it: its peak came within a few pages of the budget."""
        budget = self.settings.python_memory_mb << 20
        return run.memory_peak_bytes is not None and run.memory_peak_bytes >= budget - (4 << 20)

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
