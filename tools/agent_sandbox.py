"""An external agent's sandbox: one per unit, made by the suite when the unit starts, gone when it ends.

Built with bubblewrap on the mechanics the Python sandbox uses (tools/bubblewrap.py). What the agent has:

- **Processes**: new PID, IPC, UTS, mount, network and cgroup namespaces: it sees its own processes only, not
  the suite, not another unit's agent. Run by root, each unit's agent is a uid of its own (from AGENT_UID_BASE,
  one per unit in flight on the machine, no capabilities, no_new_privs); run by another user, the sandbox is
  uid 65534 in a user namespace of its own. A seccomp filter refuses new namespaces, mounts, ptrace, bpf,
  io_uring, keyrings and the like (tools/seccomp.py).
- **Files**: read-only, the system's programs and libraries (`/usr`, `/bin`, `/lib*`, a few files of `/etc`),
  the suite's Python interpreter and installed packages (the suite's own package masked), the agent's own built
  environment and its agent folder; writable, only `/scratch` (its working folder and HOME) and its own `/tmp`,
  each a tmpfs of `scratch_mb` that vanishes with the unit (their pages count in its memory cgroup too). No
  task folder, gold, validator, run directory, suite source, home, other unit's scratch folder or host `/tmp`.
  Its question, system prompt and the MCP stdio bridge are copied into it.
- **Network**: only its two endpoints, the unit's model gateway at 127.0.0.1:GATEWAY_PORT and the unit's MCP
  tools at 127.0.0.1:MCP_PORT, relayed by the suite (tools/agent_network.py); nothing else on the host or
  beyond is reachable.
- **Limits**: a memory cgroup (`memory_mb`, all its processes together), a pids cgroup (`processes`), a CPU
  cgroup (`cpus` cores), RLIMIT_CPU (its wall time), RLIMIT_FSIZE (`file_size_mb`), and the unit's wall time.
- **Environment**: only what `systems/external.py` lists (no variable of the suite's, no key).
- **The end**: when the unit ends for any reason, the sandbox's init is killed and with it its PID namespace:
  nothing the agent started outlives the unit (a child that forked twice and called setsid() included). If the
  suite itself dies, bubblewrap's --die-with-parent does the same.

`agent_sandbox_problem()` says why no sandbox can be made here (no bwrap, no namespaces); a run then refuses
external systems unless `--unsandboxed-agents` is given.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from ..core.sanitize import terminal_text
from ..core.tool import ToolSettings
from . import bubblewrap
from .process_cgroups import ProcessCgroups, process_cgroups
from .process_cgroups import available as cgroup_limits_available
from .sandbox_memory import SandboxCgroup, memory_mode, sandbox_cgroup
from .seccomp import SeccompUnavailable, seccomp_program

SCRATCH = "/scratch"
RUN_FOLDER = "/run/dac"  # the suite's files for the agent: the launcher (and the stdio bridge, systems/external.py)
LAUNCHER = f"{RUN_FOLDER}/launch.py"
GATEWAY_PORT = 8000  # in the sandbox's own network namespace: any port is free there
MCP_PORT = 8001
AGENT_UID_BASE = 1_890_000_000  # far above any account; one uid per unit in flight (root only)
UID_SLOTS = 4096
UID_LOCKS = Path("/run/data-agent-compare/agent-uids")
OUTPUT_LIMIT = 200_000  # characters of stdout read as the answer
STDERR_TAIL = 1_500
SHM_BYTES = 64 << 20
START_TIMEOUT_S = 30.0  # bwrap and the launcher start in tens of milliseconds; this bounds a hang
HERE = Path(__file__).resolve().parent


class AgentSandboxError(RuntimeError):
    """The agent's sandbox could not be made (a folder it must show is unreadable, no uid left)."""


