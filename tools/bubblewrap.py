"""The mechanics every sandbox of the suite shares: bubblewrap's mounts, namespaces, the user it drops to, and a
teardown that leaves no process behind.

Two sandboxes are built on it: model-written Python (tools/python_sandbox.py, `execute_python`) and external
agents (systems/agent_sandbox.py). Each decides what it shows; this module knows how:

- `Mounts`: host paths shown read-only at their own place, symlinks recreated (`/bin` → `usr/bin`), and the
  suite's own files masked wherever an interpreter's folders would show them (`system_mounts`,
  `python_mounts`, `suite_masks`); `mount_options` turns them into bwrap options.
- `isolation_options(uid)`: new PID, IPC, UTS, network, mount and cgroup namespaces, no terminal, death with
  the parent. Run by root, bwrap runs privileged and `drop_to_user(uid)` (setpriv) becomes `uid` in the host's
  user namespace, with no capabilities: a user namespace would map the sandbox onto root, where RLIMIT_NPROC
  never binds. Run by another user, bwrap makes a user namespace and the sandbox is uid 65534 inside it.
- `sandbox_init` and `tear_down`: the sandbox's init (pid 1 of its PID namespace) followed by a pidfd, and
  killed at the end whatever happened; the kernel then kills every process of the namespace (children that
  called setsid() included), and the pidfd turns readable once they are all gone.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

NOBODY = 65534
TEARDOWN_TIMEOUT_S = 10.0  # the kernel ends a PID namespace in milliseconds; this only bounds a hang
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
PACKAGE = __package__.partition(".")[0]  # data_agent_compare: masked in every sandbox
# Joins each cgroup named before `--` (their cgroup.procs files), then becomes the rest: nothing runs outside them.
JOIN_CGROUPS = 'while [ "$1" != -- ]; do echo 0 > "$1" || exit 125; shift; done; shift; exec "$@"'


def privileged() -> bool:
    return os.geteuid() == 0


def anonymous_file(stack: contextlib.ExitStack, content: str | bytes) -> IO[bytes]:
    """An unlinked temporary file holding `content`, positioned at its start (bwrap reads it by fd)."""
    file = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 - the stack closes it
    file.write(content.encode() if isinstance(content, str) else content)
    file.flush()
    file.seek(0)
    return file


def check_readable(folders: Iterable[Path], uid: int = NOBODY) -> None:
    """A PermissionError naming the folder when `uid` (not its owner) could not read and enter it."""
    for folder in folders:
        status = folder.stat()
        mode = status.st_mode
        if status.st_uid != uid and mode & 0o005 != 0o005:
            raise PermissionError(
                f"the sandbox runs as uid {uid} and cannot read {folder} (mode {mode & 0o777:o}); "
                f"make it readable: chmod -R o+rX {folder}"
            )


def exit_status(returncode: int) -> int:
    """bwrap exits with 128+n when the program was killed by signal n."""
    if returncode > 128 and (returncode - 128) in signal.valid_signals():
        return -(returncode - 128)
    return returncode


def tear_down(process: subprocess.Popen[bytes], init: int | None) -> None:
    """Kill the sandbox's init (so its whole PID namespace), wait until every process of it is gone."""
    if init is None:  # never saw the init: killing bwrap kills it (--die-with-parent)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    else:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(init, signal.SIGKILL)
        gone = select.poll()  # not select(): a busy runner's fds may exceed FD_SETSIZE
        gone.register(init, select.POLLIN)
        gone.poll(TEARDOWN_TIMEOUT_S * 1000)  # readable once it and its whole namespace are gone
        os.close(init)
    try:
        process.wait(timeout=TEARDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def sandbox_init(process: subprocess.Popen[bytes], info_fd: int, deadline: float) -> int | None:
    """A pidfd of the sandbox's init, from bwrap's --info-fd `child-pid`, taken while bwrap runs.

    bwrap writes the pid right after creating the init, long before a program can end; None if
    bwrap ended (or the deadline passed) first.
    """
    while process.poll() is None and time.monotonic() < deadline:
        try:
            child = int(json.loads(os.pread(info_fd, 4096, 0))["child-pid"])
        except (ValueError, KeyError):  # not written yet
            time.sleep(0.002)
            continue
        try:
            pidfd = os.pidfd_open(child)
        except OSError:
            return None
        if _parent_of(child) == process.pid:  # checked after pidfd_open: the pidfd is that child's
            return pidfd
        os.close(pidfd)
        return None
    return None


def _parent_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


# ---------------------------------------------------------------- what a sandbox shows


@dataclass
class Mounts:
    """Host paths shown read-only at the same place, symlinks to recreate, suite entries to mask."""

    trees: list[Path] = field(default_factory=list)
    links: dict[Path, str] = field(default_factory=dict)  # link -> target
    masks: list[Path] = field(default_factory=list)

    def visible(self, path: Path) -> bool:
        return any(path.is_relative_to(tree) for tree in self.trees)

    def show(self, paths: Iterable[Path]) -> None:
        for path in sorted(set(paths), key=lambda p: len(p.parts)):  # outer folders first
            if not self.visible(path):
                self.trees = [tree for tree in self.trees if not tree.is_relative_to(path)] + [path]


def system_mounts() -> Mounts:
    """`/usr` and the top-level `/bin`, `/sbin`, `/lib*` (links or folders)."""
    mounts = Mounts()
    mounts.show([Path("/usr")])
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        top = Path("/", name)
        if top.is_symlink():
            mounts.links[top] = os.readlink(top)
        elif top.is_dir():
            mounts.show([top])
    return mounts


def site_dirs() -> list[Path]:
    """Where installed packages live, for this interpreter and its base."""
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    found = [sysconfig.get_paths()[key] for key in ("purelib", "platlib")]
    found += [sysconfig.get_paths(vars=base)[key] for key in ("purelib", "platlib")]
    found += site.getsitepackages()
    return [Path(p) for p in dict.fromkeys(found) if Path(p).is_dir()]


def python_mounts(mounts: Mounts) -> None:
    """The interpreter and installed packages, but of a virtualenv in a checkout nothing else."""
    runtime = [Path(sys.base_prefix), Path(sys.base_exec_prefix)]
    if sys.prefix != sys.base_prefix:
        runtime.append(Path(sys.prefix, "pyvenv.cfg"))
    mounts.show([*runtime, *site_dirs()])
    executable = Path(sys.executable)
    if executable.is_symlink():
        target = Path(os.path.realpath(executable))
        mounts.show([target])
        if not mounts.visible(executable):
            mounts.links[executable] = str(target)
    else:
        mounts.show([executable])


def suite_masks(mounts: Mounts) -> None:
    """The suite's own files wherever they would be visible: its package, dist-info, editable finder."""
    own = [Path(__file__).resolve().parents[1]]
    for folder in site_dirs():
        for pattern in (f"{PACKAGE}*", f"__editable__*{PACKAGE}*", f"__pycache__/__editable__*{PACKAGE}*"):
            own += folder.glob(pattern)
    mounts.masks = sorted({path for path in own if mounts.visible(path)})


def parent_folders(mounts: Mounts, targets: Iterable[Path]) -> list[Path]:
    """Folders to create in the sandbox's root so each target has a path (bwrap's own are mode 0700)."""
    parents = {parent for target in targets for parent in target.parents if parent != Path("/")}
    return sorted((p for p in parents if not mounts.visible(p)), key=lambda p: len(p.parts))


def mount_options(mounts: Mounts) -> list[str]:
    """bwrap options showing `mounts`: parent folders, read-only trees, symlinks, then the masks over them."""
    options: list[str] = []
    for folder in parent_folders(mounts, [*mounts.trees, *mounts.links]):
        options += ["--perms", "0755", "--dir", str(folder)]
    for tree in sorted(mounts.trees, key=lambda p: len(p.parts)):
        options += ["--ro-bind", str(tree), str(tree)]
    for link, target in mounts.links.items():
        options += ["--symlink", target, str(link)]
    for mask in mounts.masks:  # an empty folder or file in its place
        empty = ["--perms", "0555", "--size", "4096", "--tmpfs"] if mask.is_dir() else ["--ro-bind", "/dev/null"]
        options += [*empty, str(mask)]
    return options


# ---------------------------------------------------------------- who runs in it


def bwrap_path() -> str:
    return shutil.which("bwrap") or "bwrap"


def isolation_options(uid: int = NOBODY) -> list[str]:
    """Namespaces and privileges (module docstring); `uid` is the sandbox's user when bwrap runs unprivileged."""
    common = ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    if privileged():  # no user namespace: setpriv drops to the sandbox's uid (see the module docstring)
        keep = ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        namespaces = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        return [*namespaces, "--cap-drop", "ALL", *keep, *common]
    ids = ["--uid", str(NOBODY), "--gid", str(NOBODY)]
    return ["--unshare-all", "--unshare-user", "--disable-userns", *ids, *common]


def drop_to_user(uid: int = NOBODY) -> list[str]:
    """The command prefix that becomes `uid` with no capabilities (root only; else bwrap's user namespace did)."""
    if not privileged():
        return []
    ids = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
    return [shutil.which("setpriv") or "setpriv", *ids, "--inh-caps=-all", "--bounding-set=-all", "--"]


def task_count(uid: int) -> int:
    """Threads `uid` runs now: RLIMIT_NPROC counts all of them, so a limit must start above."""
    count = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += int(fields["Threads"])
        except (OSError, KeyError, ValueError):  # the process ended while we looked
            continue
    return count
