"""The `compare` command.

    compare [--workflows tool_use,...|all] [--models local,...] [--benchmark bundled] [--limit N] [--out DIR]
    compare --resume --out DIR        finish an interrupted run with the configuration in its manifest
    compare report DIR                rebuild a run directory's summary

Exit status: 0 done; 1 some task ended with status "error"; 2 bad configuration or
input (nothing was run); 130 interrupted (results so far are kept).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compare.config import ConfigError, RunConfig, load_run_config
from compare.run import execute, plan_run, read_results
from reports import markdown, pairwise, rich_table, summarize
from tasks import data_warnings

app = typer.Typer(add_completion=False, no_args_is_help=False, rich_markup_mode=None)
console = Console(stderr=True)
output = Console()


def _split(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def fail(message: str, code: int = 2) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}", highlight=False, soft_wrap=True)
    return typer.Exit(code)


@app.callback(invoke_without_command=True)
def main_command(
    ctx: typer.Context,
    workflows: Annotated[str | None, typer.Option(help="Comma-separated workflows/systems, or 'all'.")] = None,
    models: Annotated[str | None, typer.Option(help="Comma-separated model aliases from configs/models.yaml.")] = None,
    benchmark: Annotated[str | None, typer.Option(help="bundled (more benchmarks: see README).")] = None,
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
    out: Annotated[str | None, typer.Option(help="Run directory (default runs/<time>-<benchmark>).")] = None,
    judge: Annotated[str | None, typer.Option(help="Model alias that judges report rubrics.")] = None,
    postgres_url: Annotated[
        str | None, typer.Option(help="PostgreSQL server for DAB dumps (default: a throw-away local one).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Base URL for openai-compatible:<id> models.")] = None,
    api_key_env: Annotated[str | None, typer.Option(help="Env variable with the key for --base-url.")] = None,
    max_steps: Annotated[int | None, typer.Option(help="Budget: model calls per task.")] = None,
    max_tokens: Annotated[int | None, typer.Option(help="Budget: tokens per task.")] = None,
    wall_time: Annotated[float | None, typer.Option(help="Budget: seconds per task.")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML file overriding configs/defaults.yaml.")] = None,
    resume: Annotated[bool, typer.Option(help="Finish the run in --out with its recorded configuration.")] = False,
) -> None:
    """Run systems × models on a benchmark and write a run directory."""
    if ctx.invoked_subcommand is not None:
        return
    budgets = {"max_steps": max_steps, "max_tokens": max_tokens, "wall_time_s": wall_time}
    overrides: dict[str, Any] = {
        "workflows": _split(workflows),
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
        "out": out,
        "judge": judge,
        "postgres_url": postgres_url,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "budgets": {k: v for k, v in budgets.items() if v is not None} or None,
    }
    try:
        run_config = _resumed_config(out, postgres_url) if resume else load_run_config(config, overrides)
        plan = plan_run(run_config)
    except ConfigError as problem:
        raise fail(str(problem)) from None
    raise typer.Exit(_run(plan, resume))


def _resumed_config(out: str | None, postgres_url: str | None) -> RunConfig:
    """The configuration recorded in the run's manifest (its server password, redacted there,
    must be given again with --postgres-url)."""
    if not out:
        raise ConfigError("--resume needs --out DIR (the run directory to finish)")
    manifest = Path(out) / "manifest.json"
    if not manifest.exists():
        raise ConfigError(f"{manifest} not found: nothing to resume")
    recorded = json.loads(manifest.read_text())["config"] | {"out": out}
    if postgres_url:
        recorded["postgres_url"] = postgres_url
    return RunConfig.model_validate(recorded)


def _run(plan: Any, resume: bool) -> int:
    units = len(list(plan.units()))
    console.print(
        f"run: {len(plan.tasks)} tasks × {len(plan.systems)} systems × {len(plan.models)} models"
        f" × {plan.config.epochs} epochs = {units} units → {plan.run_dir}",
        highlight=False,
    )
    for warning in data_warnings(plan.config.benchmark, plan.config.tasks_path, plan.tasks):
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False, soft_wrap=True)
    already = len(read_results(plan.run_dir)[0]) if resume else 0
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=False) as progress:
        bar = progress.add_task("running", total=units, completed=already)

        def on_result(record: dict[str, Any]) -> None:
            em = record["scores"].get("exact_match")
            mark = "" if em is None else f" EM={em:.0f}"
            progress.update(
                bar,
                advance=1,
                description=f"{record['system']}/{record['model']} {record['task_id']} {record['status']}{mark}",
            )

        try:
            execute(plan, on_result=on_result, resume=resume)
        except ConfigError as problem:
            raise fail(str(problem)) from None
        except KeyboardInterrupt:
            progress.stop()
            console.print(
                f"interrupted; results so far are in {plan.run_dir}. Finish with: "
                f"compare --resume --out {plan.run_dir}",
                highlight=False,
            )
            sys.stderr.flush()
            os._exit(130)  # threads still inside a model call would otherwise keep the process alive
    records = _write_summary(plan.run_dir)
    errors = sum(r["status"] == "error" for r in records)
    if errors:
        console.print(f"[yellow]{errors} unit(s) ended with an error; see results.jsonl and traces/[/yellow]")
    return 1 if errors else 0


def _write_summary(run_dir: Path) -> list[dict[str, Any]]:
    records, warnings = read_results(run_dir)
    for warning in warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}", highlight=False)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    rows = summarize(records)
    (run_dir / "summary.md").write_text(markdown(rows, manifest, pairwise(records), records), encoding="utf-8")
    output.print(rich_table(rows))
    console.print(f"results: {run_dir / 'results.jsonl'}\nsummary: {run_dir / 'summary.md'}", highlight=False)
    return records


@app.command("report")
def report_command(run_dir: Annotated[Path, typer.Argument(help="A run directory.")]) -> None:
    """Rebuild summary.md of a run directory from its results and print the table."""
    if not (run_dir / "manifest.json").exists():
        raise fail(f"{run_dir} is not a run directory (no manifest.json)")
    _write_summary(run_dir)


@app.command("tasks")
def tasks_command(
    benchmark: Annotated[str, typer.Option(help="bundled, fdabench, dabstep, dab or dbgorilla.")],
    path: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Load and validate a benchmark without running anything: counts by type, level and data availability."""
    from collections import Counter

    from tasks import benchmark_names, load_benchmark
    from tasks.errors import TaskLoadError, TaskLoadErrors

    if benchmark not in benchmark_names():
        raise fail(f"unknown benchmark {benchmark!r}; valid: {', '.join(benchmark_names())}")
    try:
        loaded = load_benchmark(benchmark, path)
    except TaskLoadError as problem:
        if not as_json:
            raise fail(str(problem)) from None  # TaskLoadErrors' text already has one problem per line
        problems = problem.errors if isinstance(problem, TaskLoadErrors) else [problem]
        fields = ("file", "line", "field", "message")
        output.print_json(json.dumps({"errors": [{key: getattr(p, key) for key in fields} for p in problems]}))
        raise typer.Exit(2) from None
    except Exception as problem:
        raise fail(str(problem)) from None
    unavailable = Counter(t.unavailable for t in loaded if t.unavailable)
    report = {
        "benchmark": benchmark,
        "tasks": len(loaded),
        "by_question_type": dict(Counter(t.question_type.value for t in loaded)),
        "by_level": dict(Counter(t.level or "none" for t in loaded)),
        "available": sum(not t.unavailable for t in loaded),
        "unavailable": dict(unavailable),
        "with_gold": sum(_has_gold(t) for t in loaded),
    }
    report["warnings"] = data_warnings(benchmark, path, loaded)
    if as_json:
        output.print_json(json.dumps(report))
        return
    for key, value in report.items():
        output.print(f"{key}: {value}", highlight=False, soft_wrap=True)


