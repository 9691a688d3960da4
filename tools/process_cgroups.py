"""Process and CPU limits of a sandbox as cgroups (beside its memory cgroup, tools/sandbox_memory.py).

A sandbox of an external agent gets, where this machine lets the suite make them:

- a pids cgroup: at most `pids_max` processes and threads together, whatever uid they run as (a fork bomb
  stops there, with EAGAIN, and hurts nobody else);
- a CPU cgroup: at most `cpus` cores of CPU time (CFS bandwidth), so a spinning agent leaves the runner and the
  other units their share.

cgroup v1 has one hierarchy per controller (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/cpu`); v2 one hierarchy
with the controllers enabled in `cgroup.subtree_control`. Where a controller cannot be used (not mounted, not
writable, not delegated) its limit is None, and the caller says so (RLIMIT_NPROC then bounds the processes).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "compare-agent"
CPU_PERIOD_US = 100_000
REMOVE_WAIT_S = 5.0
_numbers = itertools.count()


@dataclass
class ProcessCgroups:
    """One sandbox's pids and CPU cgroups (either may be missing); its processes join through `procs`."""

    pids: Path | None = None
    cpu: Path | None = None
    procs: list[Path] = field(default_factory=list)

    def pids_refused(self) -> int:
        """How many forks the pids limit refused (0 when unknown)."""
        if self.pids is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (self.pids / "pids.events").read_text().splitlines():
                name, _, count = line.partition(" ")
                if name == "max":
                    return int(count)
        return 0


def _own_folder(controller: str) -> Path | None:
    """This process's cgroup folder for `controller` when the suite may make children there."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            folder = CGROUP_ROOT / controller / path.lstrip("/")
            if not folder.is_dir():
                folder = CGROUP_ROOT / ",".join(sorted(controllers.split(","))) / path.lstrip("/")
            if folder.is_dir() and os.access(folder, os.W_OK):
                return folder
    for line in lines:
        if line.startswith("0::"):
            for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                folder = root / line[3:].lstrip("/")
                enabled = folder / "cgroup.subtree_control"
                if enabled.is_file() and controller in enabled.read_text().split() and os.access(folder, os.W_OK):
                    return folder
    return None


def available() -> dict[str, bool]:
    """Which of the two limits this process can set (for the manifest and the docs)."""
    return {"pids": _own_folder("pids") is not None, "cpu": _own_folder("cpu") is not None}


@contextlib.contextmanager
def process_cgroups(pids_max: int, cpus: float | None) -> Iterator[ProcessCgroups]:
    """New pids and CPU cgroups for one sandbox, removed afterwards once their processes are gone."""
    _sweep_once()
    made = ProcessCgroups()
    folders: list[Path] = []
    try:
        pids_parent = _own_folder("pids")
        if pids_parent is not None:
            made.pids = _make(pids_parent, folders)
            if made.pids is not None:
                (made.pids / "pids.max").write_text(str(pids_max))
                made.procs.append(made.pids / "cgroup.procs")
        cpu_parent = _own_folder("cpu") if cpus else None
        if cpu_parent is not None and cpus:
            same = made.pids is not None and cpu_parent == pids_parent  # v2: one folder holds both
            made.cpu = made.pids if same else _make(cpu_parent, folders)
            if made.cpu is not None:
                _limit_cpu(made.cpu, cpus)
                if not same:
                    made.procs.append(made.cpu / "cgroup.procs")
        yield made
    finally:
        for folder in reversed(folders):
            _remove(folder)


def _make(parent: Path, folders: list[Path]) -> Path | None:
    folder = parent / f"{PREFIX}-{os.getpid()}-{next(_numbers)}"
    try:
        folder.mkdir()
    except OSError:
        return None
    folders.append(folder)
    return folder


def _limit_cpu(folder: Path, cpus: float) -> None:
    quota = max(1000, int(cpus * CPU_PERIOD_US))
    if (folder / "cpu.max").exists():  # v2
        (folder / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        return
    (folder / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
    (folder / "cpu.cfs_quota_us").write_text(str(quota))


def _remove(folder: Path) -> None:
    """rmdir, retried while the kernel lets go of the last processes (killed if any remain)."""
    deadline = time.monotonic() + REMOVE_WAIT_S
    while True:
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # swept by a later run (sweep_stale)
            with contextlib.suppress(OSError):
                for pid in (folder / "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), 9)
            time.sleep(0.01)


@functools.cache
def _sweep_once() -> None:
    sweep_stale()


def sweep_stale() -> None:
    """Remove empty cgroups of sandboxes whose runner is gone (`compare-agent-<pid>-<n>`)."""
    for controller in ("pids", "cpu"):
        parent = _own_folder(controller)
        if parent is None:
            continue
        for folder in parent.glob(f"{PREFIX}-*-*"):
            pid = folder.name.split("-")[-2]
            if pid.isdigit() and not Path("/proc", pid).exists():
                with contextlib.suppress(OSError):
                    folder.rmdir()
