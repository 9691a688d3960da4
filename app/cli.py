"""The `compare` command.

    compare [--workflows tool_use,...|all] [--models local,...] [--benchmark bundled] [--limit N] [--out DIR]
    compare --resume --out DIR        finish an interrupted run with the configuration in its manifest
    compare --resume --out DIR --retry-errors   also run again its units that ended infra_error
    compare --replay RUN_DIR          re-run a run's systems on its recorded model responses (no model)
    compare report DIR                rebuild a run directory's summary
    compare rescore DIR --out NEW     score a run's records again with today's scorers, into NEW
    compare tasks / score             validate a benchmark / score predictions made elsewhere
    compare systems / benchmarks / models    what is registered

Exit status: 0 done; 1 some task ended with status "error" or "infra_error" (for `score`: a bad
record); 2 bad configuration or input (nothing was run); 74 the run directory could not be written
(a full disk, a read-only folder); 130 interrupted by Ctrl-C; 143 stopped by SIGTERM. Results so far
are kept in every case, and `compare --resume --out DIR` finishes the run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections import Counter
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console, RenderableType
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Column, Table
from rich.text import Text

# Only typer and rich at the top: `compare --help` must not pay for the core's pydantic models, the config or
# the run log (tests/app/test_startup.py). Each command imports what it uses; names only annotated stay here.
if TYPE_CHECKING:
    from ..compare.benchmark import Benchmark
    from ..compare.runlog import ResultRecord, RunLog
    from ..compare.task import Task
    from .units import RunPlan

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None)
console = Console(stderr=True)
output = Console()

EXIT_WRITE_FAILED = 74  # sysexits' EX_IOERR
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so the run stops as on Ctrl-C (manifest `interrupted`)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


def _split(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _systems(workflows: str | None, systems: str | None) -> list[str] | None:
    """--workflows and --systems name systems alike; `--systems all` is every registered system but the
    workflow variants (frameworks, semantic operators, RAG), `--workflows all` the four workflows."""
    from ..compare.system import SYSTEMS

    named = [*(_split(workflows) or []), *(_split(systems) or [])]
    if systems and "all" in (_split(systems) or []):
        everything = [name for name in SYSTEMS.names() if SYSTEMS.load(name).kind != "workflow-variant"]
        named = [*everything, *(n for n in named if n != "all" and n not in everything)]
    return list(dict.fromkeys(named)) or None


def fail(message: str, code: int = 2) -> typer.Exit:
    from ..compare.runlog import redact_credentials

    text = redact_credentials(message).replace("[", "\\[")  # a message is text, not Rich markup
    console.print(f"[red]error:[/red] {text}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    workflows: Annotated[
        str | None, typer.Option(help="Comma-separated workflows/systems, or 'all' (the four workflows).")
    ] = None,
    systems: Annotated[
        str | None,
        typer.Option(help="Comma-separated systems (compare systems), or 'all' (every system but workflow variants)."),
    ] = None,
    models: Annotated[str | None, typer.Option(help="Comma-separated model aliases (compare models).")] = None,
    benchmark: Annotated[str | None, typer.Option(help="A benchmark name (compare benchmarks).")] = None,
    tasks_path: Annotated[str | None, typer.Option(help="Benchmark files (not needed for bundled).")] = None,
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks.")] = None,
    task_ids: Annotated[str | None, typer.Option(help="Comma-separated task ids to run.")] = None,
    level: Annotated[str | None, typer.Option(help="Comma-separated levels (easy,medium,hard).")] = None,
    question_type: Annotated[
        str | None,
        typer.Option(help="Comma-separated: single_choice, multiple_choice, factoid, report, function_call."),
    ] = None,
    epochs: Annotated[int | None, typer.Option(help="Runs of each task (for pass@k).")] = None,
    hints: Annotated[bool | None, typer.Option("--hints", help="DAB: dataset descriptions with hints.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Tasks run at once.")] = None,
    executor: Annotated[
        str | None, typer.Option(help="Where units run: thread (default), process (worker processes) or ray.")
    ] = None,
    ray_address: Annotated[
        str | None, typer.Option(help="--executor ray: the Ray cluster to join (default: start a local one).")
    ] = None,
    workers: Annotated[
        int | None, typer.Option(help="--executor process: worker processes (default: one per core).")
    ] = None,
    out: Annotated[str | None, typer.Option(help="Run directory (default runs/<time>-<benchmark>).")] = None,
    judge: Annotated[str | None, typer.Option(help="Model alias that judges report rubrics.")] = None,
    postgres_url: Annotated[
        str | None, typer.Option(help="PostgreSQL server for DAB dumps (default: a throw-away local one).")
    ] = None,
    postgres_reader_url: Annotated[
        str | None,
        typer.Option(help="--postgres-url: an existing read-only role for agent queries (default: one per run)."),
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Base URL for openai-compatible:<id> models.")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Env variable with the key for --base-url.")] = None,
    plugin: Annotated[
        list[str] | None, typer.Option(help="A module or .py file that registers systems etc. (repeatable).")
    ] = None,
    unsafe_python: Annotated[
        bool | None,
        typer.Option("--unsafe-python", help="Where bubblewrap cannot run, run model-written Python unsandboxed."),
    ] = None,
    max_steps: Annotated[int | None, typer.Option(help="Budget: model calls per task.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Budget: tokens per task.")] = None,
    wall_time: Annotated[float | None, typer.Option(help="Budget: seconds per task.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML file overriding configs/defaults.yaml.")] = None,
    resume: Annotated[bool, typer.Option(help="Finish the run in --out with its recorded configuration.")] = False,
    replay: Annotated[
        str | None, typer.Option(help="Re-run a run directory's systems on its recorded model responses (no model).")
    ] = None,
    cache: Annotated[
        bool | None, typer.Option("--cache", help="Answer a model call seen before from the response cache (cost 0).")
    ] = None,
    temperature: Annotated[
        float | None, typer.Option(help="Sampling temperature of every request of every system (0-2).")
    ] = None,
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling of every request (0 < p <= 1).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampling seed of every request.")] = None,
    max_output_tokens: Annotated[int | None, typer.Option(help="Output-token limit of every request.")] = None,
    allow_drift: Annotated[
        bool,
        typer.Option(
            "--allow-drift",
            help="--resume/--replay: go on although code, plugins, scorers or data changed since the run "
            "(recorded in the manifest).",
        ),
    ] = False,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            help="--resume: run again the units that ended infra_error (the provider failed); the earlier "
            "attempts' spend is kept in the unit's cost.",
        ),
    ] = False,
) -> None:
    """Run systems × models on a benchmark and write a run directory."""
    if ctx.invoked_subcommand is not None:
        return
    sampling = {"temperature": temperature, "top_p": top_p, "seed": seed, "max_output_tokens": max_output_tokens}
    budgets = {"max_steps": max_steps, "max_tokens": max_tokens, "wall_time_s": wall_time}
    overrides: dict[str, Any] = {
        "workflows": _systems(workflows, systems),
        "models": _split(models),
        "benchmark": benchmark,
        "tasks_path": tasks_path,
        "limit": limit,
        "task_ids": _split(task_ids),
        "levels": _split(level),
        "question_types": _split(question_type),
        "epochs": epochs,
        "hints": hints,
        "concurrency": concurrency,
        "executor": executor,
        "ray_address": ray_address,
        "workers": workers,
        "out": out,
        "judge": judge,
        "postgres_url": postgres_url,
        "postgres_reader_url": postgres_reader_url,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "plugins": plugin or None,
        "budgets": {k: v for k, v in budgets.items() if v is not None} or None,
        "tools": {"unsafe_python": True} if unsafe_python else None,
        "cache": {"enabled": True} if cache else None,
        "generation": _generation_flags(sampling),
    }
    from .config import ConfigError, load_plugins, load_run_config
    from .runner import plan_replay, plan_run, replayed_run, resumed_config  # loads the tools: not for --help

    try:
        if resume or replay:
            _refuse_other_flags(ctx, "--replay" if replay else "--resume")
        if resume and not out:
            raise ConfigError("--resume needs --out DIR (the run directory to finish)")
        source = replay or (replayed_run(out) if resume and out else None)  # resuming a replay replays
        if source:
            plan = plan_replay(source, out, postgres_url=postgres_url)
        else:
            if resume and out:
                run_config = resumed_config(
                    out, postgres_url=postgres_url, postgres_reader_url=postgres_reader_url, base_url=base_url
                )
                load_plugins(run_config.plugins)
            else:
                run_config = load_run_config(config, overrides)
            plan = plan_run(run_config)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    if allow_drift and not (resume or replay):
        raise fail("--allow-drift goes with --resume or --replay (a new run has nothing to drift from)")
    if retry_errors and not resume:
        raise fail("--retry-errors goes with --resume --out RUN (it runs a finished run's infra errors again)")
    plan.retry_errors = retry_errors
    raise typer.Exit(_run(plan, resume, allow_drift))


def _generation_flags(given: dict[str, float | int | None]) -> dict[str, float | int] | None:
    """The sampling flags given, checked here so that a bad value names its flag (exit 2)."""
    from pydantic import ValidationError

    from ..compare.model import GenerationSettings

    flags = {name: value for name, value in given.items() if value is not None}
    try:
        GenerationSettings.model_validate(flags)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        flag = "--" + str(error["loc"][0]).replace("_", "-")
        raise fail(f"{flag} {flags.get(str(error['loc'][0]))}: {error['msg']}") from None
    return flags or None


# With --resume or --replay the recorded configuration is the run's: only where to write, and the URLs
# whose passwords the manifest does not keep, may be given (and --allow-drift).
RECORDED_RUN_FLAGS = {
    "--resume": {"resume", "out", "postgres_url", "postgres_reader_url", "base_url", "allow_drift", "retry_errors"},
    "--replay": {"replay", "out", "postgres_url", "allow_drift"},
}


def _refuse_other_flags(ctx: typer.Context, mode: str) -> None:
    from .config import ConfigError

    allowed = RECORDED_RUN_FLAGS[mode]
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name not in allowed
        and getattr(ctx.get_parameter_source(param.name or ""), "name", None) in ("COMMANDLINE", "ENVIRONMENT")
    ]
    if given:
        may = ", ".join("--" + name.replace("_", "-") for name in sorted(allowed - {mode.strip("-")}))
        raise ConfigError(
            f"{mode} runs with the recorded configuration of the run and takes no {', '.join(given)}"
            f" (only {may}); to change the configuration, start a new run with another --out"
        )


def _run(plan: RunPlan, resume: bool, allow_drift: bool = False) -> int:
    from ..compare.runlog import RunLogError, read_records, redact_credentials
    from .config import ConfigError
    from .runner import RunProgress, RunWriteError, execute

    units = len(list(plan.units()))
    console.print(
        f"run: {len(plan.tasks)} tasks × {len(plan.systems)} systems × {len(plan.models)} models"
        f" × {plan.config.epochs} epochs = {units} units → {plan.run_dir}",
        highlight=False,
    )
    from .executors import executor_warnings

    for warning in [*plan.benchmark.warnings(plan.tasks), *_sandbox_warnings(plan), *executor_warnings(plan)]:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    try:
        records = read_records(plan.run_dir)[0] if resume else []
        already = sum(not (plan.retry_errors and r.status == "infra_error") for r in records)
    except RunLogError as problem:
        raise fail(str(problem)) from None
    counts = RunProgress(total=units, done=already)
    last_unit = TextColumn("{task.description}", table_column=Column(max_width=48, no_wrap=True, overflow="ellipsis"))
    columns = [last_unit, BarColumn(bar_width=24), MofNCompleteColumn(), TimeElapsedColumn()]
    with RunProgressDisplay(counts, *columns, console=console, transient=False) as progress:
        bar = progress.add_task("running", total=units, completed=already)

        def on_result(record: ResultRecord) -> None:
            em = record.scores.get("exact_match")
            mark = "" if em is None else f" EM={em:.0f}"
            description = f"{record.system}/{record.model} {record.task_id} {record.status}{mark}"
            progress.update(bar, advance=1, description=description)

        previous = signal.signal(signal.SIGTERM, _raise_terminated)
        try:
            execute(plan, on_result=on_result, resume=resume, progress=counts, allow_drift=allow_drift)
        except (ConfigError, RunLogError) as problem:
            raise fail(str(problem)) from None
        except (KeyboardInterrupt, RunWriteError) as stop:
            progress.stop()
            _stop(plan, stop)
        finally:
            signal.signal(signal.SIGTERM, previous)
    run = _write_summary(plan.run_dir)
    _write_report([run], None, at_end_of_run=True)  # the run as the summary read it: read once
    records = run.records
    failed = [r for r in records if r.status in ("error", "infra_error", "replay_miss")]
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

    def __init__(self, counts: Any, *columns: Any, **options: Any) -> None:  # counts: a runner.RunProgress
        self.counts = counts  # before Progress.__init__, which renders once
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        yield Text(progress_line(self.counts), style="progress.data", no_wrap=True, overflow="ellipsis")


def progress_line(counts: Any) -> str:
    """`2 in flight · 1 failed · 3 retries · 12.3k tok · $0.0123 · ETA 0:00:25` (a runner.RunProgress), or
    what the run prepares before its first unit."""
    if counts.stage:
        return f"{counts.stage} …"
    eta = counts.eta_s()
    parts = [
        f"{counts.in_flight} in flight",
        f"{counts.failed} failed",
        f"{counts.retries} retries",
        f"{counts.tokens / 1000:.1f}k tok",
        f"${counts.cost_usd:.4f}",
        "ETA " + ("–" if eta is None else str(timedelta(seconds=round(eta)))),
    ]
    return " · ".join(parts)


def _sandbox_warnings(plan: RunPlan) -> list[str]:
    """Said before the run: model-written Python will be refused, or will run without a sandbox."""
    from ..tools.python_sandbox import refusal, sandbox_mode, sandbox_problem

    mode = sandbox_mode(plan.config.tools)
    if mode == "unavailable":
        return [refusal(sandbox_problem() or "")]
    if mode == "unsafe":
        return [f"model-written Python runs WITHOUT a sandbox (--unsafe-python): {sandbox_problem()}"]
    return []


def _stop(plan: RunPlan, stop: BaseException) -> None:
    """One line on how the run stopped and how to finish it; exit without joining threads that may
    still be inside a model call."""
    from .units import RunDirUnwritable, RunWriteError, WorkerLost

    finish = f"results so far are in {plan.run_dir}. Finish with: compare --resume --out {plan.run_dir}"
    if isinstance(stop, RunDirUnwritable):  # nothing ran: nothing to resume
        finish = "nothing ran; give --out a folder that can be written"
    if isinstance(stop, RunWriteError):
        console.print(f"error: {stop}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = 1 if isinstance(stop, WorkerLost) else EXIT_WRITE_FAILED
    else:
        why = "stopped by SIGTERM" if isinstance(stop, Terminated) else "interrupted"
        console.print(f"{why}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    sys.stderr.flush()
    os._exit(code)


def _write_summary(run_dir: Path, infra_errors_as_failures: bool = False, to: Path | None = None) -> RunLog:
    """Write summary.md (into `to` or the run directory) and print the table; returns the run log it read."""
    from ..compare.runlog import RunLogError, read_run
    from ..reports import markdown, pairwise, rich_table, summarize  # numpy and the report code: not at start
    from ..reports.summary import warning_lines

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
    _print_whole(rich_table(rows))
    for line in warning_lines(rows):  # "lotus/gpt-5: 12 of 37 answered without running an operator"
        console.print(f"[yellow]main step skipped:[/yellow] {line.removeprefix('- ')}", highlight=False)
    console.print(f"results: {run_dir / 'results.jsonl'}\nsummary: {summary_file}", highlight=False)
    return run


def _wider(width: int) -> Console:
    """The output console, at least `width` columns wide (Rich never prints wider than its console)."""
    if width <= output.width:
        return output
    return Console(file=output.file, width=width, force_terminal=output.is_terminal, color_system=output.color_system)


def _print_whole(table: Table) -> None:
    """The comparison table with every name and number whole: wider than the terminal if it must be."""
    from ..reports.summary import table_width

    _wider(table_width(table)).print(table)


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
        lines += [
            "## Spent on interrupted units (not in the results)",
            "",
            f"- {len(run.interrupted)} attempt(s) stopped before their record, re-run by --resume: {calls} model"
            f" call(s), {usage.input_tokens} input / {usage.output_tokens} output tokens,"
            f" ${usage.cost_usd:.4f}{unknown}.",
        ]
    return lines


def _benchmark_lines(name: str, records: list[ResultRecord]) -> list[str]:
    """The benchmark's own summary section; none when the benchmark is not registered here."""
    from ..compare.benchmark import BENCHMARKS

    if name not in BENCHMARKS:
        console.print(f"[yellow]warning:[/yellow] benchmark {name!r} is not registered: its own section is left out")
        return []
    return BENCHMARKS.load(name).report_lines(records)


