"""The runner: benchmark × systems × models × epochs → a run directory.

Run directory (the product; a report can be rebuilt from it alone):

    manifest.json    suite version, git sha, resolved config, models, budgets, systems, task ids, status
    results.jsonl    one record per task × system × model × epoch, appended (and flushed) as each finishes
    traces/<system>/<model>/<task>[.e<epoch>].json   the full trace of each record
    summary.md       the comparison table

Records are appended as they finish, so a crash or Ctrl-C loses nothing computed;
`compare --resume --out DIR` finishes a run with the configuration in its manifest.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from compare import __version__
from compare.config import PROJECT_ROOT, ConfigError, RunConfig, missing_api_keys, resolve_models
from compare.model import MeteredModel, ModelConfig, ModelError, get_provider
from compare.postgres import PostgresCluster, PostgresError, prepare_postgres
from compare.system import System, create_system, system_names
from compare.task import Answer, DataSourceKind, QuestionType, Task
from compare.tools import FinalToolCall, build_environment
from compare.trace import BudgetExceeded, Budgets, Trace, TraceRecorder, utc_now
from evaluators import score
from evaluators.rubric import JUDGE_PROMPT_HASH, JUDGE_VERSION, RubricJudge
from tasks import benchmark_names, load_benchmark
from tasks.errors import TaskLoadError


class MissingKeyError(ConfigError):
    """A model needs an API key that is not set."""


@dataclass(frozen=True)
class Unit:
    task: Task
    system: str
    model: ModelConfig
    epoch: int

    @property
    def key(self) -> tuple[str, str, str, int]:
        return (self.task.id, self.system, self.model.alias, self.epoch)


@dataclass
class RunPlan:
    config: RunConfig
    tasks: list[Task]
    systems: dict[str, System]
    models: list[ModelConfig]
    run_dir: Path
    judge: ModelConfig | None = None  # the LLM judge of report rubrics, metered apart from the systems

    def units(self) -> Iterator[Unit]:
        for epoch in range(1, self.config.epochs + 1):
            for model in self.models:
                for system in self.systems:
                    for task in self.tasks:
                        yield Unit(task, system, model, epoch)


# ---------------------------------------------------------------- planning (no model calls)


def plan_run(config: RunConfig) -> RunPlan:
    """Resolve and validate everything before the first model call; raises ConfigError."""
    models = resolve_models(config.models, config)
    judge = resolve_models([config.judge], config)[0] if config.judge else None
    missing = missing_api_keys([*models, judge] if judge else models)
    if missing:
        lines = [f"  {var} (needed by {', '.join(aliases)})" for var, aliases in missing.items()]
        raise MissingKeyError(
            "missing API key:\n" + "\n".join(lines) + "\nSet it first, e.g.  export OPENROUTER_API_KEY=sk-or-...\n"
            "(or run offline with the embedded model: --models local)"
        )
    systems = {name: create_system(name) for name in _system_list(config.workflows)}
    tasks = _select_tasks(config)
    out = Path(config.out) if config.out else Path("runs") / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{config.benchmark}"
    return RunPlan(config=config, tasks=tasks, systems=systems, models=models, run_dir=out, judge=judge)


def _system_list(requested: list[str]) -> list[str]:
    workflows = system_names(kind="workflow")
    names = workflows if requested == ["all"] else requested
    valid = system_names()
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ConfigError(f"unknown workflow/system {', '.join(unknown)}; valid: all, {', '.join(valid)}")
    return names


def _select_tasks(config: RunConfig) -> list[Task]:
    if config.benchmark not in benchmark_names():
        raise ConfigError(f"unknown benchmark {config.benchmark!r}; valid: {', '.join(benchmark_names())}")
    try:
        tasks = load_benchmark(config.benchmark, config.tasks_path, hints=config.hints)
    except (TaskLoadError, ValueError, OSError) as bad:  # validated before any model call
        raise ConfigError(str(bad)) from bad
    if config.task_ids:
        known = {t.id for t in tasks}
        unknown = [t for t in config.task_ids if t not in known]
        if unknown:
            raise ConfigError(f"unknown task ids for {config.benchmark}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in set(config.task_ids)]
    if config.levels:
        tasks = [t for t in tasks if t.level in set(config.levels)]
    if config.question_types:
        tasks = [t for t in tasks if t.question_type.value in set(config.question_types)]
    return tasks[: config.limit] if config.limit else tasks


# ---------------------------------------------------------------- one unit of work


JUDGE_BUDGETS = Budgets(max_steps=12, max_tokens=400_000, wall_time_s=900.0)


def run_unit(unit: Unit, plan: RunPlan) -> tuple[dict[str, Any], Trace, Trace | None]:
    """Run one task with one system and model, then score it; never raises for failures of the system.
    Returns the result record, the system's trace and the judge's trace (when a judge scored it)."""
    task, config = unit.task, plan.config
    budgets = config.budgets
    if task.max_steps is not None:
        budgets = budgets.model_copy(update={"max_steps": task.max_steps})
    recorder = TraceRecorder(Trace(task_id=task.id, system=unit.system, model=unit.model.alias), budgets)
    answer = _answer(unit, plan.systems[unit.system], config, recorder)
    trace = recorder.finish(answer.status, answer.error)
    judge, judge_recorder = _judge_for(task, plan.judge, unit.system)
    try:
        scores, scoring_error = score(task, answer, trace, judge=judge), None
    except Exception as failure:  # a scorer bug must not lose the answer that was paid for
        scores, scoring_error = {}, f"{type(failure).__name__}: {failure}"
    judge_trace = judge_recorder.finish("completed") if judge_recorder else None
    record = _result_record(unit, answer, trace, scores)
    if scoring_error:
        record["scoring_error"] = scoring_error
    if judge_trace is not None:
        record["judge_usage"] = judge_trace.usage().model_dump()
        record["judge_trace_file"] = record["trace_file"].removesuffix(".json") + ".judge.json"
    return record, trace, judge_trace


def _judge_for(task: Task, judge: ModelConfig | None, system: str) -> tuple[RubricJudge | None, TraceRecorder | None]:
    """A rubric judge with its own trace, for report tasks when the run has a judge model."""
    if judge is None or task.question_type != QuestionType.REPORT:
        return None, None
    recorder = TraceRecorder(Trace(task_id=task.id, system=f"judge:{system}", model=judge.alias), JUDGE_BUDGETS)
    model = MeteredModel(judge, get_provider(judge.provider), recorder, system="judge")
    return RubricJudge(model), recorder


def _answer(unit: Unit, system: System, config: RunConfig, recorder: TraceRecorder) -> Answer:
    task = unit.task
    if task.unavailable:
        return Answer(status="data_unavailable", error=task.unavailable)
    try:
        env = build_environment(task, recorder, config.tools)
    except Exception as unavailable:
        return Answer(status="data_unavailable", error=f"{type(unavailable).__name__}: {unavailable}")
    model = MeteredModel(unit.model, get_provider(unit.model.provider), recorder, system=unit.system)
    recorder.start()
    try:
        return system.run(task.for_agent(), env, model)
    except FinalToolCall as final:  # a call that ends the task (DBGorilla's prediction, DAB's return_answer)
        return final.answer
    except BudgetExceeded as limit:
        return Answer(status=limit.status, error=str(limit))
    except ModelError as failure:
        return Answer(status="error", error=f"model error: {failure}")
    except Exception as failure:  # a system bug ends this task, not the run; the trace keeps the stack
        return Answer(status="error", error=f"{type(failure).__name__}: {failure}\n{traceback.format_exc(limit=8)}")
    finally:
        env.close()


def _result_record(unit: Unit, answer: Answer, trace: Trace, scores: dict[str, float | None]) -> dict[str, Any]:
    task, usage = unit.task, trace.usage()
    gold = task.gold
    return {
        "task_id": task.id,
        "benchmark": task.benchmark,
        "system": unit.system,
        "model": unit.model.alias,
        "epoch": unit.epoch,
        "question_type": task.question_type.value,
        "level": task.level,
        "status": answer.status,
        "error": answer.error.splitlines()[0] if answer.error else None,
        "answer": answer.model_dump(exclude={"status", "error"}, exclude_none=True),
        "gold": gold.answer if gold else None,
        "scores": scores,
        "usage": usage.model_dump(),
        "latency_s": trace.wall_time_s,
        "setup_s": trace.setup_s,
        "latency_by_phase": {phase: totals.model_dump() for phase, totals in trace.by_phase().items()},
        "model_calls": len(trace.model_calls),
        "tool_calls": [{"tool": c.tool, "success": c.success, "duration_s": c.duration_s} for c in trace.tool_calls],
        "trace_file": str(trace_path(unit)),
    }


def trace_path(unit: Unit) -> Path:
    suffix = "" if unit.epoch == 1 else f".e{unit.epoch}"
    return (
        Path("traces")
        / unit.system
        / unit.model.alias.replace("/", "_")
        / f"{unit.task.id.replace('/', '_')}{suffix}.json"
    )


# ---------------------------------------------------------------- the run directory


def git_revision() -> dict[str, Any]:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        return {"sha": sha or "unknown", "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return {"sha": "unknown", "dirty": None}


def _judge_description(judge: ModelConfig | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    return {"model": judge.model_dump(mode="json"), "prompt_version": JUDGE_VERSION, "prompt_hash": JUDGE_PROMPT_HASH}


def _redacted(config: dict[str, Any]) -> dict[str, Any]:
    """The configuration without secrets: a password inside a server URL never reaches the run directory."""
    if config.get("postgres_url"):
        config["postgres_url"] = re.sub(r"//([^:/@]+):[^@]*@", r"//\1:***@", config["postgres_url"])
    return config


def build_manifest(plan: RunPlan) -> dict[str, Any]:
    return {
        "suite_version": __version__,
        "git": git_revision(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "started_at": utc_now(),
        "finished_at": None,
        "status": "running",
        "config": _redacted(plan.config.model_dump(mode="json")),
        "models": [m.model_dump(mode="json") for m in plan.models],
        "budgets": plan.config.budgets.model_dump(),
        "systems": {name: system.describe() for name, system in plan.systems.items()},
        "judge": _judge_description(plan.judge),
        "benchmark": plan.config.benchmark,
        "task_ids": [t.id for t in plan.tasks],
        "units": len(plan.tasks) * len(plan.systems) * len(plan.models) * plan.config.epochs,
    }


def read_results(run_dir: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of results.jsonl, and warnings about lines that could not be read
    (a run killed mid-write leaves at most one partial last line; that unit is re-run)."""
    path = run_dir / "results.jsonl"
    records, warnings = [], []
    if not path.exists():
        return records, warnings
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            warnings.append(f"{path}:{number}: unreadable record (partial write?); its unit will be run again")
    return records, warnings


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(path.suffix + ".tmp")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
    temporary.replace(path)


