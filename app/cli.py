"""The `compare` command.

    compare [--workflows tool_use,...|all] [--models local,...] [--benchmark bundled] [--limit N] [--out DIR]
    compare --resume --out DIR        finish an interrupted run with the configuration in its manifest
    compare --replay RUN_DIR          re-run a run's systems on its recorded model responses (no model)
    compare report DIR                rebuild a run directory's summary
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

from ..compare.benchmark import BENCHMARKS, Benchmark, BenchmarkError, TaskLoadError, TaskLoadErrors, create_benchmark
from ..compare.model import PROVIDERS
from ..compare.registry import RegistryError
from ..compare.runlog import ResultRecord, RunLog, RunLogError, read_records, read_run, redact_credentials
from ..compare.scorer import score
from ..compare.system import SYSTEMS
from ..compare.task import Task
from .config import ConfigError, load_model_table, load_plugins, load_run_config

if TYPE_CHECKING:
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
    named = [*(_split(workflows) or []), *(_split(systems) or [])]
    if systems and "all" in (_split(systems) or []):
        everything = [name for name in SYSTEMS.names() if SYSTEMS.load(name).kind != "workflow-variant"]
        named = [*everything, *(n for n in named if n != "all" and n not in everything)]
    return list(dict.fromkeys(named)) or None


def fail(message: str, code: int = 2) -> typer.Exit:
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
    out: Annotated[str | None, typer.Option(help="Run directory (default runs/<time>-<benchmark>).")] = None,
    judge: Annotated[str | None, typer.Option(help="Model alias that judges report rubrics.")] = None,
    postgres_url: Annotated[
        str | None, typer.Option(help="PostgreSQL server for DAB dumps (default: a throw-away local one).")
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
) -> None:
    """Run systems × models on a benchmark and write a run directory."""
    if ctx.invoked_subcommand is not None:
        return
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
        "out": out,
        "judge": judge,
        "postgres_url": postgres_url,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "plugins": plugin or None,
        "budgets": {k: v for k, v in budgets.items() if v is not None} or None,
        "tools": {"unsafe_python": True} if unsafe_python else None,
        "cache": {"enabled": True} if cache else None,
    }
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
                run_config = resumed_config(out, postgres_url=postgres_url, base_url=base_url)
                load_plugins(run_config.plugins)
            else:
                run_config = load_run_config(config, overrides)
            plan = plan_run(run_config)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    raise typer.Exit(_run(plan, resume))


# With --resume or --replay the recorded configuration is the run's: only where to write, and the URLs
# whose passwords the manifest does not keep, may be given.
RECORDED_RUN_FLAGS = {
    "--resume": {"resume", "out", "postgres_url", "base_url"},
    "--replay": {"replay", "out", "postgres_url"},
}


def _refuse_other_flags(ctx: typer.Context, mode: str) -> None:
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


def _run(plan: RunPlan, resume: bool) -> int:
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
        already = len(read_records(plan.run_dir)[0]) if resume else 0
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
            execute(plan, on_result=on_result, resume=resume, progress=counts)
        except (ConfigError, RunLogError) as problem:
            raise fail(str(problem)) from None
        except (KeyboardInterrupt, RunWriteError) as stop:
            progress.stop()
            _stop(plan, stop)
        finally:
            signal.signal(signal.SIGTERM, previous)
    records = _write_summary(plan.run_dir)
    _write_report([plan.run_dir], None, at_end_of_run=True)
    errors = sum(r.status in ("error", "infra_error", "replay_miss") for r in records)
    if errors:
        console.print(f"[yellow]{errors} unit(s) ended with an error; see results.jsonl and traces/[/yellow]")
    return 1 if errors else 0


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
    from .units import RunWriteError, WorkerLost

    finish = f"results so far are in {plan.run_dir}. Finish with: compare --resume --out {plan.run_dir}"
    if isinstance(stop, RunWriteError):
        console.print(f"error: {stop}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = 1 if isinstance(stop, WorkerLost) else EXIT_WRITE_FAILED
    else:
        why = "stopped by SIGTERM" if isinstance(stop, Terminated) else "interrupted"
        console.print(f"{why}; {finish}", highlight=False, soft_wrap=True, markup=False)
        code = EXIT_TERMINATED if isinstance(stop, Terminated) else EXIT_INTERRUPTED
    sys.stderr.flush()
    os._exit(code)


def _write_summary(run_dir: Path, infra_errors_as_failures: bool = False) -> list[ResultRecord]:
    from ..reports import markdown, pairwise, rich_table, summarize  # numpy and the report code: not at start

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
    (run_dir / "summary.md").write_text(summary, encoding="utf-8")
    output.print(rich_table(rows))
    console.print(f"results: {run_dir / 'results.jsonl'}\nsummary: {run_dir / 'summary.md'}", highlight=False)
    return run.records


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
    if len(run_dirs) == 1:
        _write_summary(run_dirs[0], infra_errors_as_failures)
    _write_report(run_dirs, out, infra_errors_as_failures=infra_errors_as_failures, judge=judge_model)


def _failure_judge(name: str | None) -> Any:
    """The judge's model, resolved and loaded before anything is written; a bad name or a missing key: exit 2."""
    if name is None:
        return None
    from ..compare.model import get_provider
    from .config import RunConfig, missing_api_keys, resolve_models

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
    run_dirs: list[Path],
    out: Path | None,
    *,
    infra_errors_as_failures: bool = False,
    at_end_of_run: bool = False,
    judge: Any = None,
) -> None:
    """The comparison report; after a run, a report that cannot be built is a warning, not the run's failure."""
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
    console.print(f"report: {files.files['html']}", highlight=False)