@app.command("report")
def report_command(
    run_dirs: Annotated[list[Path], typer.Argument(help="One or more run directories (compared on common tasks).")],
    out: Annotated[
        Path | None, typer.Option(help="Folder for the report (default: the run directory; needed for several).")
    ] = None,
    infra_errors_as_failures: Annotated[
        bool,
        typer.Option(help="Count provider failures as failures in the quality means (default: left out, counted)."),
    ] = False,
    judge: Annotated[
        str | None,
        typer.Option(help="Model alias that judges why wrong answers are wrong (DAB's modes); metered apart."),
    ] = None,
) -> None:
    """Rebuild a run directory's summary.md, and write the comparison report of one or several run
    directories: report.html (offline), report.md with figures, results.csv/.parquet, leaderboard.json."""
    judge_model = _failure_judge(judge)
    busy = _running(run_dirs, out)
    if len(run_dirs) == 1:
        runs: list[Path | RunLog] = [_write_summary(run_dirs[0], infra_errors_as_failures, to=out if busy else None)]
    else:
        runs = list(run_dirs)
    _write_report(runs, out, infra_errors_as_failures=infra_errors_as_failures, judge=judge_model)


def _running(run_dirs: list[Path], out: Path | None) -> bool:
    """Whether a run directory is being written by a running `compare` now. Its own files (summary.md, the
    report) are the run's to write when it ends: a report of it goes to another --out, else is refused."""
    from ..compare.runlog import run_dir_holder

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