@dataclass(frozen=True)
class AgentLimits:
    """What one agent may use (ToolSettings.agent_*: `--agent-memory-mb` and the like)."""

    memory_mb: int = 1536
    processes: int = 256
    cpus: float = 1.0
    scratch_mb: int = 512
    file_size_mb: int = 256

    def describe(self) -> dict[str, Any]:
        """The manifest's record of the limits, and how each is enforced on this machine."""
        mode = memory_mode()
        controllers = cgroup_limits_available()
        return {
            "memory_mb": self.memory_mb,
            "memory": f"a memory {mode}" if mode != "single process" else "RLIMIT_AS per process (no cgroup)",
            "processes": self.processes,
            "processes_by": "a pids cgroup" if controllers["pids"] else "RLIMIT_NPROC of the agent's uid",
            "cpus": self.cpus if controllers["cpu"] else None,
            "cpu_time": "RLIMIT_CPU: the unit's wall time per process",
            "scratch_mb": self.scratch_mb,
            "file_size_mb": self.file_size_mb,
            "network": f"only the unit's gateway (127.0.0.1:{GATEWAY_PORT}) and MCP tools (127.0.0.1:{MCP_PORT})",
            "user": "a uid of its own per unit" if bubblewrap.privileged() else "uid 65534 in a user namespace",
        }


@dataclass(frozen=True)
class AgentBox:
    """What one agent's sandbox holds and runs."""

    argv: Sequence[str]
    env: Mapping[str, str]
    cwd: str = SCRATCH
    read_only: Sequence[Path] = ()  # host paths shown read-only at their own path
    files: Mapping[str, str | bytes] = field(default_factory=dict)  # sandbox path -> content, copied in read-only
    symlinks: Mapping[str, str] = field(default_factory=dict)  # sandbox path -> target
    writable: Mapping[Path, Path] = field(default_factory=dict)  # host folder -> where it is shown writable
    ports: Sequence[int] = ()  # ports the launcher listens on; their sockets go to `serve`


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's process ended."""

    returncode: int | None  # None: killed at the deadline; negative: killed by that signal
    stdout: str
    stderr_tail: str
    timed_out: bool
    seconds: float
    limit: str | None = None  # the sandbox limit that stopped it (memory, processes, CPU time, file size)
    memory_peak_bytes: int | None = None
    sandboxed: bool = True

    @property
    def failure(self) -> str | None:
        """Why the process failed (a non-zero status, a signal, a limit), or None when it exited cleanly."""
        if self.timed_out or self.returncode == 0:  # an agent that met a limit and went on did not fail
            return None
        code = self.returncode or 0
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        limit = f" at its sandbox's {self.limit}" if self.limit else ""
        tail = f"; its stderr ends: …{self.stderr_tail}" if self.stderr_tail else ""
        return f"the agent {how}{limit}{tail}"


Serve = Callable[[list[socket.socket]], AbstractContextManager[Any]]
AgentSandboxMode = Literal["bubblewrap", "unsandboxed", "unavailable"]


# ---------------------------------------------------------------- can one be made here


@functools.cache
def agent_sandbox_problem() -> str | None:
    """Why no agent sandbox can be made here, or None when it can (probed once per process)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed (apt-get install bubblewrap)"
    if bubblewrap.privileged() and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is not installed; as root it gives each agent a uid of its own"
    try:
        seccomp_program()
    except SeccompUnavailable as unavailable:
        return str(unavailable)
    probe = AgentBox(argv=[interpreter(), "-I", "-S", "-c", "print('ok')"], env={"PATH": bubblewrap.SANDBOX_PATH})
    try:
        outcome = run_in_sandbox(probe, AgentLimits(), timeout_s=30.0, serve=None)
    except (OSError, AgentSandboxError) as failed:
        return f"bwrap failed to start: {failed}"
    if outcome.returncode == 0 and outcome.stdout == "ok\n":
        return None
    detail = " ".join(outcome.stderr_tail.split())[:300] or f"exit status {outcome.returncode}"
    return f"bwrap failed: {detail}"


def interpreter() -> str:
    """The base interpreter of the suite's Python (visible in every sandbox): it runs the launcher and the bridge."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = Path(sys.base_prefix) / "bin" / version
    return str(candidate if candidate.exists() else Path(sys.executable).resolve())


