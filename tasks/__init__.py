"""Benchmarks: loaders that turn published task files into `compare.task.Task`s.

`load_benchmark(name, path)` is the one entry point the runner uses. Register a
benchmark by adding its loader to `BENCHMARKS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from compare.task import Task


def _bundled(path: Path | None) -> list[Task]:  # the suite's own files unless a path is given
    from tasks.bundled import load_bundled

    return load_bundled(path)


def _needs_path(name: str, load: Callable[..., list[Task]]) -> Callable[..., list[Task]]:
    def loader(path: Path | None, **options: Any) -> list[Task]:
        if path is None:
            raise ValueError(f"the {name} benchmark needs its task files: give --tasks-path (compare score: --tasks)")
        return load(path, **options)

    return loader


def _fdabench(path: Path) -> list[Task]:
    from tasks.fdabench import load_fdabench

    return load_fdabench(path)


def _dabstep(path: Path) -> list[Task]:
    from tasks.dabstep import load_dabstep

    return load_dabstep(path)


def _dbgorilla(path: Path) -> list[Task]:
    from tasks.dbgorilla import load_dbgorilla

    return load_dbgorilla(path)


def _dab(path: Path, hints: bool = False) -> list[Task]:
    from tasks.dab import load_dab

    return load_dab(path, hints=hints, build_missing=True)  # e.g. bookreview's review table, published as JSON Lines


BENCHMARKS: dict[str, Callable[..., list[Task]]] = {
    "bundled": _bundled,
    "fdabench": _needs_path("fdabench", _fdabench),
    "dabstep": _needs_path("dabstep", _dabstep),
    "dbgorilla": _needs_path("dbgorilla", _dbgorilla),
    "dab": _needs_path("dab", _dab),
}


def benchmark_names() -> list[str]:
    return sorted(BENCHMARKS)


def load_benchmark(name: str, path: str | Path | None = None, *, hints: bool = False) -> list[Task]:
    """`hints`: DAB's dataset descriptions with hints (db_description_withhint.txt)."""
    if name not in BENCHMARKS:
        raise KeyError(name)
    options = {"hints": True} if hints and name == "dab" else {}
    return BENCHMARKS[name](Path(path) if path else None, **options)


def data_warnings(benchmark: str, path: str | Path | None, tasks: list[Task]) -> list[str]:
    """What is missing from the benchmark's data, and which tasks it affects (printed before a run)."""
    if benchmark != "dabstep" or path is None:
        return []
    from tasks.dabstep import dabstep_missing_files

    warnings = dabstep_missing_files(Path(path))
    if any(w.startswith("payments.csv") for w in warnings):
        needing = [t.id for t in tasks if t.metadata.get("needs_payments")]
        warnings.append(f"tasks that look like they need payments.csv ({len(needing)}): {', '.join(needing) or 'none'}")
    return warnings
