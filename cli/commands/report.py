"""`compare report RUN_DIR...`: rebuild a run's summary and write the comparison report of one or several runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .common import fail
from .reporting import write_report, write_summary

if TYPE_CHECKING:
    from ...core.runlog import RunLog


@dataclass(frozen=True)
class ReportOptions:
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories (compared on common tasks).")]
    out: Annotated[
        Path | None, typer.Option(help="Folder for the report (default: the run directory; needed for several).")
    ] = None
    infra_errors_as_failures: Annotated[
        bool,
        typer.Option(help="Count provider failures as failures in the quality means (default: left out, counted)."),
    ] = False
    judge: Annotated[
        str | None,
        typer.Option(help="Model alias that judges why wrong answers are wrong (DAB's modes); metered apart."),
    ] = None
    merge_runs: Annotated[
        bool,
        typer.Option(help="Merge several runs of a system × model run alike into one row, as epochs (default: apart)."),
    ] = False


def report(options: ReportOptions) -> None:
    """Rebuild a run directory's summary.md, and write the comparison report of one or several run
    directories: report.html (offline), report.md with figures, results.csv/.parquet, leaderboard.json."""
    judge_model = _failure_judge(options.judge)
    busy = _running(options.run_dirs, options.out)
    counting = options.infra_errors_as_failures
    if len(options.run_dirs) == 1:
        to = options.out if busy else None
        runs: list[Path | RunLog] = [write_summary(options.run_dirs[0], counting, to=to)]
    else:
        runs = list(options.run_dirs)
    write_report(runs, options.out, infra_errors_as_failures=counting, judge=judge_model, merge_runs=options.merge_runs)


def _running(run_dirs: list[Path], out: Path | None) -> bool:
    """Whether a run directory is being written by a running `compare` now. Its own files (summary.md, the
    report) are the run's to write when it ends: a report of it goes to another --out, else is refused."""
    from ...core.runlog import run_dir_holder

    for run_dir in run_dirs:
        holder = run_dir_holder(run_dir)
        if holder is None:
            continue
        if out is None or out.resolve() == run_dir.resolve():
            raise fail(
                f"{run_dir} is being written by a running compare ({holder}); its summary and report are written"
                " when it ends: wait for it, or give --out another folder for a report of it now"
            )
        return True
    return False


def _failure_judge(name: str | None) -> Any:
    """The judge's model, resolved and loaded before anything is written; a bad name or a missing key: exit 2."""
    if name is None:
        return None
    from ...core.model import get_provider
    from ...engine.config import ConfigError, RunConfig, missing_api_keys, resolve_models

    try:
        model = resolve_models([name], RunConfig())[0]
        missing = missing_api_keys([model])
        if missing:
            raise ConfigError(f"missing API key for the judge {name}: set {', '.join(missing)}")
        get_provider(model.provider).prepare(model)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    return model