def agent_sandbox_mode(settings: ToolSettings) -> AgentSandboxMode:
    """How external agents run under these settings: in their sandbox whenever one can be made; unsandboxed only
    where none can and the user allowed it (`--unsandboxed-agents`); else `unavailable` (the run refuses them)."""
    if agent_sandbox_problem() is None:
        return "bubblewrap"
    return "unsandboxed" if settings.unsandboxed_agents else "unavailable"


def agent_limits(settings: ToolSettings) -> AgentLimits:
    """The run's limits of each agent (`tools.agent_*`)."""
    return AgentLimits(
        memory_mb=settings.agent_memory_mb,
        processes=settings.agent_processes,
        cpus=settings.agent_cpus,
        scratch_mb=settings.agent_scratch_mb,
        file_size_mb=settings.agent_file_size_mb,
    )


# ---------------------------------------------------------------- running one


def run_in_sandbox(box: AgentBox, limits: AgentLimits, timeout_s: float, serve: Serve | None) -> AgentOutcome:
    """Run `box.argv` in a new sandbox until it exits or `timeout_s` passes; then nothing of it is left.
    The listening sockets of `box.ports` (in the sandbox's network namespace) are given to `serve` while it runs."""
    start = time.perf_counter()
    with contextlib.ExitStack() as stack:
        uid = stack.enter_context(agent_uid())
        _check_shown(box, uid)
        memory = stack.enter_context(sandbox_cgroup(limits.memory_mb << 20))
        processes = stack.enter_context(process_cgroups(limits.processes, limits.cpus))
        out, err = (stack.enter_context(tempfile.TemporaryFile()) for _ in range(2))
        host_end, sandbox_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        stack.callback(host_end.close)
        with sandbox_end:
            process, info = _start(stack, box, limits, uid, timeout_s, sandbox_end, memory, processes, out, err)
        deadline = time.monotonic() + timeout_s
        timed_out = _supervise(process, info, host_end, box, serve, deadline)
        stdout = _read(out, OUTPUT_LIMIT)
        stderr = terminal_text(_read(err, 1 << 20).strip())[-STDERR_TAIL:]
        status = None if timed_out else bubblewrap.exit_status(process.returncode)
        limit = _limit_reached(status, memory, processes, limits)
        peak = memory.peak_bytes() if memory else None
    return AgentOutcome(status, stdout, stderr, timed_out, time.perf_counter() - start, limit, peak)


def _start(
    stack: contextlib.ExitStack,
    box: AgentBox,
    limits: AgentLimits,
    uid: int,
    timeout_s: float,
    channel: socket.socket,
    memory: SandboxCgroup | None,
    processes: ProcessCgroups,
    out: IO[bytes],
    err: IO[bytes],
) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    config = {
        "limits": _rlimits(limits, timeout_s, uid, memory is not None, processes.pids is not None),
        "channel_fd": channel.fileno(),
        "ports": list(box.ports),
        "argv": list(box.argv),
        "cwd": box.cwd,
    }
    config_file = bubblewrap.anonymous_file(stack, json.dumps(config))
    info = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - the stack closes it
    files = {path: bubblewrap.anonymous_file(stack, content) for path, content in _all_files(box, uid).items()}
    seccomp = bubblewrap.anonymous_file(stack, seccomp_program(single_process=False))
    options = _options(box, limits, {path: file.fileno() for path, file in files.items()}, info, seccomp)
    args = bubblewrap.anonymous_file(stack, b"".join(option.encode() + b"\0" for option in options))
    program = [*bubblewrap.drop_to_user(uid), interpreter(), "-I", "-S", LAUNCHER, str(config_file.fileno())]
    joins = [*([memory.procs] if memory else []), *processes.procs]
    launch = ["/bin/sh", "-c", bubblewrap.JOIN_CGROUPS, "sh", *map(str, joins), "--"] if joins else []
    fds = [channel.fileno(), config_file.fileno(), info.fileno(), seccomp.fileno(), args.fileno()]
    process = subprocess.Popen(
        [*launch, bubblewrap.bwrap_path(), "--args", str(args.fileno()), "--", *program],
        env={},  # bwrap's own environment is empty too: the agent's is set by --setenv
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=err,
        pass_fds=[*fds, *(file.fileno() for file in files.values())],
        start_new_session=True,  # Ctrl-C in the terminal reaches the suite, which tears the sandbox down
    )
    return process, info


