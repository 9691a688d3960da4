"""A run's written outputs after its units: summary.md (its rows, the benchmark's own section, what the
records' costs leave out) and the comparison report. Returned, never printed: the command line prints them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.runlog import ResultRecord, RunLog
    from ..reports import ReportFiles
    from ..reports.summary import SummaryRow


@dataclass
class WrittenSummary:
    run: RunLog  # the run as the summary read it (the report reads it from here, not again)
    rows: list[SummaryRow]  # one per system × model: the headline figures
    path: Path  # summary.md
    warnings: list[str] = field(default_factory=list)  # the run log's, and a benchmark not registered here


def write_summary(run_dir: Path, infra_errors_as_failures: bool = False, to: Path | None = None) -> WrittenSummary:
    """Write summary.md into `to` (default: the run directory). Raises RunLogError for a run log that cannot
    be read, OSError when summary.md cannot be written."""
    from ..core.runlog import read_run
    from ..reports import markdown, pairwise, summarize  # numpy and the report code: not at start

    run = read_run(run_dir)
    warnings = list(run.warnings)
    counting = {"infra_errors_as_failures": infra_errors_as_failures}
    rows = summarize(run.records, **counting)
    extra = _benchmark_lines(run.manifest.benchmark, run.records, warnings) + spend_lines(run)
    summary = markdown(rows, run.manifest, pairwise(run.records, **counting), run.records, extra, **counting)
    if to is not None:
        to.mkdir(parents=True, exist_ok=True)
    path = (to or run_dir) / "summary.md"
    path.write_text(summary, encoding="utf-8")
    return WrittenSummary(run, rows, path, warnings)


def write_report(
    runs: list[Path | RunLog],
    out: Path | None,
    *,
    infra_errors_as_failures: bool = False,
    judge: Any = None,
    merge_runs: bool = False,
) -> ReportFiles:
    """The comparison report (`reports/build.py`); raises ReportError for input it cannot read. Runs of one system
    × model are a row each unless `merge_runs`."""
    from ..reports import build_report  # charts and the browser bundle load only when needed

    return build_report(
        runs, out, infra_errors_as_failures=infra_errors_as_failures, judge=judge, merge_runs=merge_runs
    )


def spend_lines(run: RunLog) -> list[str]:
    """What the records' costs leave out (calls.jsonl): calls no model answered (the cache, a replay),
    and the spend of unit attempts interrupted before their record — paid for, in no result."""
    lines = []
    if run.cached_calls:
        lines += [
            "## Model calls answered without a model",
            "",
            f"- {run.cached_calls} of {run.journaled_calls} model call(s) were answered by the response cache or"
            " a replay: they cost 0 here (each trace step keeps what the original call cost).",
            "",
        ]
    if run.interrupted:
        usage, calls = run.interrupted_usage(), sum(a.model_calls for a in run.interrupted)
        in_flight = sum(a.in_flight_calls for a in run.interrupted)
        unknown = f"; {in_flight} more call(s) were in flight when the run stopped (usage unknown)" if in_flight else ""
        cost = "$– (unknown: a model without a price)" if usage.cost_usd is None else f"${usage.cost_usd:.4f}"
        lines += [
            "## Spent on interrupted units (not in the results)",
            "",
            f"- {len(run.interrupted)} attempt(s) stopped before their record, re-run by --resume: {calls} model"
            f" call(s), {usage.input_tokens} input / {usage.output_tokens} output tokens, {cost}{unknown}.",
        ]
    return lines


def _benchmark_lines(name: str, records: list[ResultRecord], warnings: list[str]) -> list[str]:
    """The benchmark's own summary section; none (and a warning) when the benchmark is not registered here."""
    from ..core.benchmark import BENCHMARKS

    if name not in BENCHMARKS:
        warnings.append(f"benchmark {name!r} is not registered: its own section is left out")
        return []
    return BENCHMARKS.load(name).report_lines(records)
