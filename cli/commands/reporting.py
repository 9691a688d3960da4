"""Writing a run's summary.md and the comparison report, for `run`, `report` and `rescore`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from . import common
from .common import EXIT_WRITE_FAILED, fail

if TYPE_CHECKING:
    from ...core.runlog import RunLog


def write_summary(run_dir: Path, infra_errors_as_failures: bool = False, to: Path | None = None) -> RunLog:
    """Write summary.md (into `to` or the run directory) and print the table; returns the run log it read."""
    from ...core.runlog import RunLogError
    from ...engine import outputs
    from ...reports import rich_table
    from ...reports.summary import warning_lines

    console = common.console
    try:
        written = outputs.write_summary(run_dir, infra_errors_as_failures, to)
    except RunLogError as problem:
        raise fail(str(problem)) from None
    for warning in written.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    print_whole(rich_table(written.rows))
    for line in warning_lines(written.rows):  # "lotus/gpt-5: 12 of 37 answered without running an operator"
        console.print(f"[yellow]main step skipped:[/yellow] {line.removeprefix('- ')}", highlight=False)
    console.print(f"results: {run_dir / 'results.jsonl'}\nsummary: {written.path}", highlight=False)
    return written.run


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
    from ...engine.outputs import write_report as build
    from ...reports import ReportError

    console = common.console
    try:
        files = build(
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
    colours = output.color_system if output.color_system in ("standard", "256", "truecolor", "windows") else None
    return Console(file=output.file, width=width, force_terminal=output.is_terminal, color_system=colours)  # type: ignore[arg-type]


def print_whole(table: Table) -> None:
    """The comparison table with every name and number whole: wider than the terminal if it must be."""
    from ...reports.summary import table_width

    wider(table_width(table)).print(table)
