"""What the viewer computes from a run, kept: in memory until the run's files change, and (for overviews) on
disk in the user's cache folder, so a 16,000-unit run's overview is computed once, not at every visit or every
start of the viewer. A run that changes while it runs is computed again at most every `RECOMPUTE_FACTOR` times
its last computation took (at least `MIN_AGE_S`): following a large run live never keeps a core busy."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any, Generic, TypeVar

from .catalog import fingerprint, read_manifest_json

Value = TypeVar("Value")
RECOMPUTE_FACTOR = 4.0
MIN_AGE_S = 2.0
KEPT_FILES = 64  # overviews kept on disk, the least recently written removed first


@dataclass
class _Kept(Generic[Value]):
    stamp: tuple[int, ...]
    value: Value
    computed_at: float  # monotonic
    took_s: float


class RunCache(Generic[Value]):
    """`compute(path)` per run directory, one computation per run at a time (other callers wait for it)."""

    def __init__(self, compute: Callable[[Path], Value], disk: DiskCache | None = None) -> None:
        self.compute, self.disk = compute, disk
        self._kept: dict[Path, _Kept[Value]] = {}
        self._locks: dict[Path, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, path: Path) -> Value:
        with self._lock:
            lock = self._locks.setdefault(path, threading.Lock())
        with lock:
            stamp = fingerprint(path)
            kept = self._kept.get(path)
            if kept is not None and self._usable(kept, stamp, path):
                return kept.value
            started = time.monotonic()
            value = self.disk.get(path, stamp) if self.disk else None
            if value is None:
                value = self.compute(path)
                if self.disk:
                    self.disk.put(path, stamp, value)
            self._kept[path] = _Kept(stamp, value, time.monotonic(), time.monotonic() - started)
            return value

    def peek(self, path: Path) -> Value | None:
        """The value `get` would give now, if it is at hand (kept, or on disk); None if it must be computed."""
        stamp = fingerprint(path)
        kept = self._kept.get(path)
        if kept is not None and self._usable(kept, stamp, path):
            return kept.value
        found: Value | None = self.disk.get(path, stamp) if self.disk else None
        return found

    def _usable(self, kept: _Kept[Value], stamp: tuple[int, ...], path: Path) -> bool:
        """A kept value is the run's while its files are as they were, or while it runs and was made lately."""
        return kept.stamp == stamp or (self._recent(kept) and _running(path))

    def _recent(self, kept: _Kept[Value]) -> bool:
        """Computed so lately that a running run's newer files wait (a bounded share of a core); once the run
        has ended, its last state is computed at once."""
        return time.monotonic() - kept.computed_at < max(MIN_AGE_S, RECOMPUTE_FACTOR * kept.took_s)


def _running(path: Path) -> bool:
    return read_manifest_json(path).get("status") == "running"


def _code_version() -> str:
    """A digest of the report code: an overview cached by other code is computed again."""
    digest = hashlib.sha256()
    reports = files("data_agent_compare.reports")
    for module in sorted((p for p in reports.iterdir() if p.name.endswith(".py")), key=lambda p: p.name):
        digest.update(module.name.encode() + module.read_bytes())
    return digest.hexdigest()[:16]


class DiskCache:
    """JSON values in `folder`, one gzip file per run and state of its files, readable by this user only."""

    def __init__(self, folder: Path | None = None) -> None:
        cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        self.folder = folder or cache_home / "data-agent-compare" / "viewer"
        self.version = _code_version()

    def _file(self, path: Path, stamp: tuple[int, ...]) -> Path:
        key = json.dumps([str(path.resolve()), stamp, self.version])
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json.gz"

    def get(self, path: Path, stamp: tuple[int, ...]) -> Any:
        try:
            return json.loads(gzip.decompress(self._file(path, stamp).read_bytes()))
        except (OSError, ValueError, EOFError):
            return None

    def put(self, path: Path, stamp: tuple[int, ...], value: Any) -> None:
        """Kept when it can be (a read-only home folder only costs the next start its computation); a running
        run's overview is not: it is stale at its next unit."""
        if read_manifest_json(path).get("status", "running") == "running":
            return
        target = self._file(path, stamp)
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
            descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(gzip.compress(json.dumps(value, ensure_ascii=False).encode("utf-8"), compresslevel=3))
            partial.replace(target)
            kept = sorted(self.folder.glob("*.json.gz"), key=lambda file: file.stat().st_mtime, reverse=True)
            for old in kept[KEPT_FILES:]:
                old.unlink(missing_ok=True)
        except OSError:
            return
