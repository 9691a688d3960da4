"""One unit of a run (task × system × model × epoch) and what carries it out: the plan it belongs to,
its metered providers (keyed, journaled, cached or replayed), its trace, answer, scores and result
record. The runner (`runner.py`) plans and orders units; the executors (`executors.py`,
`ray_executor.py`) run them. Both import this module, and it imports neither.
"""

from __future__ import annotations

import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..core.benchmark import Benchmark
from ..core.context import EndpointFactory, RunContext
from ..core.limits import RateLimiter
from ..core.model import (
    PROVIDERS,
    REQUEST_FAULTS,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    failure_status,
    get_provider,
    unrecovered_failure,
)
from ..core.registry import RegistryError
from ..core.runlog import (
    ResultRecord,
    UnitKey,
    record_of,
    trace_path,
)
from ..core.scorer import score
from ..core.system import System
from ..core.task import Answer, AnswerStatus, QuestionType, Task
from ..core.tool import DataUnavailable, FinalToolCall, ToolEnvironment
from ..core.trace import BudgetExceeded, Budgets, Trace
from ..providers.cache import KeyedProvider, ResponseCache, default_cache_dir
from ..providers.replay import ReplayLog, ReplayProvider
from .config import RunConfig
from .model_stack import ModelLayers, SpendJournal, SpendSink, UnitModel, UnitRecorder, build_unit_model, spent_line


class RunWriteError(Exception):
    """The run directory could not be written (a full disk, a read-only folder): the run stopped.
    What was written is kept; `--resume` finishes the run once the cause is fixed."""


class RunDirUnwritable(RunWriteError):
    """The run directory could not even be created or locked: nothing ran, so there is nothing to resume."""


class WorkerLost(RunWriteError):
    """A worker process or Ray worker died (killed, out of memory): the run stopped; what was written is
    kept and `--resume` finishes the run."""


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
        return trace_path(self.system, self.model.alias, self.task.id, self.epoch)


@dataclass
class RunPlan:
    config: RunConfig
    benchmark: Benchmark
    tasks: list[Task]
    systems: dict[str, System]
    models: list[ModelConfig]
    run_dir: Path
    judge: ModelConfig | None = None  # the LLM judge of report rubrics, metered apart from the systems
    replay: ReplayLog | None = None  # `--replay`: a recorded run's responses instead of the models
    limit_share: float = 1.0  # this process's share of every rate limit (1/workers in a worker process)
    _limiter: RateLimiter | None = field(default=None, repr=False)
    retry_errors: bool = False  # `--resume --retry-errors`: the units that ended `infra_error` run again
    retried: dict[UnitKey, ResultRecord] = field(default_factory=dict, repr=False)  # their records, superseded
    notes: list[str] = field(default_factory=list)  # what the run says at its start (a chosen default)

    def __post_init__(self) -> None:
        if self.config.concurrency is None:
            concurrency, why = default_concurrency(self.models)
            self.config = self.config.model_copy(update={"concurrency": concurrency})
            self.notes.append(f"concurrency {concurrency}: {why}; --concurrency N sets it")

    @property
    def limiter(self) -> RateLimiter | None:
        """This process's rate limits (`limits:`), shared by all its units; None without limits."""
        if self._limiter is None and self.config.limits:
            self._limiter = RateLimiter(self.config.limits, self.limit_share)
        return self._limiter

    @property
    def cache(self) -> ResponseCache | None:
        settings = self.config.cache
        return ResponseCache(Path(settings.dir) if settings.dir else default_cache_dir()) if settings.enabled else None

    def model_layers(self) -> ModelLayers:
        """What this run puts around each model it calls (`model_stack.py`)."""
        return ModelLayers(self.replay, self.limiter, self.cache, self.config.retries)

    def units(self) -> Iterator[Unit]:
        for epoch in range(1, self.config.epochs + 1):
            for model in self.models:
                for system in self.systems:
                    for task in self.tasks:
                        yield Unit(task, system, model, epoch)


def default_concurrency(models: list[ModelConfig]) -> tuple[int, str]:
    """Units at once when the run does not say: the smallest `default_concurrency` of its models' providers
    (a run that mixes the embedded model with an API runs at the embedded model's pace), and why."""
    takes = {model.provider: _provider_concurrency(model.provider) for model in models}
    if not takes:
        return 1, "no model"
    provider = min(takes, key=lambda name: takes[name])
    return takes[provider], f"what the {provider} provider takes at once" + (" (the fewest)" if len(takes) > 1 else "")