@app.command("rescore")
def rescore_command(
    run_dir: Annotated[Path, typer.Argument(help="A run directory (left untouched).")],
    out: Annotated[Path, typer.Option(help="The new run directory for the records scored again.")],
) -> None:
    """Score a run's records again with today's scorers into a new run directory (with its summary and
    report); its manifest records the scorer versions before and after."""
    from ..compare.runlog import RunLogError
    from .config import ConfigError
    from .rescore import rescore

    try:
        done = rescore(run_dir, out)
    except (ConfigError, RunLogError) as problem:
        raise fail(str(problem)) from None
    for name in sorted(done.before.keys() | done.after.keys()):
        before, after = done.before.get(name, "(not recorded)"), done.after.get(name, "(none)")
        change = f"{before} → {after}" if before != after else f"{after} (unchanged)"
        console.print(f"scorer {name}: version {change}", highlight=False, markup=False)
    console.print(
        f"{done.records} records scored again, {done.changed} with changed scores, {done.scoring_errors} with a "
        f"scoring error → {done.out}",
        highlight=False,
        markup=False,
    )
    _write_report([_write_summary(done.out)], None, at_end_of_run=True)


def _failure_judge(name: str | None) -> Any:
    """The judge's model, resolved and loaded before anything is written; a bad name or a missing key: exit 2."""
    if name is None:
        return None
    from ..compare.model import get_provider
    from .config import ConfigError, RunConfig, missing_api_keys, resolve_models

    try:
        model = resolve_models([name], RunConfig())[0]
        missing = missing_api_keys([model])
        if missing:
            raise ConfigError(f"missing API key for the judge {name}: set {', '.join(missing)}")
        get_provider(model.provider).prepare(model)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    return model


