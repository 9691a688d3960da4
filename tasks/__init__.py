"""Benchmarks: loaders that turn published task files into `compare.task.Task`s.

`load_benchmark(name, path)` is the one entry point the runner uses. Register a
benchmark by adding its loader to `BENCHMARKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from compare.task import Task


def _bundled(path: Path | None) -> list[Task]:
    from tasks.bundled import load_bundled

    return load_bundled(path)


BENCHMARKS: dict[str, Callable[[Path | None], list[Task]]] = {"bundled": _bundled}


def benchmark_names() -> list[str]:
    return sorted(BENCHMARKS)


def load_benchmark(name: str, path: str | Path | None = None) -> list[Task]:
    if name not in BENCHMARKS:
        raise KeyError(name)
    return BENCHMARKS[name](Path(path) if path else None)
