"""Writing a run's summary.md and the comparison report, for `run`, `report` and `rescore`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from . import common
from .common import EXIT_WRITE_FAILED, fail

if TYPE_CHECKING:
    from ...core.runlog import ResultRecord, RunLog


def write_summary(run_dir: Path, infra_errors_as_failures: bool = False, to: Path | None = None) -> RunLog:
    """Write summary.md (into `to` or the run directory) and print the table; returns the run log it read."""
    from ...core.runlog import RunLogError, read_run
    from ...reports import markdown, pairwise, rich_table, summarize  # numpy and the report code: not at start
    from ...reports.summary import warning_lines

    console = common.console
    try:
        run = read_run(run_dir)
    except RunLogError as problem:
        raise fail(str(problem)) from None
    for warning in run.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    counting = {"infra_errors_as_failures": infra_errors_as_failures}
    rows = summarize(run.records, **counting)
    extra = _benchmark_lines(run.manifest.benchmark, run.records) + _spend_lines(run)
    summary = markdown(rows, run.manifest, pairwise(run.records, **counting), run.records, extra, **counting)
    if to is not None:
        to.mkdir(parents=True, exist_ok=True)
    summary_file = (to or run_dir) / "summary.md"
    summary_file.write_text(summary, encoding="utf-8")
    print_whole(rich_table(rows))
    for line in warning_lines(rows):  # "lotus/gpt-5: 12 of 37 answered without running an operator"
        console.print(f"[yellow]main step skipped:[/yellow] {line.removeprefix('- ')}", highlight=False)
    console.print(f"results: {run_dir / 'results.jsonl'}\nsummary: {summary_file}", highlight=False)
    return run


def write_report(
    run_dirs: list[Path | RunLog],
    out: Path | None,
    *,
    infra_errors_as_failures: bool = False,
    at_end_of_run: bool = False,
    judge: Any = None,
    merge_runs: bool = False,
) -> None:
    """The comparison report; after a run, a report that cannot be built is a warning, not the run's failure."""
    from ...core.runlog import redact_credentials
    from ...reports import ReportError, build_report  # charts and the browser bundle load only when needed

    console = common.console
    try:
        files = build_report(
            run_dirs, out, infra_errors_as_failures=infra_errors_as_failures, judge=judge, merge_runs=merge_runs
        )
    except (ReportError, OSError) as problem:
        if at_end_of_run:
            text = f"warning: no report: {redact_credentials(str(problem))}"
            console.print(text, style="yellow", markup=False, highlight=False, soft_wrap=True)
            return
        code = EXIT_WRITE_FAILED if isinstance(problem, OSError) else 2
        raise fail(str(problem), code) from None
    for warning in files.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    if "summary" in files.files:  # several runs: their merged rows, per benchmark (one run printed its own)
        from ...reports import rich_table

        for benchmark, rows in files.rows.items():
            print_whole(rich_table(rows, title=f"{benchmark}: comparison (means per task; $ is the total)"))
        console.print(f"summary: {files.files['summary']}", highlight=False)
    console.print(f"report: {files.files['html']}", highlight=False)


def wider(width: int) -> Console:
    """The output console, at least `width` columns wide (Rich never prints wider than its console)."""
    output = common.output
    if width <= output.width:
        return output
    return Console(file=output.file, width=width, force_terminal=output.is_terminal, color_system=output.color_system)


def print_whole(table: Table) -> None:
    """The comparison table with every name and number whole: wider than the terminal if it must be."""
    from ...reports.summary import table_width

    wider(table_width(table)).print(table)


def _spend_lines(run: RunLog) -> list[str]:
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


def _benchmark_lines(name: str, records: list[ResultRecord]) -> list[str]:
    """The benchmark's own summary section; none when the benchmark is not registered here."""
    from ...core.benchmark import BENCHMARKS

    if name not in BENCHMARKS:
        common.console.print(
            f"[yellow]warning:[/yellow] benchmark {name!r} is not registered: its own section is left out"
        )
        return []
    return BENCHMARKS.load(name).report_lines(records)