def _write_report(
    run_dirs: list[Path | RunLog],
    out: Path | None,
    *,
    infra_errors_as_failures: bool = False,
    at_end_of_run: bool = False,
    judge: Any = None,
) -> None:
    """The comparison report; after a run, a report that cannot be built is a warning, not the run's failure."""
    from ..compare.runlog import redact_credentials
    from ..reports import ReportError, build_report  # charts and the browser bundle load only when needed

    try:
        files = build_report(run_dirs, out, infra_errors_as_failures=infra_errors_as_failures, judge=judge)
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
        from ..reports import rich_table

        for benchmark, rows in files.rows.items():
            _print_whole(rich_table(rows, title=f"{benchmark}: comparison (means per task; $ is the total)"))
        console.print(f"summary: {files.files['summary']}", highlight=False)
    console.print(f"report: {files.files['html']}", highlight=False)


def _benchmark(name: str, path: Path | None) -> Benchmark:
    from ..compare.benchmark import BenchmarkError, create_benchmark
    from ..compare.registry import RegistryError

    try:
        return create_benchmark(name, path)
    except (RegistryError, BenchmarkError) as problem:
        raise fail(str(problem)) from None


@app.command("import")
def import_command(
    fmt: Annotated[str, typer.Argument(metavar="FORMAT", help="dab-trajectories")],
    path: Annotated[Path, typer.Argument(help="The published files (a results-<model>/ folder or above it).")],
    out: Annotated[Path, typer.Option(help="The run directory to write.")],
    system: Annotated[str, typer.Option(help="The system name the trials are recorded under.")] = "dab-react",
    tasks_path: Annotated[
        Path | None, typer.Option(help="The benchmark's task files: score each answer with its official rule.")
    ] = None,
    hints: Annotated[bool, typer.Option("--hints", help="DAB: the tasks' descriptions with hints.")] = False,
) -> None:
    """Turn published agent trajectories into a run directory every other command reads (compare report)."""
    from ..compare.benchmark import BenchmarkError, create_benchmark
    from ..compare.registry import RegistryError
    from .importer import IMPORT_FORMATS, ImportFailed, import_trajectories

    if fmt not in IMPORT_FORMATS:
        raise fail(f"unknown import format {fmt!r} (known: {', '.join(IMPORT_FORMATS)})")
    if not path.exists():
        raise fail(f"not found: {path}")
    if (out / "results.jsonl").exists():
        raise fail(f"{out} already holds a run (results.jsonl): give a new --out")
    bench = None
    if tasks_path is not None:
        try:
            bench = create_benchmark("dab", tasks_path, hints=hints)
        except (BenchmarkError, RegistryError) as problem:
            raise fail(str(problem)) from None
    try:
        imported = import_trajectories(path, out, system=system, benchmark=bench)
    except (ImportFailed, BenchmarkError) as problem:
        raise fail(str(problem)) from None
    models = ", ".join(f"{m}: {n}" for m, n in sorted(Counter(r.model for r in imported.records).items()))
    console.print(f"imported {len(imported.records)} trials ({models}) → {out}", highlight=False)
    for item, count in sorted(imported.missing.items()):
        console.print(f"not recorded in {count} trial(s): {item}", highlight=False, markup=False)
    if imported.unscored:
        console.print(f"not scored (no such task in --tasks-path): {', '.join(sorted(set(imported.unscored)))}")


