"""One memory budget for the whole Python sandbox (tools/python_sandbox.py), not one per process.

RLIMIT_AS bounds each process's address space, not what the sandbox holds together: five forked
children held 2.28-2.65 GB under a 1024 MB budget, six 512 MB System V shared-memory segments put
3.1 GB into host memory, and 192 socketpair buffers held 1.5 GB of kernel memory. Two ways to make
the budget whole, chosen once per process (`memory_mode()`) and recorded in the run's manifest:

- "cgroup v1" / "cgroup v2": each sandbox gets its own memory cgroup, a child of the runner's,
  with the budget as its limit. The cgroup counts every process in it, the shared memory they
  touch and the kernel memory they allocate (v1: `memory.limit_in_bytes`, swap included through
  `memory.memsw.limit_in_bytes`, socket buffers through `memory.kmem.tcp.limit_in_bytes`; v2:
  `memory.max`, `memory.swap.max` 0, sockets counted by default). Past the budget the kernel
  reclaims, then kills a process of that sandbox only. The sandbox's launcher joins the cgroup
  (`echo 0 > cgroup.procs`) before it execs bubblewrap, so nothing runs outside it.
- "single process" where no cgroup can be made (no writable memory controller: not root, no
  delegation): the seccomp filter refuses new processes (clone without CLONE_THREAD, fork, vfork)
  and System V shared memory, so the per-process RLIMIT_AS is the whole budget (threads share it).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

MemoryMode = Literal["cgroup v1", "cgroup v2", "single process"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PREFIX = "compare-sandbox"
_numbers = itertools.count()
REMOVE_WAIT_S = 5.0


def sweep_stale(parent: Path) -> None:
    """Remove the empty cgroups of sandboxes whose runner is gone (`compare-sandbox-<pid>-<n>`)."""
    for folder in parent.glob(f"{PREFIX}-*-*"):
        pid = folder.name.split("-")[-2]
        if pid.isdigit() and not Path("/proc", pid).exists():
            with contextlib.suppress(OSError):
                folder.rmdir()


@functools.cache
def memory_mode() -> MemoryMode:
    """Which budget the sandboxes of this process get (probed once, by making and removing a cgroup)."""
    parent = _parent_cgroup()
    if parent is None:
        return "single process"
    version, folder = parent
    sweep_stale(folder)
    try:
        with memory_cgroup(1 << 30, version, folder):
            return version
    except OSError:
        return "single process"


def describe(mode: MemoryMode, memory_mb: int) -> str:
    """The manifest's one line on the sandbox's memory budget."""
    if mode == "single process":
        return f"{memory_mb} MB per sandbox: one process (fork and System V shared memory refused), RLIMIT_AS"
    return f"{memory_mb} MB per sandbox: a memory {mode} counting all its processes, shared memory and kernel memory"


@dataclass(frozen=True)
class SandboxCgroup:
    """One sandbox's memory cgroup: its processes join through `procs`."""

    folder: Path
    version: str

    @property
    def procs(self) -> Path:
        return self.folder / "cgroup.procs"

    def peak_bytes(self) -> int | None:
        """The most memory the sandbox held at once (the kernel's count), None if unreadable."""
        name = "memory.peak" if self.version == "cgroup v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.folder / name).read_text())
        except (OSError, ValueError):
            return None

    def oom_kills(self) -> int:
        """How many of the sandbox's processes the kernel killed at the budget (0 when unknown)."""
        name = "memory.events" if self.version == "cgroup v2" else "memory.oom_control"
        try:
            lines = (self.folder / name).read_text().splitlines()
        except OSError:
            return 0
        for line in lines:
            key, _, count = line.partition(" ")
            if key == "oom_kill" and count.strip().isdigit():
                return int(count)
        return 0


@contextlib.contextmanager
def sandbox_cgroup(budget_bytes: int) -> Iterator[SandboxCgroup | None]:
    """A new memory cgroup of `budget_bytes` for one sandbox (removed afterwards, once its processes
    are gone), or None in "single process" mode."""
    parent = _parent_cgroup() if memory_mode() != "single process" else None
    if parent is None:
        yield None
        return
    with memory_cgroup(budget_bytes, *parent) as cgroup:
        yield cgroup


@contextlib.contextmanager
def memory_cgroup(budget_bytes: int, version: str, parent: Path) -> Iterator[SandboxCgroup]:
    folder = parent / f"{PREFIX}-{os.getpid()}-{next(_numbers)}"
    folder.mkdir()
    try:
        _limit(folder, version, budget_bytes)
        yield SandboxCgroup(folder, version)
    finally:
        _remove(folder)


def _limit(folder: Path, version: str, budget: int) -> None:
    if version == "cgroup v2":
        (folder / "memory.max").write_text(str(budget))
        with contextlib.suppress(FileNotFoundError):  # no swap controller: nothing to swap to either
            (folder / "memory.swap.max").write_text("0")
        return
    (folder / "memory.limit_in_bytes").write_text(str(budget))
    # Optional files: swap accounting (memsw) and TCP buffer accounting exist only on some kernels.
    # Kernel memory (slab, page tables, socket buffers) is charged to memory.limit_in_bytes as well.
    for name in ("memory.memsw.limit_in_bytes", "memory.kmem.tcp.limit_in_bytes"):
        with contextlib.suppress(FileNotFoundError):
            (folder / name).write_text(str(budget))
    with contextlib.suppress(OSError):
        (folder / "memory.swappiness").write_text("0")


def _remove(folder: Path) -> None:
    """rmdir, retried for up to REMOVE_WAIT_S: the kernel lets go of a cgroup a moment after its last
    process ends (longer after an out-of-memory kill). One left behind is swept by a later sandbox."""
    for _ in range(int(REMOVE_WAIT_S / 0.01)):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY: a process is still leaving
            procs = folder / "cgroup.procs"
            with contextlib.suppress(OSError):
                for pid in procs.read_text().split():
                    with contextlib.suppress(ProcessLookupError, ValueError):
                        os.kill(int(pid), 9)
            time.sleep(0.01)


def _parent_cgroup() -> tuple[MemoryMode, Path] | None:
    """("cgroup v1" | "cgroup v2", the runner's own memory cgroup folder) when it can hold children."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            folder = CGROUP_ROOT / "memory" / path.lstrip("/")
            if folder.is_dir() and os.access(folder, os.W_OK) and (folder / "memory.limit_in_bytes").exists():
                return "cgroup v1", folder
    for line in lines:
        if line.startswith("0::"):
            for root in (CGROUP_ROOT, CGROUP_ROOT / "unified"):
                folder = root / line[3:].lstrip("/")
                enabled = folder / "cgroup.subtree_control"
                if enabled.is_file() and "memory" in enabled.read_text().split() and os.access(folder, os.W_OK):
                    return "cgroup v2", folder
    return None
