"""`compare import FORMAT PATH --out RUN_DIR`: published agent trajectories as a run directory."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from . import common
from .common import benchmark_at, fail


@dataclass(frozen=True)
class ImportOptions:
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="dab-trajectories")]
    path: Annotated[Path, typer.Argument(help="The published files (a results-<model>/ folder or above it).")]
    out: Annotated[Path, typer.Option(help="The run directory to write.")]
    system: Annotated[str, typer.Option(help="The system name the trials are recorded under.")] = "dab-react"
    tasks_path: Annotated[
        Path | None, typer.Option(help="The benchmark's task files: score each answer with its official rule.")
    ] = None
    hints: Annotated[bool, typer.Option("--hints", help="DAB: the tasks' descriptions with hints.")] = False


def import_run(options: ImportOptions) -> None:
    """Turn published agent trajectories into a run directory every other command reads (compare report)."""
    from ...core.benchmark import BenchmarkError
    from ...engine.importer import IMPORT_FORMATS, ImportFailed, import_trajectories
    from ...tasks.dab_trajectories import BENCHMARK

    if options.fmt not in IMPORT_FORMATS:
        raise fail(f"unknown import format {options.fmt!r} (known: {', '.join(IMPORT_FORMATS)})")
    if not options.path.exists():
        raise fail(f"not found: {options.path}")
    out = options.out
    if (out / "results.jsonl").exists():
        raise fail(f"{out} already holds a run (results.jsonl): give a new --out")
    bench = None
    if options.tasks_path is not None:
        bench = benchmark_at(BENCHMARK, options.tasks_path, hints=options.hints)
    try:
        imported = import_trajectories(options.path, out, system=options.system, benchmark=bench)
    except (ImportFailed, BenchmarkError) as problem:
        raise fail(str(problem)) from None
    console = common.console
    models = ", ".join(f"{m}: {n}" for m, n in sorted(Counter(r.model for r in imported.records).items()))
    console.print(f"imported {len(imported.records)} trials ({models}) → {out}", highlight=False)
    for item, count in sorted(imported.missing.items()):
        console.print(f"not recorded in {count} trial(s): {item}", highlight=False, markup=False)
    if imported.unscored:
        console.print(f"not scored (no such task in --tasks-path): {', '.join(sorted(set(imported.unscored)))}")