@app.command("tasks")
def tasks_command(
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")],
    tasks_path: Annotated[
        Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")
    ] = None,
    path: Annotated[Path | None, typer.Option(hidden=True, help="Old name of --tasks-path.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report (with every task id) as JSON.")] = False,
    ids: Annotated[bool, typer.Option("--ids", help="Print the task ids, one a line (with level and type).")] = False,
) -> None:
    """Load and validate a benchmark without running anything: counts by type, level and data availability."""
    from ..compare.benchmark import BenchmarkError, TaskLoadError, TaskLoadErrors

    path = tasks_path or path
    bench = _benchmark(benchmark, path)
    try:
        loaded = bench.load()
    except TaskLoadError as problem:
        if not as_json:
            raise fail(str(problem)) from None  # TaskLoadErrors' text already has one problem per line
        problems = problem.errors if isinstance(problem, TaskLoadErrors) else [problem]
        fields = ("file", "line", "field", "message")
        output.print_json(json.dumps({"errors": [{key: getattr(p, key) for key in fields} for p in problems]}))
        raise typer.Exit(2) from None
    except (BenchmarkError, OSError) as problem:
        raise fail(str(problem)) from None
    if not loaded:
        raise fail(f"the {benchmark} benchmark" + (f" at {path}" if path else "") + " has no tasks")
    report = {
        "benchmark": benchmark,
        "tasks": len(loaded),
        "by_question_type": dict(Counter(t.question_type.value for t in loaded)),
        "by_level": dict(Counter(t.level or "none" for t in loaded)),
        "available": sum(not t.unavailable for t in loaded),
        "unavailable": dict(Counter(t.unavailable for t in loaded if t.unavailable)),
        "with_gold": sum(_has_gold(t) for t in loaded),
        "warnings": bench.warnings(loaded),
        "ids": [task.id for task in loaded],
    }
    if ids:
        for task in loaded:
            typer.echo(f"{task.id}\t{task.level or '-'}\t{task.question_type.value}")  # tabs kept: for scripts
        return
    if as_json:
        output.print_json(json.dumps(report))
        return
    for key, value in report.items():
        if key != "ids":  # --ids lists them
            output.print(f"{key}: {value}", highlight=False, soft_wrap=True)


