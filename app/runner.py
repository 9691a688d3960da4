"""The runner: benchmark × systems × models × epochs → a run directory (`compare.runlog`).

Everything is resolved and validated before the first model call (`plan_run`); units run with
bounded concurrency; each result record is appended as its unit finishes, so a crash or Ctrl-C
loses nothing computed; `compare --resume --out DIR` finishes a run with the configuration in
its manifest. Systems, benchmarks, providers and scorers are found by name: the runner knows
none of them.
"""

from __future__ import annotations

import platform
import subprocess
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..compare import __version__
from ..compare.benchmark import Benchmark, BenchmarkError, create_benchmark
from ..compare.context import EndpointFactory, RunContext
from ..compare.model import MeteredModel, ModelConfig, ModelError, get_provider
from ..compare.registry import RegistryError
from ..compare.runlog import (
    MANIFEST_FILE,
    GitRevision,
    Manifest,
    ResultRecord,
    RunLogError,
    RunLogWriter,
    ToolCallSummary,
    UnitKey,
    read_manifest,
    read_records,
)
from ..compare.scorer import score
from ..compare.system import System, create_system, system_names
from ..compare.task import Answer, QuestionType, Task
from ..compare.tool import FinalToolCall, ToolEnvironment
from ..compare.trace import BudgetExceeded, Budgets, Trace, TraceRecorder, utc_now
from ..evaluators.rubric import JUDGE_PROMPT_HASH, JUDGE_VERSION
from ..providers.endpoint import GatewayServer
from ..tools.python_sandbox import sandbox_mode
from .config import ConfigError, RunConfig, missing_api_keys, resolve_models


class MissingKeyError(ConfigError):
    """A model needs an API key that is not set."""


class RunWriteError(Exception):
    """The run directory could not be written (a full disk, a read-only folder): the run stopped.
    What was written is kept; `--resume` finishes the run once the cause is fixed."""


@dataclass(frozen=True)
class Unit:
    task: Task
    system: str
    model: ModelConfig
    epoch: int

    @property
    def key(self) -> UnitKey:
        return (self.task.id, self.system, self.model.alias, self.epoch)

    @property
    def trace_file(self) -> str:
        suffix = "" if self.epoch == 1 else f".e{self.epoch}"
        model = self.model.alias.replace("/", "_")
        return str(Path("traces") / self.system / model / f"{self.task.id.replace('/', '_')}{suffix}.json")


@dataclass
class RunPlan:
    config: RunConfig
    benchmark: Benchmark
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
    try:
        systems = {name: create_system(name) for name in _system_list(config.workflows)}
        benchmark = create_benchmark(config.benchmark, config.tasks_path, **config.benchmark_options())
    except (RegistryError, BenchmarkError) as problem:
        raise ConfigError(str(problem)) from problem
    tasks = _select_tasks(config, benchmark)
    out = Path(config.out) if config.out else Path("runs") / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{config.benchmark}"
    return RunPlan(config, benchmark, tasks, systems, models, out, judge)


def _system_list(requested: list[str]) -> list[str]:
    names = system_names(kind="workflow") if requested == ["all"] else requested
    valid = system_names()
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ConfigError(f"unknown workflow/system {', '.join(unknown)}; valid: all, {', '.join(valid)}")
    return names