def _has_gold(task: Any) -> bool:
    gold = task.gold
    return gold is not None and any(
        v is not None for v in (gold.answer, gold.report, gold.tool_call, gold.validator, gold.ground_truth_file)
    )


@app.command("score")
def score_command(
    benchmark: Annotated[str, typer.Option(help="fdabench, dabstep, dab, dbgorilla or bundled.")],
    tasks: Annotated[Path | None, typer.Option(help="The benchmark's task files (not needed for bundled).")] = None,
    predictions: Annotated[Path, typer.Option(help="JSONL of predictions made elsewhere.")] = Path("predictions.jsonl"),
    out: Annotated[Path | None, typer.Option(help="Write one JSON line of metrics per prediction here.")] = None,
) -> None:
    """Score predictions produced elsewhere with the benchmark's official rules.

    Exit status 1 when any prediction record could not be read (the others are still scored)."""
    from evaluators import score
    from evaluators.predictions import PredictionError, read_predictions
    from tasks import benchmark_names, load_benchmark

    if benchmark not in benchmark_names():
        raise fail(f"unknown benchmark {benchmark!r}; valid: {', '.join(benchmark_names())}")
    if not predictions.exists():
        raise fail(f"predictions file not found: {predictions}")
    try:
        by_id = {task.id: task for task in load_benchmark(benchmark, tasks)}
    except Exception as problem:  # a loader's TaskLoadError names file, line and field
        raise fail(str(problem)) from None
    rows, calls, bad = [], [], 0
    for item in read_predictions(predictions, benchmark, by_id):
        if isinstance(item, PredictionError):
            bad += 1
            console.print(f"[red]bad record:[/red] {item}", highlight=False, soft_wrap=True)
            continue
        task, answer, trace = item
        rows.append({"task_id": task.id, **score(task, answer, trace)})
        calls.append((task, answer))
    if out is not None:
        out.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    output.print(_metric_table(rows))
    if benchmark == "dbgorilla":
        output.print(_dbgorilla_table(calls))
    console.print(f"{len(rows)} predictions scored, {bad} bad record(s)", highlight=False)
    raise typer.Exit(1 if bad else 0)


def _metric_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    from evaluators.statistics import bootstrap_ci

    table = Table(title="Scores (mean with 95% bootstrap CI)")
    for column in ("metric", "n", "mean", "95% CI"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    metrics = sorted({key for row in rows for key, value in row.items() if isinstance(value, int | float)})
    for metric in metrics:
        values = [float(row[metric]) for row in rows if isinstance(row.get(metric), int | float)]
        mean, low, high = bootstrap_ci(values)
        table.add_row(metric, str(len(values)), f"{mean:.3f}", f"[{low:.3f}, {high:.3f}]")
    return table


def _dbgorilla_table(calls: list[tuple[Any, Any]]) -> Any:
    """The paper's aggregate metrics: routing, no-tool-call rate, per component, by argument count."""
    from rich.table import Table

    from evaluators.dbgorilla import prediction_from_tool_call, summarize_dbgorilla

    pairs = [(prediction_from_tool_call(a.tool_call), prediction_from_tool_call(t.gold.tool_call)) for t, a in calls]
    table = Table(title="DBGorilla aggregate metrics")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in summarize_dbgorilla(pairs).items():
        table.add_row(name, "–" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value))
    return table


def main() -> None:
    app(prog_name="compare")