def _has_gold(task: Task) -> bool:
    gold = task.gold
    return gold is not None and any(
        v is not None for v in (gold.answer, gold.report, gold.tool_call, gold.validator, gold.ground_truth_file)
    )


@app.command("score")
def score_command(
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")],
    tasks_path: Annotated[
        Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")
    ] = None,
    tasks: Annotated[Path | None, typer.Option(hidden=True, help="Old name of --tasks-path.")] = None,
    predictions: Annotated[
        Path,
        typer.Option(help="Predictions made elsewhere: our JSONL, or a file a benchmark publishes (see --format)."),
    ] = Path("predictions.jsonl"),
    out: Annotated[
        Path | None, typer.Option(help="Write one JSON line per prediction here, the aggregate to OUT.aggregate.json.")
    ] = None,
    rule: Annotated[
        str | None, typer.Option(help="An earlier revision of the official scoring rule (see compare benchmarks).")
    ] = None,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl, dab-leaderboard, dabstep-submission, dbgorilla-results or fdabench-results "
            "(default: recognised from the content).",
        ),
    ] = None,
    published: Annotated[
        float | None, typer.Option(help="The leaderboard's figure for this file: say whether ours reproduces it.")
    ] = None,
) -> None:
    """Score predictions produced elsewhere with the benchmark's official rules.

    One row per prediction, in input order, written to --out as soon as it is scored; then the
    benchmark's leaderboard aggregate. A published file that is malformed, or a prediction given twice
    (twice for one run, in a format with runs), is refused with exit status 2 naming the entries.
    Exit status 1 when a line of our JSONL could not be read or a scorer failed (the others are scored)."""
    from ..compare.benchmark import BenchmarkError
    from ..evaluators.submissions import FORMATS, SubmissionError
    from .scoring import finish, read_inputs, score_predictions, write_aggregate

    bench = _benchmark(benchmark, tasks_path or tasks)
    scorers = _scorers_of(bench, rule)
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
        console.print(text, highlight=False, soft_wrap=True, markup=False)

    try:
        run, inputs, figures = read_inputs(predictions, fmt, bench, by_id, say)
        score_predictions(run, inputs, bench, scorers, out, say)
    except (BenchmarkError, SubmissionError) as problem:  # nothing to score, or a malformed submission
        raise fail(str(problem)) from None
    output.print(_metric_table(run.rows))
    aggregate = bench.aggregate(run.scored)
    if aggregate:
        output.print(_aggregate_table(f"{benchmark} aggregate metrics", aggregate))
    finish(run, predictions, bench, loaded, figures, published)
    if run.aggregate:
        output.print(_aggregate_table(f"{benchmark} leaderboard aggregate ({run.format})", run.aggregate))
    for line in [*run.checks, *run.notes]:
        output.print(line, highlight=False, soft_wrap=True, markup=False)
    if out is not None and run.aggregate:
        console.print(f"aggregate: {write_aggregate(run, out)}", highlight=False)
    console.print(f"{len(run.rows)} predictions scored, {run.bad} bad record(s)", highlight=False)
    raise typer.Exit(1 if run.bad else 0)


