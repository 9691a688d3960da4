"""`compare score`: predictions made elsewhere — our JSON Lines or a benchmark's published file — scored
with the benchmark's official rules, one row per prediction in input order, and the leaderboard's aggregate.

A row carries the task id, the run (formats with runs: each run is an epoch), the model where the file
names one, the scores, and the publisher's own figure for that entry when the file holds one
(`published_<metric>`). The aggregate (`Benchmark.submission_aggregate`) is printed and, with
`--out FILE`, written to `FILE.aggregate.json`. When the publisher's figure is known — in the file
(DBGorilla's `average_ast_score`), in `KNOWN_FIGURES` (a leaderboard row, by the file's SHA-256) or
given with `--published` — the output says whether ours reproduces it.

The means (`metric_means`) is over tasks: a task's predictions (its runs or epochs) are averaged first
and the 95% bootstrap interval resamples tasks, so repeating a task is never counted as more evidence; it
says how its mean relates to the benchmark's own aggregate (`Benchmark.aggregate_rule`). Scorers that measure
the run itself (`Benchmark.run_scorers`: tool success) are not applied to predictions made elsewhere. The
aggregate is printed at the leaderboard's precision (`Benchmark.published_digits`), an unrounded value beside.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.benchmark import Benchmark
from ..core.scorer import HEDGED, score
from ..core.task import Answer, Task
from ..core.trace import RunWarning
from ..evaluators.predictions import Prediction, PredictionError, check_duplicates, read_predictions, read_published
from ..evaluators.submissions import LINE_FORMATS, detect_format

# Leaderboard rows of published submissions, by the file's SHA-256: (metric, figure, where it is published).
KNOWN_FIGURES: dict[str, tuple[str, float, str]] = {
    "aeed2a548c3480f92c43ac84aeaeb110a2423b8ad3305020f9712177b852be17": (
        "pass@1",
        0.1671,
        "DAB leaderboard, Oracle Forge (Team Cohere) + Gemini 2.0 Flash, 5 trials "
        "(ucbepic/DataAgentBench docs/data/leaderboards.json @ 881bab89)",
    ),
}
TOLERANCE = 5e-5  # a published figure has 4 decimals: ours reproduces it when it rounds to it


@dataclass
class ScoreRun:
    format: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    scored: list[tuple[Task, Answer]] = field(default_factory=list)
    bad: int = 0
    aggregate: dict[str, Any] = field(default_factory=dict)
    checks: list[str] = field(default_factory=list)  # "reproduced" / "NOT reproduced" lines
    notes: list[str] = field(default_factory=list)
    partial: bool = False  # some entries were not scored (their dataset is not in the task files)


def read_inputs(
    path: Path, fmt: str | None, bench: Benchmark, tasks: dict[str, Task], say: Any
) -> tuple[ScoreRun, list[Prediction], dict[str, float]]:
    """The predictions of `path` in input order; bad JSON Lines records are told with `say` and counted.
    A published file that is malformed, or a prediction given twice, raises SubmissionError."""
    fmt = fmt or detect_format(path)
    run, published = ScoreRun(fmt), {}
    if fmt in LINE_FORMATS:
        predictions = []
        for item in read_predictions(path, bench, tasks):
            if isinstance(item, PredictionError):
                run.bad += 1
                say(f"bad record: {item}")
            else:
                predictions.append(item)
    else:
        predictions, submission, absent = read_published(path, fmt, bench, tasks)
        published = dict(submission.published)
        if absent:
            run.partial = True
            left = ", ".join(f"{name} ({n})" for name, n in sorted(absent.items()))
            run.notes.append(
                f"not scored: entries of datasets missing from the task files: {left}; "
                "the aggregate covers only the datasets given, so it is not the leaderboard's figure"
            )
    check_duplicates(path, predictions)
    return run, predictions, published


def score_predictions(
    run: ScoreRun,
    predictions: list[Prediction],
    bench: Benchmark,
    scorers: tuple[str, ...],
    out: Path | None,
    say: Any,
    *,
    strict_answers: bool = False,
) -> None:
    """Score each prediction (rows written to `out` as they come), then the aggregate; the scorers that
    measure a run of ours (`Benchmark.run_scorers`) are left out: nothing of the run is here. With
    `strict_answers` an answer a scorer flagged as hedged scores as wrong (docs/scoring.md)."""
    scorers = prediction_scorers(bench, scorers)
    epochs: dict[str, int] = {}
    with out.open("w", encoding="utf-8") if out is not None else _NoSink() as sink:
        for prediction in predictions:
            task = prediction.task
            sheet = score(task, prediction.answer, prediction.trace, scorers, strict_answers=strict_answers)
            row: dict[str, Any] = {"task_id": task.id}
            if prediction.run is not None:
                epochs[task.id] = epochs.get(task.id, 0) + 1
                row |= {"run": prediction.run, "epoch": epochs[task.id]}
            if prediction.model:
                row["model"] = prediction.model
            row |= sheet.scores | {f"published_{k}": v for k, v in prediction.published.items()}
            if prediction.trace.warnings:  # a scorer's flag beside the verdict (a hedged answer: hedging.py)
                row["warnings"] = [w.model_dump() for w in prediction.trace.warnings]
            if sheet.error:
                run.bad += 1
                row["scoring_error"] = sheet.error
                say(f"scorer failed on {task.id} ({prediction.where}): {sheet.error}")
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            run.rows.append(row)
            run.scored.append((task, prediction.answer))
    run.notes += warning_notes(run.rows, strict_answers)


def warning_notes(rows: list[dict[str, Any]], strict_answers: bool) -> list[str]:
    """How many rows carry each scorer's flag (a hedged answer), said beside the figures."""
    counts = Counter(warning["code"] for row in rows for warning in row.get("warnings", []))
    strict = "scored as wrong (--strict-answers)" if strict_answers else "the official verdict stands"
    effects = {HEDGED: strict + ("" if strict_answers else " (--strict-answers scores them as wrong)")}
    return [
        f"{n} of {len(rows)} answers {RunWarning(code=code).phrase}" + (f": {effects[code]}" if code in effects else "")
        for code, n in sorted(counts.items())
    ]


