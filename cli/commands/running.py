"""Carrying out a planned run for `run`, `resume` and `replay`: the progress display, how a run that stops
is told (and its exit status), then the summary, the report and the causes of failed units."""

from __future__ import annotations

import os
import signal
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from rich.console import RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from . import common
from .common import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_WRITE_FAILED, fail

if TYPE_CHECKING:
    from ...core.runlog import ResultRecord
    from ...engine.units import RunPlan


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the run stops as on Ctrl-C (manifest `interrupted`)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def run_plan(plan: RunPlan, *, resume: bool = False, allow_drift: bool = False, view: bool = False) -> int:
    """Run the plan's units (those not yet recorded, when resuming), then write its summary and report;
    the exit status: 1 if a unit ended with an error, else 0. With `view`, the viewer serves the run's folder
    beside it (`watching`)."""
    with watching(plan.run_dir, view):
        return _run_plan(plan, resume=resume, allow_drift=allow_drift)


@contextmanager
def watching(run_dir: Path, view: bool) -> Iterator[None]:
    """With `view`: the viewer on a free loopback port over the run's folder, its address printed, for as long
    as the run lasts; after it, on a terminal, until Ctrl-C (the finished run is what one came to look at)."""
    if not view:
        yield
        return
    from ...reports.viewer import start_in_background

    console = common.console
    try:
        served = start_in_background([run_dir.resolve().parent])
    except OSError as problem:
        console.print(f"[yellow]warning:[/yellow] no viewer: {problem}", highlight=False)
        yield
        return
    address = f"{served.url}runs/{quote(run_dir.resolve().name)}"
    console.print(
        f"viewer: {address}  (read-only, follows the run live)", highlight=False, markup=False, soft_wrap=True
    )
    try:
        yield
        if sys.stdin.isatty() and console.is_terminal:
            console.print(f"viewer: still at {address}; Ctrl-C stops it", highlight=False, markup=False)
            with suppress(KeyboardInterrupt):
                while served.thread is not None and served.thread.is_alive():
                    served.thread.join(0.5)
    finally:
        served.stop()


def _run_plan(plan: RunPlan, *, resume: bool, allow_drift: bool) -> int:
    from ...core.runlog import RunLogError, read_records, redact_credentials
    from ...engine.config import ConfigError
    from ...engine.events import ExecutorChosen, Notice, RunEvent, UnitFinished
    from ...engine.executors import executor_warnings
    from ...engine.progress import RunProgress
    from ...engine.runner import RunWriteError, execute
    from ..plain_progress import PlainProgress
    from .reporting import write_report, write_summary

    console = common.console
    units = len(list(plan.units()))
    console.print(
        f"run: {len(plan.tasks)} tasks × {len(plan.systems)} systems × {len(plan.models)} models"
        f" × {plan.config.epochs} epochs = {units} units → {plan.run_dir}",
        highlight=False,
    )
    for note in plan.notes:  # a default the run chose (its concurrency)
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    warnings = [*plan.benchmark.warnings(plan.tasks), *_sandbox_warnings(plan), *executor_warnings(plan)]
    for warning in [*warnings, *_price_warnings(plan)]:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    try:
        records = read_records(plan.run_dir)[0] if resume else []
        already = sum(not (plan.retry_errors and r.status == "infra_error") for r in records)
    except RunLogError as problem:
        raise fail(str(problem)) from None
    counts = RunProgress(total=units, done=already)
    last_unit = TextColumn("{task.description}", table_column=Column(max_width=48, no_wrap=True, overflow="ellipsis"))
    columns = [last_unit, BarColumn(bar_width=24), MofNCompleteColumn(), TimeElapsedColumn()]
    # Not a terminal (a pipe, a CI log): the bar does not draw, so plain lines say how the run goes.
    plain = None if console.is_terminal else PlainProgress(counts, progress_line, _plain_line)
    with RunProgressDisplay(counts, *columns, console=console, transient=False) as progress, plain or nullcontext():
        progress.bar = progress.add_task("running", total=units, completed=already)

        def show(event: RunEvent) -> None:
            if isinstance(event, ExecutorChosen | Notice):
                line = event.line if isinstance(event, ExecutorChosen) else event.text
                console.print(line, highlight=False, markup=False, soft_wrap=True)
            if isinstance(event, UnitFinished):
                record = event.record
                em = record.scores.get("exact_match")
                mark = "" if em is None else f" EM={em:.0f}"
                description = f"{record.system}/{record.model} {record.task_id} {record.status}{mark}"
                progress.last = description  # the bar takes it, and the count, when it draws
                if plain is not None:
                    plain.unit_finished(description)

        previous = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            execute(plan, listeners=[counts, show], resume=resume, allow_drift=allow_drift)
        except (ConfigError, RunLogError) as problem:
            raise fail(str(problem)) from None
        except (KeyboardInterrupt, RunWriteError) as stop:
            progress.stop()
            _stop(plan, stop)
        finally:
            signal.signal(signal.SIGTERM, previous)
    run = write_summary(plan.run_dir)
    write_report([run], None, at_end_of_run=True)  # the run as the summary read it: read once
    failed = [r for r in run.records if r.status in ("error", "infra_error", "replay_miss")]
    if failed:
        console.print(f"[yellow]{len(failed)} unit(s) ended with an error; see results.jsonl and traces/[/yellow]")
        urls = {model.alias: redact_credentials(model.base_url) for model in plan.models if model.base_url}
        for line in failure_causes(failed, urls):
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    return 1 if failed else 0