def _scorers_of(bench: Benchmark, rule: str | None) -> tuple[str, ...]:
    if rule is None:
        return bench.scorers
    if rule not in bench.rules:
        known = ", ".join(bench.rules) or "none"
        raise fail(f"the {bench.name} benchmark has no scoring rule {rule!r}; earlier revisions: {known}")
    return bench.rules[rule]


def _metric_table(rows: list[dict[str, Any]]) -> Table:
    from ..evaluators.statistics import bootstrap_ci

    table = Table(title="Scores (mean with 95% bootstrap CI)")
    for column in ("metric", "n", "mean", "95% CI"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    numeric = {key for row in rows for key, value in row.items() if isinstance(value, int | float)}
    metrics = sorted(numeric - {"epoch"})  # a row's epoch numbers its run, it is no score
    for metric in metrics:
        values = [float(row[metric]) for row in rows if isinstance(row.get(metric), int | float)]
        mean, low, high = bootstrap_ci(values)
        table.add_row(metric, str(len(values)), f"{mean:.3f}", f"[{low:.3f}, {high:.3f}]")
    return table


def _aggregate_table(title: str, metrics: dict[str, Any]) -> Table:
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value))
    return table


# ---------------------------------------------------------------- what is registered


def _listing(title: str, columns: list[str], rows: list[list[str]], as_json: bool) -> None:
    if as_json:
        output.print_json(json.dumps([dict(zip(columns, row, strict=True)) for row in rows]))
        return
    table = Table(title=title)
    widest = [max([len(column), *(len(row[index]) for row in rows)]) for index, column in enumerate(columns)]
    for column, width in zip(columns, widest, strict=True):
        whole = column in WHOLE_COLUMNS  # names a script reads back: never folded or cut
        table.add_column(column, overflow="fold", no_wrap=whole, min_width=width if whole else None)
    for row in rows:
        table.add_row(*row)
    if not output.is_terminal:  # a pipe or a file: rows as wide as they are
        _wider(sum(widest) + 3 * len(columns) + 4).print(table)
        return
    needed = sum(w for c, w in zip(columns, widest, strict=True) if c in WHOLE_COLUMNS) + 8 * len(columns)
    if needed > output.width:  # too narrow for a table that keeps every name whole: one line per row
        for row in rows:
            output.print("  ".join(row), highlight=False, soft_wrap=True)
        return
    output.print(table)


WHOLE_COLUMNS = {"name", "alias", "provider", "model id"}