def _select_tasks(config: RunConfig, benchmark: Benchmark) -> list[Task]:
    """The benchmark's tasks the configuration selects; a selection of nothing is an error, never an
    empty run that "completes"."""
    try:
        tasks = benchmark.load()
    except (BenchmarkError, OSError) as bad:  # validated before any model call
        raise ConfigError(str(bad)) from bad
    where = f"{config.benchmark}" + (f" ({config.tasks_path})" if config.tasks_path else "")
    if not tasks:
        raise ConfigError(f"the {where} benchmark has no tasks")
    if config.task_ids:
        known = {t.id for t in tasks}
        unknown = [t for t in config.task_ids if t not in known]
        if unknown:
            raise ConfigError(f"unknown task ids for {config.benchmark}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in set(config.task_ids)]
    for setting, values, value_of in (
        ("--level", config.levels, lambda t: t.level),
        ("--question-type", config.question_types, lambda t: t.question_type.value),
    ):
        if values:
            present = sorted({str(value_of(t)) for t in tasks})
            unknown = [v for v in values if v not in present]
            if unknown:
                chosen, known = ", ".join(unknown), ", ".join(present)
                raise ConfigError(f"{setting} {chosen} selects no task of {where}; present: {known}")
            tasks = [t for t in tasks if value_of(t) in set(values)]
    return tasks[: config.limit] if config.limit else tasks


# ---------------------------------------------------------------- one unit of work


JUDGE_BUDGETS = Budgets(max_steps=12, max_tokens=400_000, wall_time_s=900.0)


def run_unit(
    unit: Unit, plan: RunPlan, endpoint: EndpointFactory | None = None
) -> tuple[ResultRecord, Trace, Trace | None]:
    """Run one task with one system and model, then score it; never raises for failures of the system.
    Returns the result record, the system's trace and the judge's trace (when a judge scored it)."""
    task, config = unit.task, plan.config
    budgets = config.budgets
    if task.max_steps is not None:
        budgets = budgets.model_copy(update={"max_steps": task.max_steps})
    recorder = TraceRecorder(Trace(task_id=task.id, system=unit.system, model=unit.model.alias), budgets)
    answer = _answer(unit, plan, recorder, endpoint)
    trace = recorder.finish(answer.status, answer.error)
    judge, judge_recorder = _judge_for(task, plan.judge, unit.system)
    sheet = score(task, answer, trace, plan.benchmark.scorers, judge)  # a failing scorer scores its metrics 0
    judge_trace = judge_recorder.finish("completed") if judge_recorder else None
    record = _result_record(unit, answer, trace, sheet.scores, sheet.error, judge_trace)
    return record, trace, judge_trace


def _judge_for(task: Task, judge: ModelConfig | None, system: str) -> tuple[MeteredModel | None, TraceRecorder | None]:
    """The judge's metered model with its own trace, for report tasks when the run has a judge model."""
    if judge is None or task.question_type != QuestionType.REPORT:
        return None, None
    recorder = TraceRecorder(Trace(task_id=task.id, system=f"judge:{system}", model=judge.alias), JUDGE_BUDGETS)
    return MeteredModel(judge, get_provider(judge.provider), recorder, system="judge"), recorder


def _answer(unit: Unit, plan: RunPlan, recorder: TraceRecorder, endpoint: EndpointFactory | None) -> Answer:
    task = unit.task
    if task.unavailable:
        return Answer(status="data_unavailable", error=task.unavailable)
    try:
        env = ToolEnvironment(plan.benchmark.tools(task, plan.config.tools), recorder)
    except Exception as unavailable:
        return Answer(status="data_unavailable", error=f"{type(unavailable).__name__}: {unavailable}")
    model = MeteredModel(
        unit.model, get_provider(unit.model.provider), recorder, system=unit.system, retries=plan.config.retries
    )
    agent_view = task.for_agent()
    ctx = RunContext(agent_view, env, model, endpoint=endpoint)
    recorder.start()
    try:
        answer = plan.systems[unit.system].run(agent_view, ctx)
    except FinalToolCall as final:  # a call that ends the task (DBGorilla's prediction, DAB's return_answer)
        answer = final.answer
    except BudgetExceeded as limit:
        answer = Answer(status=limit.status, error=str(limit))
    except ModelError as failure:  # the provider failed after its retries: not the system's fault
        answer = Answer(status="infra_error", error=f"model error: {failure}")
    except Exception as failure:  # a system bug ends this task, not the run; the trace keeps the stack
        status = "infra_error" if _last_model_call_failed(recorder.trace) else "error"
        answer = Answer(status=status, error=f"{type(failure).__name__}: {failure}\n{traceback.format_exc(limit=8)}")
    finally:
        env.close()
    return _with_budget_status(answer, recorder.stopped_by)


def _last_model_call_failed(trace: Trace) -> bool:
    """A system that fails right after a failed model call (a framework given the endpoint's 502)
    failed because of the provider."""
    calls = trace.model_calls
    return bool(calls) and not calls[-1].success


def _with_budget_status(answer: Answer, stopped_by: BudgetExceeded | None) -> Answer:
    """A budget that refused a call decides how the task ended, also when the system went on
    without that call or failed on the refusal (a framework given HTTP 402 by the endpoint)."""
    if stopped_by is None or answer.status == stopped_by.status or answer.status == "data_unavailable":
        return answer
    error = str(stopped_by)
    if answer.status == "error" and answer.error:
        error += f"; then the system failed: {answer.error.splitlines()[0]}"
    return answer.model_copy(update={"status": stopped_by.status, "error": error})


def _result_record(
    unit: Unit,
    answer: Answer,
    trace: Trace,
    scores: dict[str, float | None],
    scoring_error: str | None,
    judge_trace: Trace | None,
) -> ResultRecord:
    task = unit.task
    return ResultRecord(
        task_id=task.id,
        benchmark=task.benchmark,
        system=unit.system,
        model=unit.model.alias,
        epoch=unit.epoch,
        question_type=task.question_type.value,
        level=task.level,
        status=answer.status,
        error=answer.error.splitlines()[0] if answer.error else None,
        answer=answer.model_dump(exclude={"status", "error"}, exclude_none=True, mode="json"),
        gold=task.gold.answer if task.gold else None,
        question=task.question,
        data_sources=[f"{source.name} ({source.kind.value})" for source in task.data],
        scores=scores,
        scoring_error=scoring_error,
        usage=trace.usage(),
        latency_s=trace.wall_time_s,
        setup_s=trace.setup_s,
        latency_by_phase=trace.by_phase(),
        model_calls=len(trace.model_calls),
        retries=trace.retries(),
        backoff_s=trace.backoff_s(),
        provider_errors=trace.provider_errors(),
        tool_calls=[ToolCallSummary(tool=c.tool, success=c.success, duration_s=c.duration_s) for c in trace.tool_calls],
        trace_file=unit.trace_file,
        judge_usage=judge_trace.usage() if judge_trace else None,
        judge_trace_file=unit.trace_file.removesuffix(".json") + ".judge.json" if judge_trace else None,
    )


# ---------------------------------------------------------------- the manifest


def git_revision() -> GitRevision:
    """The suite's git revision, when it runs from a checkout."""
    source = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=source, capture_output=True, text=True, timeout=10).stdout.strip()

    try:
        sha = git("rev-parse", "HEAD")
        return GitRevision(sha=sha or "unknown", dirty=bool(git("status", "--porcelain", "--untracked-files=no")))
    except (OSError, subprocess.SubprocessError):
        return GitRevision()


