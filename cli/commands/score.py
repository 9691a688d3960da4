"""`compare score --benchmark NAME --predictions FILE`: score predictions made elsewhere with the benchmark's
official rules."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import common
from .common import benchmark_at, fail, load_plugins

if TYPE_CHECKING:
    from ...core.benchmark import Benchmark


@dataclass(frozen=True)
class ScoreOptions:
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")]
    tasks_path: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None
    tasks: Annotated[Path | None, typer.Option(hidden=True, help="Old name of --tasks-path.")] = None
    predictions: Annotated[
        Path,
        typer.Option(help="Predictions made elsewhere: our JSONL, or a file a benchmark publishes (see --format)."),
    ] = Path("predictions.jsonl")
    out: Annotated[
        Path | None, typer.Option(help="Write one JSON line per prediction here, the aggregate to OUT.aggregate.json.")
    ] = None
    rule: Annotated[
        str | None, typer.Option(help="An earlier revision of the official scoring rule (see compare benchmarks).")
    ] = None
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl, dab-leaderboard, dabstep-submission, dbgorilla-results or fdabench-results "
            "(default: recognised from the content).",
        ),
    ] = None
    published: Annotated[
        float | None, typer.Option(help="The leaderboard's figure for this file: say whether ours reproduces it.")
    ] = None
    strict_answers: Annotated[
        bool,
        typer.Option("--strict-answers", help="Score answers flagged as hedged (listing many candidates) as wrong."),
    ] = False
    plugin: Annotated[
        list[str] | None,
        typer.Option(help="A module, .py or .yaml file that registers benchmarks, scorers, ... (repeatable)."),
    ] = None


def score(options: ScoreOptions) -> None:
    """Score predictions produced elsewhere with the benchmark's official rules.

    One row per prediction, in input order, written to --out as soon as it is scored; then the
    benchmark's leaderboard aggregate. A published file that is malformed, or a prediction given twice
    (twice for one run, in a format with runs), is refused with exit status 2 naming the entries.
    Exit status 1 when a line of our JSONL could not be read or a scorer failed (the others are scored)."""
    from ...core.benchmark import BenchmarkError
    from ...engine.scoring import finish, metric_means, read_inputs, score_predictions, write_aggregate
    from ...evaluators.submissions import FORMATS, SubmissionError
    from ..score_tables import aggregate_table, means_table

    load_plugins(options.plugin)  # a plug-in benchmark or scorer
    bench = benchmark_at(options.benchmark, options.tasks_path or options.tasks)
    scorers = _scorers_of(bench, options.rule)
    fmt, predictions, out = options.fmt, options.predictions, options.out
    if fmt is not None and fmt not in FORMATS:
        raise fail(f"--format: unknown format {fmt!r} (known: {', '.join(FORMATS)})")
    if not predictions.exists():
        raise fail(f"predictions file not found: {predictions}")
    if out is not None and out.is_dir():  # checked before any scoring: open() would fail with a traceback
        raise fail(f"--out {out}: is a folder; give a file for the scores (JSON Lines)")
    try:
        loaded = bench.load()
        by_id = {task.id: task for task in loaded}
    except (BenchmarkError, OSError) as problem:  # a TaskLoadError names file, line and field
        raise fail(str(problem)) from None

    def say(text: str) -> None:
        common.console.print(text, highlight=False, soft_wrap=True, markup=False)

    try:
        run, inputs, figures = read_inputs(predictions, fmt, bench, by_id, say)
        score_predictions(run, inputs, bench, scorers, out, say, strict_answers=options.strict_answers)
    except (BenchmarkError, SubmissionError) as problem:  # nothing to score, or a malformed submission
        raise fail(str(problem)) from None
    output = common.output
    means, relation = metric_means(run.rows, bench)
    output.print(means_table(means))
    for line in relation:
        output.print(line, highlight=False, soft_wrap=True, markup=False)
    aggregate = bench.aggregate(run.scored)
    if aggregate:
        output.print(aggregate_table(f"{options.benchmark} aggregate metrics", aggregate, 3))
    finish(run, predictions, bench, loaded, figures, options.published)
    if run.aggregate:
        title = f"{options.benchmark} leaderboard aggregate ({run.format})"
        output.print(aggregate_table(title, run.aggregate, bench.published_digits))
    for line in [*run.checks, *run.notes]:
        output.print(line, highlight=False, soft_wrap=True, markup=False)
    if out is not None and run.aggregate:
        common.console.print(f"aggregate: {write_aggregate(run, out)}", highlight=False)
    common.console.print(f"{len(run.rows)} predictions scored, {run.bad} bad record(s)", highlight=False)
    raise typer.Exit(1 if run.bad else 0)


def _scorers_of(bench: Benchmark, rule: str | None) -> tuple[str, ...]:
    if rule is None:
        return bench.scorers
    if rule not in bench.rules:
        known = ", ".join(bench.rules) or "none"
        raise fail(f"the {bench.name} benchmark has no scoring rule {rule!r}; earlier revisions: {known}")
    return bench.rules[rule]