class _NoSink:
    def __enter__(self) -> _NoSink:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def write(self, text: str) -> None:
        return None

    def flush(self) -> None:
        return None


def finish(
    run: ScoreRun, path: Path, bench: Benchmark, tasks: list[Task], published: dict[str, float], given: float | None
) -> None:
    """The leaderboard's aggregate, and whether it reproduces each published figure we know."""
    run.aggregate = bench.submission_aggregate(run.rows, tasks)
    if not run.aggregate:
        return
    headline = next(iter(run.aggregate))
    known = KNOWN_FIGURES.get(hashlib.sha256(path.read_bytes()).hexdigest()) if path.is_file() else None
    figures = {name: (value, "in the file") for name, value in published.items()}
    if known is not None:
        figures[known[0]] = (known[1], known[2])
    if given is not None:
        figures[headline] = (given, "--published")
    for name, (value, source) in figures.items():
        ours = run.aggregate.get(name)
        if not isinstance(ours, int | float):
            run.checks.append(f"{name}: published {value:.4f} ({source}); not computed here")
        elif run.partial:
            run.checks.append(
                f"{name}: {ours:.4f} is not comparable with the published {value:.4f} ({source}): "
                "some of the file's datasets are not in the task files"
            )
        elif abs(ours - value) <= TOLERANCE + 1e-12:
            run.checks.append(f"{name}: {ours:.4f} reproduces the published {value:.4f} ({source})")
        else:
            run.checks.append(
                f"{name}: {ours:.4f} does NOT reproduce the published {value:.4f} ({source}); difference "
                f"{ours - value:+.4f}. See the README (compare score) for why a published figure can differ."
            )


def write_aggregate(run: ScoreRun, out: Path) -> Path:
    target = out.with_name(out.name + ".aggregate.json")
    payload = {"format": run.format, "aggregate": run.aggregate, "published": run.checks, "notes": run.notes}
    target.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return target


def prediction_scorers(bench: Benchmark, scorers: tuple[str, ...]) -> tuple[str, ...]:
    """The scorers that judge a prediction made elsewhere: all but those measuring a run of ours."""
    return tuple(name for name in scorers if name not in bench.run_scorers)


NOT_SCORES = {"epoch", "run"}  # a row's epoch and run number it; they are no score


@dataclass(frozen=True)
class MetricMean:
    """One score's mean over tasks (a task's runs averaged first), with its 95% bootstrap interval over tasks
    (NaN bounds when it cannot be computed: one task)."""

    metric: str
    tasks: int
    predictions: int
    mean: float
    low: float
    high: float


def metric_means(rows: list[dict[str, Any]], bench: Benchmark) -> tuple[list[MetricMean], list[str]]:
    """Every score's mean over tasks, and the lines that say how these means relate to the benchmark's own
    aggregate."""
    from ..evaluators.statistics import bootstrap_ci  # numpy: only when scoring

    means = []
    numeric = {key for row in rows for key, value in row.items() if _is_score(value)}
    for metric in sorted(numeric - NOT_SCORES):
        by_task = _task_means(rows, metric)
        predictions = sum(_is_score(row.get(metric)) for row in rows)
        mean, low, high = bootstrap_ci(list(by_task.values()))
        means.append(MetricMean(metric, len(by_task), predictions, mean, low, high))
    return means, _relation_lines(rows, bench)


def _is_score(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _task_means(rows: list[dict[str, Any]], metric: str) -> dict[str, float]:
    values: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if _is_score(row.get(metric)):
            values[row["task_id"]].append(float(row[metric]))
    return {task: sum(v) / len(v) for task, v in values.items()}


def _relation_lines(rows: list[dict[str, Any]], bench: Benchmark) -> list[str]:
    tasks = {row["task_id"] for row in rows}
    repeated = len(rows) > len(tasks)
    runs = f" ({len(rows)} predictions: each task's runs averaged first, the interval resamples tasks)"
    lines = [f"Means are over {len(tasks)} tasks{runs if repeated else ''}; every task weighs the same."]
    if bench.aggregate_rule:
        lines.append(f"The leaderboard aggregate below is the benchmark's own: {bench.aggregate_rule}; it can differ.")
    return lines