def _judge_description(judge: ModelConfig | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    return {"model": judge.model_dump(mode="json"), "prompt_version": JUDGE_VERSION, "prompt_hash": JUDGE_PROMPT_HASH}


def build_manifest(plan: RunPlan) -> Manifest:
    return Manifest(
        suite_version=__version__,
        git=git_revision(),
        python=platform.python_version(),
        platform=platform.platform(),
        started_at=utc_now(),
        config=plan.config.model_dump(mode="json"),  # credentials are redacted by the writer
        models=plan.models,
        budgets=plan.config.budgets,
        systems={name: system.describe() for name, system in plan.systems.items()},
        judge=_judge_description(plan.judge),
        benchmark=plan.config.benchmark,
        task_ids=[t.id for t in plan.tasks],
        units=len(plan.tasks) * len(plan.systems) * len(plan.models) * plan.config.epochs,
        python_sandbox=sandbox_mode(plan.config.tools),
    )


def resumed_config(out: str, **given: str | None) -> RunConfig:
    """The configuration recorded in the run's manifest. URLs whose passwords the manifest redacted
    (`postgres_url`, `base_url`) must be given again (`given`)."""
    try:
        recorded = read_manifest(Path(out)).config | {"out": out}
    except RunLogError as problem:  # not a run directory, corrupt, or a newer schema
        raise ConfigError(f"nothing to resume: {problem}") from problem
    for setting, value in given.items():
        if value:
            recorded[setting] = value
        elif "***" in str(recorded.get(setting) or ""):
            flag = "--" + setting.replace("_", "-")
            raise ConfigError(f"the run's {flag} had a password, which the manifest does not keep: give {flag} again")
    try:
        return RunConfig.model_validate(recorded)
    except ValueError as invalid:
        raise ConfigError(f"{out}/manifest.json: the recorded configuration is not valid: {invalid}") from invalid


# ---------------------------------------------------------------- executing a plan

ProgressCallback = Callable[[ResultRecord], None]


def execute(plan: RunPlan, *, on_result: ProgressCallback | None = None, resume: bool = False) -> Manifest:
    """Run every unit not yet in the run directory; returns the final manifest."""
    existing, _ = read_records(plan.run_dir)
    if existing and not resume:
        raise ConfigError(f"{plan.run_dir} already holds results; use --resume to finish it or another --out")
    try:  # before the run directory is touched: a bad dump exits cleanly
        plan.tasks = plan.benchmark.prepare(plan.tasks)
    except BenchmarkError as problem:
        raise ConfigError(str(problem)) from problem
    endpoint = GatewayServer()  # started by the first system that asks for it
    writer: RunLogWriter | None = None
    manifest = read_manifest(plan.run_dir) if resume and (plan.run_dir / MANIFEST_FILE).exists() else None
    manifest = manifest or build_manifest(plan)
    manifest.status, manifest.resumed_at = "running", utc_now() if resume else None
    manifest.python_sandbox = sandbox_mode(plan.config.tools)
    try:
        writer = RunLogWriter(plan.run_dir)
        writer.write_manifest(manifest)
        done = {record.key for record in existing}
        pending = [u for u in plan.units() if u.key not in done]
        manifest.model_load_s = _prepare_models(plan)
        _run_pending(plan, pending, writer, on_result, endpoint.open_session)
        manifest.status = "completed"
    except KeyboardInterrupt:  # Ctrl-C, and SIGTERM (the CLI raises a KeyboardInterrupt for it)
        manifest.status = "interrupted"
        raise
    except OSError as failure:  # the run directory cannot be written: stop, keep what is there
        manifest.status = "failed"
        why = failure.strerror or str(failure)
        raise RunWriteError(f"cannot write the run directory {plan.run_dir}: {why}") from failure
    finally:
        endpoint.stop()
        plan.benchmark.close()
        if writer is not None:
            manifest.finished_at = utc_now()
            writer.close_with(manifest)
    return manifest


def _prepare_models(plan: RunPlan) -> dict[str, float]:
    """Load weights before any task's clock starts; returns the load time of each model."""
    seconds = {}
    for model in [*plan.models, plan.judge] if plan.judge else plan.models:
        start = time.perf_counter()
        get_provider(model.provider).prepare(model)
        seconds[model.alias] = time.perf_counter() - start
    return seconds


def _run_pending(
    plan: RunPlan,
    pending: list[Unit],
    writer: RunLogWriter,
    on_result: ProgressCallback | None,
    endpoint: EndpointFactory,
) -> None:
    pool = ThreadPoolExecutor(max_workers=plan.config.concurrency, thread_name_prefix="unit")
    queue = iter(pending)
    running: set[Future[tuple[ResultRecord, Trace, Trace | None]]] = set()

    def submit_next() -> None:
        unit = next(queue, None)
        if unit is not None:
            running.add(pool.submit(run_unit, unit, plan, endpoint))

    for _ in range(plan.config.concurrency):
        submit_next()
    try:
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                running.discard(future)
                record, trace, judge_trace = future.result()
                writer.append(record, trace, judge_trace)
                if on_result:
                    on_result(record)
                submit_next()
    except BaseException:
        # Interrupted, or the run directory cannot be written: do not wait for the tasks in flight
        # (a model call can take minutes); they are not recorded and run again on --resume. The
        # CLI then exits without joining their threads.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