def _provider_concurrency(name: str) -> int:
    try:
        return max(1, int(getattr(PROVIDERS.load(name), "default_concurrency", 1)))
    except RegistryError:  # planning the run says the provider is unknown
        return 1


# ---------------------------------------------------------------- one unit of work


JUDGE_BUDGETS = Budgets(max_steps=12, max_tokens=400_000, wall_time_s=900.0)


class Attempts:
    """The units running now, with their recorders: what a graceful stop journals as in flight."""

    def __init__(self) -> None:
        self._running: dict[str, tuple[Unit, list[UnitRecorder]]] = {}
        self._lock = threading.Lock()

    def start(self, attempt: str, unit: Unit, recorder: UnitRecorder) -> None:
        with self._lock:
            self._running.setdefault(attempt, (unit, []))[1].append(recorder)

    def finish(self, attempt: str) -> None:
        with self._lock:
            self._running.pop(attempt, None)

    def journal_in_flight(self, writer: SpendSink) -> None:
        with self._lock:
            running = list(self._running.items())
        for attempt, (unit, recorders) in running:
            count = sum(recorder.in_flight() for recorder in recorders)
            if count:
                writer.spent(spent_line(attempt, unit.key, "system", in_flight=count))


class UnitResult(NamedTuple):
    """What carrying out a unit gives the runner. A worker process or Ray actor sends, with its first unit,
    the seconds it took to load each model (`model_load_s`), which the runner puts in the manifest."""

    record: ResultRecord
    trace: Trace
    judge_trace: Trace | None
    model_load_s: dict[str, float] | None = None


def run_unit(
    unit: Unit,
    plan: RunPlan,
    endpoint: EndpointFactory | None = None,
    writer: SpendSink | None = None,
    attempts: Attempts | None = None,
) -> UnitResult:
    """Run one task with one system and model, then score it; never raises for failures of the system.
    Returns the result record, the system's trace and the judge's trace (when a judge scored it).
    With a writer, each model call is journaled as it finishes (calls.jsonl)."""
    task, config = unit.task, plan.config
    budgets = config.budgets
    if task.max_steps is not None:
        budgets = budgets.model_copy(update={"max_steps": task.max_steps})
    attempt, attempts = uuid.uuid4().hex[:16], attempts or Attempts()
    journal = SpendJournal(writer, attempt) if writer is not None else None
    model = build_unit_model(unit.key, unit.model, "system", budgets, plan.model_layers(), config.generation, journal)
    attempts.start(attempt, unit, model.recorder)
    try:
        answer = _answer(unit, plan, model, endpoint)
        trace = model.recorder.finish(answer.status, answer.error)
        judge, judge_recorder = _judge_for(unit, plan, journal)
        if judge_recorder is not None:
            attempts.start(attempt, unit, judge_recorder)
        strict = plan.config.strict_answers  # a failing scorer leaves its metrics without a value
        sheet = score(task, answer, trace, plan.benchmark.scorers, judge, strict_answers=strict)
    finally:
        attempts.finish(attempt)
    judge_trace = judge_recorder.finish("completed") if judge_recorder else None
    answer = _replay_miss(answer, model.recorder.provider, judge_recorder.provider if judge_recorder else None)
    record = _result_record(unit, answer, trace, sheet.scores, sheet.error, judge_trace)
    record.attempt = attempt
    return UnitResult(record, trace, judge_trace)


def _judge_for(
    unit: Unit, plan: RunPlan, journal: SpendJournal | None = None
) -> tuple[MeteredModel | None, UnitRecorder | None]:
    """The judge's metered model and its recorder (its own trace), for report tasks when the run has a judge
    model; it samples by the run's judge settings (`judge_generation`)."""
    if plan.judge is None or unit.task.question_type != QuestionType.REPORT:
        return None, None
    layers, generation = plan.model_layers(), plan.config.judge_generation
    judge = build_unit_model(unit.key, plan.judge, "judge", JUDGE_BUDGETS, layers, generation, journal)
    return judge.metered, judge.recorder