def _benchmark(name: str, path: Path | None) -> Benchmark:
    try:
        return create_benchmark(name, path)
    except (RegistryError, BenchmarkError) as problem:
        raise fail(str(problem)) from None


@app.command("tasks")
def tasks_command(
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")],
    path: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Load and validate a benchmark without running anything: counts by type, level and data availability."""
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
    }
    if as_json:
        output.print_json(json.dumps(report))
        return
    for key, value in report.items():
        output.print(f"{key}: {value}", highlight=False, soft_wrap=True)


def _has_gold(task: Task) -> bool:
    gold = task.gold
    return gold is not None and any(
        v is not None for v in (gold.answer, gold.report, gold.tool_call, gold.validator, gold.ground_truth_file)
    )


@app.command("score")
def score_command(
    benchmark: Annotated[str, typer.Option(help="A benchmark name (compare benchmarks).")],
    tasks: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None,
    predictions: Annotated[Path, typer.Option(help="JSONL of predictions made elsewhere.")] = Path("predictions.jsonl"),
    out: Annotated[Path | None, typer.Option(help="Write one JSON line of metrics per prediction here.")] = None,
    rule: Annotated[
        str | None, typer.Option(help="An earlier revision of the official scoring rule (see compare benchmarks).")
    ] = None,
) -> None:
    """Score predictions produced elsewhere with the benchmark's official rules.

    Each row is written to --out as soon as it is scored. Exit status 1 when any prediction record
    could not be read or scored (the others are still scored and written)."""
    from ..evaluators.predictions import PredictionError, read_predictions

    bench = _benchmark(benchmark, tasks)
    scorers = _scorers_of(bench, rule)
    if not predictions.is_file():
        raise fail(f"predictions file not found: {predictions}")
    try:
        by_id = {task.id: task for task in bench.load()}
    except (BenchmarkError, OSError) as problem:  # a TaskLoadError names file, line and field
        raise fail(str(problem)) from None
    rows, scored, bad = [], [], 0
    sink = out.open("w", encoding="utf-8") if out is not None else None
    try:
        for item in read_predictions(predictions, bench, by_id):
            if isinstance(item, PredictionError):
                bad += 1
                console.print(f"bad record: {item}", highlight=False, soft_wrap=True, markup=False)
                continue
            task, answer, trace = item
            sheet = score(task, answer, trace, scorers)
            row = {"task_id": task.id, **sheet.scores, **({"scoring_error": sheet.error} if sheet.error else {})}
            if sheet.error:
                bad += 1
                console.print(f"scorer failed on {task.id}: {sheet.error}", highlight=False, markup=False)
            if sink is not None:
                sink.write(json.dumps(row) + "\n")
                sink.flush()
            rows.append(row)
            scored.append((task, answer))
    except BenchmarkError as problem:  # this benchmark reads no prediction files, or none were given
        raise fail(str(problem)) from None
    finally:
        if sink is not None:
            sink.close()
    output.print(_metric_table(rows))
    aggregate = bench.aggregate(scored)
    if aggregate:
        output.print(_aggregate_table(f"{benchmark} aggregate metrics", aggregate))
    console.print(f"{len(rows)} predictions scored, {bad} bad record(s)", highlight=False)
    raise typer.Exit(1 if bad else 0)


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
    metrics = sorted({key for row in rows for key, value in row.items() if isinstance(value, int | float)})
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
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    output.print(table)


def _registered(registry: Any) -> list[tuple[str, Any, str]]:
    """(name, loaded object, where it comes from) of every entry; one that cannot be loaded: exit 2."""
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
    try:
        load_plugins(plugins or [])
    except ConfigError as problem:
        raise fail(str(problem)) from None


def main() -> None:
    app(prog_name="compare")