def _supervise(
    process: subprocess.Popen[bytes],
    info: IO[bytes],
    host_end: socket.socket,
    box: AgentBox,
    serve: Serve | None,
    deadline: float,
) -> bool:
    """Serve the agent's ports while it runs; True if the deadline came first. The sandbox is gone on return."""
    init = None
    try:
        init = bubblewrap.sandbox_init(process, info.fileno(), deadline)
        listeners = _receive_listeners(host_end, len(box.ports), deadline) if box.ports else []
        if serve is None:
            for listener in listeners:
                listener.close()
        with serve(listeners) if serve and listeners else contextlib.nullcontext():  # it closes them at its end
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        return False
    except subprocess.TimeoutExpired:
        return True
    finally:  # the deadline, the end, Ctrl-C or an error of ours: nothing outlives the unit
        bubblewrap.tear_down(process, init)


def _receive_listeners(host_end: socket.socket, count: int, deadline: float) -> list[socket.socket]:
    """The launcher's listening sockets; none if it failed before sending them (its stderr says why)."""
    host_end.settimeout(max(0.1, min(START_TIMEOUT_S, deadline - time.monotonic())))
    try:
        message, fds, _, _ = socket.recv_fds(host_end, 16, count)
    except (OSError, TimeoutError):
        return []
    if message != b"ready" or len(fds) != count:
        for fd in fds:
            os.close(fd)
        return []
    return [socket.socket(fileno=fd) for fd in fds]