class ResultWriter:
    """Appends records and traces; thread-safe; each record is flushed to disk when written."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._lock = threading.Lock()
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / "results.jsonl"
        if path.exists() and not path.read_bytes().endswith(b"\n"):
            # A crash cut the last record mid-write; its unit is re-run, so drop the fragment.
            content = path.read_bytes()
            path.write_bytes(content[: content.rfind(b"\n") + 1])
        self._results = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any], trace: Trace, judge_trace: Trace | None = None) -> None:
        with self._lock:
            write_json(self.run_dir / record["trace_file"], trace.model_dump(mode="json"))
            if judge_trace is not None:
                write_json(self.run_dir / record["judge_trace_file"], judge_trace.model_dump(mode="json"))
            self._results.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
            self._results.flush()

    def close(self) -> None:
        self._results.close()


# ---------------------------------------------------------------- executing a plan

ProgressCallback = Callable[[dict[str, Any]], None]


def execute(plan: RunPlan, *, on_result: ProgressCallback | None = None, resume: bool = False) -> dict[str, Any]:
    """Run every unit not yet in the run directory; returns the final manifest."""
    manifest_path = plan.run_dir / "manifest.json"
    existing, _ = read_results(plan.run_dir)
    if existing and not resume:
        raise ConfigError(f"{plan.run_dir} already holds results; use --resume to finish it or another --out")
    cluster = _prepare_data(plan)  # before the run directory is touched: a bad dump exits cleanly
    manifest = json.loads(manifest_path.read_text()) if resume and manifest_path.exists() else build_manifest(plan)
    manifest.update(status="running", resumed_at=utc_now() if resume else None)
    write_json(manifest_path, manifest)
    done = {(r["task_id"], r["system"], r["model"], r["epoch"]) for r in existing}
    pending = [u for u in plan.units() if u.key not in done]
    manifest["model_load_s"] = _prepare_models(plan)
    writer = ResultWriter(plan.run_dir)
    try:
        _run_pending(plan, pending, writer, on_result)
        manifest["status"] = "completed"
    except KeyboardInterrupt:
        manifest["status"] = "interrupted"
        raise
    finally:
        writer.close()
        if cluster is not None:
            cluster.stop()
        manifest["finished_at"] = utc_now()
        write_json(manifest_path, manifest)
    return manifest


def _prepare_data(plan: RunPlan) -> PostgresCluster | None:
    """Restore PostgreSQL dumps (DAB) into the user's server or a throw-away local cluster,
    which the caller stops at the end of the run."""
    if not any(s.kind == DataSourceKind.POSTGRES for t in plan.tasks for s in t.data):
        return None
    try:
        prepared, cluster = prepare_postgres(plan.tasks, url=plan.config.postgres_url)
    except PostgresError as unavailable:
        raise ConfigError(str(unavailable)) from unavailable
    broken = sorted(
        {
            t.unavailable
            for before, t in zip(plan.tasks, prepared, strict=True)
            if t.unavailable and not before.unavailable
        }
    )
    if broken:  # a dump that does not restore is a malformed input file, not missing data
        if cluster is not None:
            cluster.stop()
        raise ConfigError("a database dump could not be restored:\n" + "\n".join(broken))
    plan.tasks = prepared
    return cluster


def _prepare_models(plan: RunPlan) -> dict[str, float]:
    """Load weights before any task's clock starts; returns the load time of each model."""
    seconds = {}
    for model in [*plan.models, plan.judge] if plan.judge else plan.models:
        start = time.perf_counter()
        get_provider(model.provider).prepare(model)
        seconds[model.alias] = time.perf_counter() - start
    return seconds


def _run_pending(plan: RunPlan, pending: list[Unit], writer: ResultWriter, on_result: ProgressCallback | None) -> None:
    pool = ThreadPoolExecutor(max_workers=plan.config.concurrency, thread_name_prefix="unit")
    queue = iter(pending)
    running: set[Future] = set()

    def submit_next() -> None:
        unit = next(queue, None)
        if unit is not None:
            running.add(pool.submit(run_unit, unit, plan))

    for _ in range(plan.config.concurrency):
        submit_next()
    try:
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                running.discard(future)
                record, trace, judge_trace = future.result()
                writer.write(record, trace, judge_trace)
                if on_result:
                    on_result(record)
                submit_next()
    except KeyboardInterrupt:
        # Do not wait for the tasks in flight (a model call can take minutes); they are not
        # recorded and run again on --resume. The CLI then exits without joining their threads.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