def _registered(registry: Any) -> list[tuple[str, Any, str]]:
    """(name, loaded object, where it comes from) of every entry; one that cannot be loaded: exit 2."""
    from ..compare.registry import RegistryError

    try:
        return [(name, registry.load(name), _source(entry.origin)) for name, entry in registry.entries().items()]
    except RegistryError as problem:
        raise fail(str(problem)) from None


def _source(origin: str) -> str:
    source = origin.removeprefix("entry point of ")
    return "built-in" if source == "data-agent-compare" else source


@app.command("systems")
def systems_command(
    plugin: Annotated[list[str] | None, typer.Option(help="A module or .py file to import first.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The registered systems: name, kind, one-line description and where each comes from."""
    from ..compare.system import SYSTEMS

    _plugins(plugin)
    rows = [[name, cls.kind, cls.summary(), origin] for name, cls, origin in _registered(SYSTEMS)]
    title = "Systems (--systems NAME; all: every kind but workflow-variant; --workflows all: the workflows)"
    _listing(title, ["name", "kind", "description", "from"], rows, as_json)


@app.command("benchmarks")
def benchmarks_command(
    plugin: Annotated[list[str] | None, typer.Option(help="A module or .py file to import first.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The registered benchmarks: name, description, scorers, whether --tasks-path is needed."""
    from ..compare.benchmark import BENCHMARKS

    _plugins(plugin)
    rows = [
        [name, cls.summary(), ", ".join(cls.scorers), ", ".join(cls.rules), "yes" if cls.needs_path else "no", origin]
        for name, cls, origin in _registered(BENCHMARKS)
    ]
    columns = ["name", "description", "scorers", "earlier rules", "needs --tasks-path", "from"]
    _listing("Benchmarks (--benchmark NAME)", columns, rows, as_json)


@app.command("models")
def models_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
    prices_from_openrouter: Annotated[
        bool,
        typer.Option(
            "--prices-from-openrouter",
            help="Refresh the prices of the OpenRouter aliases from OpenRouter's model list (needs "
            "OPENROUTER_API_KEY; OPENROUTER_BASE_URL overrides the address) and write them into the table.",
        ),
    ] = False,
    models_file: Annotated[
        Path | None,
        typer.Option("--models-file", help="An alias table of your own: listed over the shipped one, and refreshed."),
    ] = None,
) -> None:
    """The model aliases of configs/models.yaml: provider, model id and prices (USD per million tokens)."""
    from ..compare.model import PROVIDERS
    from .config import ConfigError, load_model_table

    if prices_from_openrouter:
        _refresh_prices(models_file)
    try:
        table = load_model_table() | (load_model_table(models_file) if models_file else {})
    except ConfigError as problem:
        raise fail(str(problem)) from None
    rows = []
    for alias, model in table.items():
        price = model.price
        prices = "–" if price is None else f"{price.input_per_mtok:g} in / {price.output_per_mtok:g} out"
        registered = "" if model.provider in PROVIDERS else " (not registered)"
        rows.append([alias, model.provider + registered, model.model_id, prices])
    _listing("Models (--models ALIAS)", ["alias", "provider", "model id", "$/Mtok"], rows, as_json)
    if not as_json:
        console.print(
            f"providers: {', '.join(PROVIDERS.names())}; also openai-compatible:<model id> with --base-url",
            highlight=False,
        )


def _refresh_prices(models_file: Path | None) -> None:
    """Write OpenRouter's current prices into the alias table (`app/prices.py` says which and how)."""
    from .config import ConfigError
    from .prices import PriceRefreshError, fetch_prices, openrouter_key, refresh_table, shipped_models_file

    path = models_file or shipped_models_file()
    try:
        changes = refresh_table(path, fetch_prices(openrouter_key()))
    except ConfigError as problem:
        raise fail(str(problem)) from None
    except (PriceRefreshError, OSError) as problem:
        raise fail(f"prices not refreshed: {problem}", 1) from None
    for change in changes:
        old = "–" if change.old is None else f"{change.old.input_per_mtok:g} / {change.old.output_per_mtok:g}"
        new = f"{change.new.input_per_mtok:g} / {change.new.output_per_mtok:g}"
        console.print(f"{change.alias} ({change.model_id}): $/Mtok in/out {old} -> {new}", highlight=False)
    console.print(f"{len(changes)} price(s) changed in {path}", highlight=False)


def _plugins(plugins: list[str] | None) -> None:
    from .config import ConfigError, load_plugins

    try:
        load_plugins(plugins or [])
    except ConfigError as problem:
        raise fail(str(problem)) from None


def main() -> None:
    app(prog_name="compare")
