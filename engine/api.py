"""The one Python entry point: `data_agent_compare.run(...)` plans, runs, scores and records a comparison as
`compare run` does — the same settings, defaults and layering (configs/defaults.yaml < the benchmark's harness
< `config_file` < keyword settings) — and returns a typed `RunResult`. The command line is a thin layer over
the same functions (`cli/commands/running.py`).

    import data_agent_compare as dac
    result = dac.run(benchmark="bundled", systems=["tool_use", "planning"], models=["embedded"], out="runs/nb")
    for row in result.rows:
        print(row.system, row.model, row.accuracy, row.total_cost_usd)

Settings are the run configuration's keys (`engine/config.py` `RunConfig`: `benchmark`, `systems`, `models`,
`task_ids`, `epochs`, `concurrency`, `executor`, `budgets`, `generation`, `out`, ...); a `RunConfig` may be
given whole instead. Errors are exceptions, never an exit: ConfigError for settings that cannot run,
RunLogError for a run directory that cannot be read or is busy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import RunConfig, load_run_config
from .events import Listener
from .outputs import write_report, write_summary
from .progress import FAILED_STATUSES
from .runner import execute, plan_run

if TYPE_CHECKING:
    from ..core.runlog import Manifest, ResultRecord
    from ..reports.summary import SummaryRow
    from .units import RunPlan


@dataclass(frozen=True)
class RunResult:
    """A finished run: where it is, how it ended, every record, and the headline figures per system × model."""

    run_dir: Path
    status: str  # the manifest's: completed (interrupted and failed runs raise)
    manifest: Manifest
    records: list[ResultRecord]
    rows: list[SummaryRow]  # summary.md's rows: accuracy with its interval, latency, tokens, cost
    summary: Path  # summary.md
    report: Path | None  # report.html; None when the report could not be built (`report_problem` says why)
    report_problem: str | None = None

    @property
    def failed(self) -> list[ResultRecord]:
        """The units that ended with an error (the system's, the provider's, or a replay's miss)."""
        return [record for record in self.records if record.status in FAILED_STATUSES]


def plan(config: RunConfig | None = None, *, config_file: Path | str | None = None, **settings: Any) -> RunPlan:
    """The run `run` would carry out, checked and loaded (systems created, tasks selected), nothing run."""
    if config is None:
        config = load_run_config(Path(config_file) if config_file else None, settings)
    elif settings or config_file:
        raise TypeError("give a RunConfig or settings, not both")
    return plan_run(config)


def run(
    config: RunConfig | None = None,
    *,
    config_file: Path | str | None = None,
    listeners: list[Listener] | tuple[Listener, ...] = (),
    resume: bool = False,
    allow_drift: bool = False,
    report: bool = True,
    **settings: Any,
) -> RunResult:
    """Run a comparison and write its run directory, summary.md and (with `report`) report.html. `listeners`
    receive the run's events in order (`engine/events.py`); `resume` finishes a run directory that has some
    units already."""
    return finish(plan(config, config_file=config_file, **settings), listeners, resume, allow_drift, report)


def finish(
    run_plan: RunPlan,
    listeners: list[Listener] | tuple[Listener, ...] = (),
    resume: bool = False,
    allow_drift: bool = False,
    report: bool = True,
) -> RunResult:
    """Carry out a plan (`plan`, or the command line's): its units, then its summary and report."""
    manifest = execute(run_plan, listeners=listeners, resume=resume, allow_drift=allow_drift)
    return written_outputs(run_plan.run_dir, manifest, report)


def written_outputs(run_dir: Path, manifest: Manifest, report: bool = True) -> RunResult:
    """The summary and report of a run whose units are done, as a `RunResult`."""
    from ..reports import ReportError

    summary = write_summary(run_dir)
    html, problem = None, None
    if report:
        try:
            html = write_report([summary.run], None).files.get("html")
        except (ReportError, OSError) as failure:
            problem = str(failure)
    return RunResult(
        run_dir=run_dir,
        status=manifest.status,
        manifest=manifest,
        records=summary.run.records,
        rows=summary.rows,
        summary=summary.path,
        report=html,
        report_problem=problem,
    )