def failure_causes(failed: list[ResultRecord], urls: dict[str, str] | None = None, shown: int = 5) -> list[str]:
    """The failed units grouped by the first line of their error, most frequent first; a provider's failure
    names the model's base URL: `5 units: infra_error: ... Connection refused (http://127.0.0.1:9/v1)`."""
    urls = urls or {}

    def cause(r: ResultRecord) -> str:
        text = f"{r.status}: {(r.error or 'no error message').splitlines()[0][:200]}"
        return text + (f" ({urls[r.model]})" if r.status == "infra_error" and r.model in urls else "")

    causes = Counter(cause(r) for r in failed)
    lines = [f"{n} unit{'s' if n > 1 else ''}: {cause}" for cause, n in causes.most_common(shown)]
    rest = len(causes) - shown
    return lines + ([f"… and {rest} other cause(s) in results.jsonl"] if rest > 0 else [])


class RunProgressDisplay(Progress):
    """The progress bar (last unit, bar, units done of all, elapsed) and under it one line of the run's
    counts: in flight, failed, retries, tokens, cost and the ETA (`progress_line`)."""

    def __init__(self, counts: Any, *columns: Any, **options: Any) -> None:  # counts: an engine RunProgress
        self.counts = counts  # before Progress.__init__, which renders once
        self.bar: TaskID | None = None
        self.last = "running"  # the last unit's line
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        # The bar is brought up to date when it draws (ten times a second), not at every unit: rich's
        # `update` per unit cost a twentieth of the harness's CPU per unit (issue 29).
        if self.bar is not None:
            self.update(self.bar, completed=self.counts.done, description=self.last)
        yield self.make_tasks_table(self.tasks)
        yield Text(progress_line(self.counts), style="progress.data", no_wrap=True, overflow="ellipsis")


def _plain_line(line: str) -> None:
    common.console.print(line, highlight=False, markup=False, soft_wrap=True)


def progress_line(counts: Any) -> str:
    """`2 in flight · 1 failed · 3 retries · 12.3k tok · $0.0123 · ETA 0:00:25` (an engine RunProgress), or
    what the run prepares before its first unit."""
    if counts.stage:
        return f"{counts.stage} …"
    eta = counts.eta_s()
    parts = [
        f"{counts.in_flight} in flight",
        f"{counts.failed} failed",
        f"{counts.retries} retries",
        f"{counts.tokens / 1000:.1f}k tok",
        f"${counts.cost_usd:.4f}" + (f" + {counts.cost_unknown} unit(s) cost unknown" if counts.cost_unknown else ""),
        "ETA " + ("–" if eta is None else str(timedelta(seconds=round(eta)))),
    ]
    return " · ".join(parts)


def _price_warnings(plan: RunPlan) -> list[str]:
    """Said before the run: a model whose cost will be unknown (no price, a backend that bills), not $0."""
    from ...core.model import unpriced

    models = {model.alias: model for model in [*plan.models, *([plan.judge] if plan.judge else [])]}
    return [
        f"{model.alias} has no price in its alias: its cost is unknown (–, never $0) unless {model.provider} reports"
        " it (OpenRouter does); give the alias a `price:` (0 for a free server) to count it"
        for model in models.values()
        if unpriced(model)
    ]


def _sandbox_warnings(plan: RunPlan) -> list[str]:
    """Said before the run: model-written Python will be refused, or will run without a sandbox."""
    from ...engine.runner import external_systems
    from ...tools.agent_sandbox import agent_sandbox_mode, agent_sandbox_problem
    from ...tools.python_sandbox import refusal, sandbox_mode, sandbox_problem

    lines = []
    mode = sandbox_mode(plan.config.tools)
    if mode == "unavailable":
        lines.append(refusal(sandbox_problem() or ""))
    if mode == "unsafe":
        lines.append(f"model-written Python runs WITHOUT a sandbox (--unsafe-python): {sandbox_problem()}")
    external = external_systems(plan.systems)
    if external and agent_sandbox_mode(plan.config.tools) == "unsandboxed":
        lines.append(
            f"external agents ({', '.join(external)}) run WITHOUT a sandbox (--unsandboxed-agents): "
            f"{agent_sandbox_problem()}; they can read the task files, gold included"
        )
    return lines


def _stop(plan: RunPlan, stop: BaseException) -> None:
    """One line on how the run stopped and how to finish it; exit without joining threads that may
    still be inside a model call."""
    from ...engine.units import RunDirUnwritable, RunWriteError, WorkerLost

    finish = (
        f"results so far are in {plan.run_dir}. Finish with: compare resume {plan.run_dir}"
        f" (or, as before, compare --resume --out {plan.run_dir})"
    )
    if isinstance(stop, RunDirUnwritable):  # nothing ran: nothing to resume
        finish = "nothing ran; give --out a folder that can be written"
    if isinstance(stop, RunWriteError):
        common.console.print(f"error: {stop}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = 1 if isinstance(stop, WorkerLost) else EXIT_WRITE_FAILED
    else:
        why = "stopped by SIGTERM" if isinstance(stop, Terminated) else "interrupted"
        common.console.print(f"{why}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    sys.stderr.flush()
    os._exit(code)
