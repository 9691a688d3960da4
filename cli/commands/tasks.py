"""`compare tasks --benchmark NAME`: load and validate a benchmark without running anything."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import common
from .common import benchmark_at, fail, load_plugins

if TYPE_CHECKING:
    from ...core.task import Task


@dataclass(frozen=True)
class TasksOptions:
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")]
    tasks_path: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None
    path: Annotated[Path | None, typer.Option(hidden=True, help="Old name of --tasks-path.")] = None
    as_json: Annotated[bool, typer.Option("--json", help="Print the report (with every task id) as JSON.")] = False
    ids: Annotated[bool, typer.Option("--ids", help="Print the task ids, one a line (with level and type).")] = False
    plugin: Annotated[
        list[str] | None,
        typer.Option(help="A module, .py or .yaml file that registers benchmarks, scorers, ... (repeatable)."),
    ] = None


def tasks(options: TasksOptions) -> None:
    """Load and validate a benchmark without running anything: counts by type, level and data availability."""
    from ...core.benchmark import BenchmarkError, TaskLoadError, TaskLoadErrors

    load_plugins(options.plugin)  # a plug-in benchmark is checked as the suite's own are
    path = options.tasks_path or options.path
    bench = benchmark_at(options.benchmark, path)
    try:
        loaded = bench.load()
    except TaskLoadError as problem:
        if not options.as_json:
            raise fail(str(problem)) from None  # TaskLoadErrors' text already has one problem per line
        problems = problem.errors if isinstance(problem, TaskLoadErrors) else [problem]
        fields = ("file", "line", "field", "message")
        common.output.print_json(json.dumps({"errors": [{key: getattr(p, key) for key in fields} for p in problems]}))
        raise typer.Exit(2) from None
    except (BenchmarkError, OSError) as problem:
        raise fail(str(problem)) from None
    if not loaded:
        raise fail(f"the {options.benchmark} benchmark" + (f" at {path}" if path else "") + " has no tasks")
    if options.ids:
        for task in loaded:
            typer.echo(f"{task.id}\t{task.level or '-'}\t{task.question_type.value}")  # tabs kept: for scripts
        return
    report = {
        "benchmark": options.benchmark,
        "tasks": len(loaded),
        "by_question_type": dict(Counter(t.question_type.value for t in loaded)),
        "by_level": dict(Counter(t.level or "none" for t in loaded)),
        "available": sum(not t.unavailable for t in loaded),
        "unavailable": dict(Counter(t.unavailable for t in loaded if t.unavailable)),
        "with_gold": sum(_has_gold(t) for t in loaded),
        "warnings": bench.warnings(loaded),
        "ids": [task.id for task in loaded],
    }
    if options.as_json:
        common.output.print_json(json.dumps(report))
        return
    for key, value in report.items():
        if key != "ids":  # --ids lists them
            common.output.print(f"{key}: {value}", highlight=False, soft_wrap=True)


def _has_gold(task: Task) -> bool:
    gold = task.gold
    return gold is not None and any(
        v is not None for v in (gold.answer, gold.report, gold.tool_call, gold.validator, gold.ground_truth_file)
    )