def _options(
    box: AgentBox, limits: AgentLimits, file_fds: Mapping[str, int], info: IO[bytes], seccomp: IO[bytes]
) -> list[str]:
    mounts = bubblewrap.system_mounts()
    bubblewrap.python_mounts(mounts)
    mounts.show(Path(path).resolve() for path in box.read_only)
    bubblewrap.suite_masks(mounts)
    # /tmp first: an agent folder shown from under the host's /tmp is mounted into this empty one
    options = [*bubblewrap.isolation_options(), "--perms", "1777", "--size", str(limits.scratch_mb << 20)]
    options += ["--tmpfs", "/tmp", *bubblewrap.mount_options(mounts)]
    options += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", RUN_FOLDER]
    for parent in bubblewrap.parent_folders(mounts, box.writable.values()):  # bwrap would make them 0700
        options += ["--perms", "0755", "--dir", str(parent)]
    for folder, shown in box.writable.items():
        options += ["--bind", str(folder), str(shown)]
    options += ["--perms", "0755", "--dir", "/etc/ssl"]  # bwrap makes the folders of a destination 0700
    for name in ("ssl/certs", "ssl/openssl.cnf", "alternatives", "ld.so.cache", "localtime"):
        if Path("/etc", name).exists():
            options += ["--ro-bind", str(Path("/etc", name).resolve()), f"/etc/{name}"]
    options += ["--proc", "/proc", "--dev", "/dev"]
    options += ["--perms", "1777", "--size", str(limits.scratch_mb << 20), "--tmpfs", SCRATCH]
    options += ["--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    for path, fd in file_fds.items():
        writable = path.startswith(f"{SCRATCH}/")  # its own copies (question, agent files) it may change
        options += ["--perms", "0666" if writable else "0444", "--file", str(fd), path]
    for path, target in box.symlinks.items():
        options += ["--symlink", target, path]
    options += ["--chdir", "/", "--clearenv"]
    for name, value in box.env.items():
        options += ["--setenv", name, value]
    return [*options, "--info-fd", str(info.fileno()), "--seccomp", str(seccomp.fileno())]


def run_build(
    command: str, cwd: Path, read_only: Sequence[Path], writable: Mapping[Path, Path], timeout_s: float
) -> AgentOutcome:
    """An environment's build command (`sh -c`) in an agent's sandbox: no network, `read_only` shown, only the
    `writable` folders (its output) and its scratch folder writable; more memory, disk and CPU than a unit."""
    env = {
        "PATH": bubblewrap.SANDBOX_PATH,
        "HOME": SCRATCH,
        "TMPDIR": "/tmp",
        "XDG_CACHE_HOME": f"{SCRATCH}/.cache",
        "LANG": "C.UTF-8",
    }
    box = AgentBox(["/bin/sh", "-c", command], env, str(cwd), read_only=read_only, writable=writable)
    limits = AgentLimits(memory_mb=4096, processes=1024, cpus=float(os.cpu_count() or 1), scratch_mb=4096)
    return run_in_sandbox(box, limits, timeout_s, serve=None)


def _all_files(box: AgentBox, uid: int) -> dict[str, str | bytes]:
    """The box's files and the few of /etc a program expects (its user, localhost)."""
    passwd = f"root:x:0:0:root:/:/usr/sbin/nologin\nagent:x:{uid}:{uid}:agent:{SCRATCH}:/bin/sh\n"
    return {
        "/etc/passwd": passwd,
        "/etc/group": f"root:x:0:\nagent:x:{uid}:\n",
        "/etc/hosts": "127.0.0.1 localhost\n::1 localhost ip6-localhost\n",
        "/etc/nsswitch.conf": "passwd: files\ngroup: files\nhosts: files\n",
        LAUNCHER: (HERE / "agent_launcher.py").read_bytes(),
        **box.files,
    }


def _rlimits(limits: AgentLimits, timeout_s: float, uid: int, memory_cgroup: bool, pids_cgroup: bool) -> dict[str, int]:
    rlimits = {
        "RLIMIT_CPU": math.ceil(timeout_s) + 5,  # per process; the CPU cgroup bounds them together
        "RLIMIT_FSIZE": limits.file_size_mb << 20,
        "RLIMIT_CORE": 0,
        "RLIMIT_NOFILE": 4096,
    }
    if not memory_cgroup:  # the weaker bound, stated in the manifest (`AgentLimits.describe`)
        rlimits["RLIMIT_AS"] = limits.memory_mb << 20
    if bubblewrap.privileged() or not pids_cgroup:  # the unit's own uid: exactly its processes
        rlimits["RLIMIT_NPROC"] = limits.processes
    return rlimits


def _limit_reached(
    status: int | None, memory: SandboxCgroup | None, processes: ProcessCgroups, limits: AgentLimits
) -> str | None:
    if memory is not None and memory.oom_kills():
        return f"memory limit of {limits.memory_mb} MB"
    if status == -24:  # SIGXCPU
        return "CPU time limit"
    if status == -25:  # SIGXFSZ
        return f"file-size limit of {limits.file_size_mb} MB"
    if processes.pids_refused():
        return f"process limit of {limits.processes}"
    return None


def _check_shown(box: AgentBox, uid: int) -> None:
    """Every folder the agent must read is readable by its uid, else a clear error (root's files often are not)."""
    if not bubblewrap.privileged():
        return
    folders = [Path(path) for path in box.read_only if Path(path).is_dir()]
    try:
        bubblewrap.check_readable(folders, uid)
    except PermissionError as unreadable:
        raise AgentSandboxError(str(unreadable)) from None
    for folder in box.writable:
        os.chown(folder, uid, uid)


def _read(stream: IO[bytes], limit: int) -> str:
    stream.seek(0)
    return stream.read(limit * 4).decode("utf-8", errors="replace")[:limit]


@contextlib.contextmanager
def agent_uid() -> Iterator[int]:
    """A uid no other unit on this machine holds now (root), locked until the unit ends; 65534 otherwise."""
    if not bubblewrap.privileged():
        yield bubblewrap.NOBODY
        return
    UID_LOCKS.mkdir(parents=True, exist_ok=True, mode=0o700)
    for slot in range(UID_SLOTS):
        with (UID_LOCKS / f"{slot}.lock").open("a") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            uid = AGENT_UID_BASE + slot
            if bubblewrap.task_count(uid):  # a process of that uid survived something: never share it
                continue
            yield uid
            return
    raise AgentSandboxError(f"no free agent uid: {UID_SLOTS} agents are running on this machine")