def setup_provider(plan: RunPlan) -> Callable[[ModelConfig], ModelProvider | None] | None:
    """The provider of `System.prepare`'s model calls (indexes): under --replay one that refuses every
    call, so a replay never reaches a model (an index must come from the index cache); else the
    registered one (indexes have a content cache of their own)."""
    if plan.replay is None:
        return None
    source = str(plan.replay.run_dir)
    return lambda model: ReplayProvider([], f"{source} (indexing calls are not replayed; the index cache serves them)")


def _replay_miss(answer: Answer, *providers: KeyedProvider | None) -> Answer:
    """A unit whose replay met an unrecorded request (the system's or the judge's) ends `replay_miss`,
    whatever the system made of the failed call: it is no replay of the recorded unit."""
    for provider in providers:
        if isinstance(provider, ReplayProvider) and provider.missed:
            return answer.model_copy(update={"status": "replay_miss", "error": provider.missed})
    return answer


def _answer(unit: Unit, plan: RunPlan, model: UnitModel, endpoint: EndpointFactory | None) -> Answer:
    task, recorder = unit.task, model.recorder
    if task.unavailable:
        return Answer(status="data_unavailable", error=task.unavailable)
    try:
        env = ToolEnvironment(plan.benchmark.tools(task, plan.config.tools), recorder)
    except DataUnavailable as missing:  # the benchmark says the data is not here: left out of every mean
        return Answer(status="data_unavailable", error=str(missing))
    except Exception as failure:  # ours, counted: only the benchmark's `task.unavailable` leaves a task out
        why = f"building the task's tools failed: {type(failure).__name__}: {failure}"
        return Answer(status="error", error=f"{why}\n{traceback.format_exc(limit=8)}")
    agent_view = task.for_agent()
    ctx = RunContext(agent_view, env, model.metered, endpoint=endpoint)
    recorder.start()
    try:
        answer = plan.systems[unit.system].run(agent_view, ctx)
    except FinalToolCall as final:  # a call that ends the task (DBGorilla's prediction, DAB's return_answer)
        answer = final.answer
    except BudgetExceeded as limit:
        answer = Answer(status=limit.status, error=str(limit))
    except ModelError as failure:  # the provider refused the request (the system's), or failed after its retries
        status = _after_failed_call(recorder.trace, failure.kind) or "infra_error"
        answer = Answer(status=status, error=f"model error: {failure}")
    except Exception as failure:  # a system bug ends this task, not the run; the trace keeps the stack
        status = _after_failed_call(recorder.trace) or "error"
        answer = Answer(status=status, error=f"{type(failure).__name__}: {failure}\n{traceback.format_exc(limit=8)}")
    finally:
        env.close()
    failed_inside = unrecovered_failure(recorder.trace) if answer.status in ("completed", "no_answer") else None
    if failed_inside and recorder.stopped_by is None:  # a provider failure the system went on past (issue 25)
        answer = answer.model_copy(update={"status": "infra_error", "error": failed_inside})
    return _with_budget_status(answer, recorder.stopped_by)


def _after_failed_call(trace: Trace, kind: str | None = None) -> AnswerStatus | None:
    """How a unit ends that failed on a model call's failure (`kind`), or right after a failed model call
    (a framework given the endpoint's 502): the system's own status when the provider refused what it sent
    (`REQUEST_FAULTS`), else `infra_error`; None when neither applies."""
    calls = trace.model_calls
    last = calls[-1] if calls and not calls[-1].success else None
    if kind not in REQUEST_FAULTS and last is not None and last.failed_attempts:
        kind = last.failed_attempts[-1].kind  # what the provider said (a system may re-raise it as its own)
    return failure_status(kind) if kind is not None or last is not None else None


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
    return record_of(
        trace,
        answer,
        unit.task,
        task_id=unit.task.id,
        benchmark=unit.task.benchmark,
        system=unit.system,
        model=unit.model.alias,
        epoch=unit.epoch,
        scores=scores,
        scoring_error=scoring_error,
        trace_file=unit.trace_file,
        judge_usage=judge_trace.usage() if judge_trace else None,
        judge_trace_file=unit.trace_file.removesuffix(".json") + ".judge.json" if judge_trace else None,
    )


def prepare_models(plan: RunPlan) -> dict[str, float]:
    """Load weights before any task's clock starts; returns the load time of each model."""
    seconds = {}
    for model in [*plan.models, plan.judge] if plan.judge else plan.models:
        start = time.perf_counter()
        get_provider(model.provider).prepare(model)
        seconds[model.alias] = time.perf_counter() - start
    return seconds
