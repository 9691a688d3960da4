"""One unit of a run (task × system × model × epoch) and what carries it out: the plan it belongs to,
its metered providers (keyed, journaled, cached or replayed), its trace, answer, scores and result
record. The runner (`runner.py`) plans and orders units; the executors (`executors.py`,
`ray_executor.py`) run them. Both import this module, and it imports neither.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, Protocol

from ..compare.benchmark import Benchmark
from ..compare.context import EndpointFactory, RunContext
from ..compare.limits import RateLimitedProvider, RateLimiter
from ..compare.model import (
    REQUEST_FAULTS,
    CallContext,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    failure_status,
    get_provider,
)
from ..compare.runlog import (
    ResultRecord,
    SpentCall,
    UnitKey,
    record_of,
    trace_path,
)
from ..compare.scorer import score
from ..compare.system import System
from ..compare.task import Answer, AnswerStatus, QuestionType, Task
from ..compare.tool import DataUnavailable, FinalToolCall, ToolEnvironment
from ..compare.trace import BudgetExceeded, Budgets, ModelCallStep, Step, Trace, TraceRecorder
from ..providers.cache import CachingProvider, KeyedProvider, ResponseCache, default_cache_dir
from ..providers.replay import ReplayLog, ReplayProvider
from .config import RunConfig


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

    def units(self) -> Iterator[Unit]:
        for epoch in range(1, self.config.epochs + 1):
            for model in self.models:
                for system in self.systems:
                    for task in self.tasks:
                        yield Unit(task, system, model, epoch)


# ---------------------------------------------------------------- one unit of work


JUDGE_BUDGETS = Budgets(max_steps=12, max_tokens=400_000, wall_time_s=900.0)


Journal = Callable[[ModelCallStep], None]


class SpendSink(Protocol):
    """Where a unit's model calls are journaled: the run's `RunLogWriter`, or a worker's own appender."""

    def spent(self, call: SpentCall) -> None: ...


class UnitRecorder(TraceRecorder):
    """A unit's trace recorder that keys each model call (`KeyedProvider.annotate`) and journals it as it
    finishes, so the calls of a unit interrupted before its record are still counted."""

    def __init__(self, trace: Trace, budgets: Budgets, provider: KeyedProvider, journal: Journal | None) -> None:
        super().__init__(trace, budgets)
        self.provider = provider
        self.journal = journal
        self.sent = 0  # model calls admitted, i.e. sent to the provider
        self._sent_lock = threading.Lock()

    def admit_model_call(self) -> None:
        super().admit_model_call()
        with self._sent_lock:
            self.sent += 1

    def add(self, step: Step) -> None:
        if isinstance(step, ModelCallStep):
            self.provider.annotate(step)
        super().add(step)
        if isinstance(step, ModelCallStep) and self.journal is not None:
            self.journal(step)

    def in_flight(self) -> int:
        """Calls sent and not answered yet."""
        return max(0, self.sent - len(self.trace.model_calls))


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
                writer.spent(_spent(attempt, unit, "system", in_flight=count))


def _spent(attempt: str, unit: Unit, role: str, step: ModelCallStep | None = None, in_flight: int = 0) -> SpentCall:
    task_id, system, model, epoch = unit.key
    fields: dict[str, object] = {"attempt": attempt, "task_id": task_id, "system": system, "model": model}
    if step is not None:
        fields |= {"usage": step.usage, "success": step.success, "cached": step.cached is not None}
        fields["attempts"] = step.attempts
    return SpentCall.model_validate({**fields, "epoch": epoch, "role": role, "in_flight": in_flight})


class SentJournal(ModelProvider):
    """`inner` with each request journaled before it is sent (a `sent` line in calls.jsonl), so a request
    that `kill -9` cuts off is still counted: sent, never answered, usage unknown. The line is made once per
    unit and written with one write and flush, no fsync: a written line outlives the process (the kernel
    holds it); only a crash of the machine itself could lose it."""

    name = "journaled"

    def __init__(self, inner: ModelProvider, writer: SpendSink, line: SpentCall) -> None:
        self.inner = inner
        self.attempt_deadline = inner.attempt_deadline
        self._writer, self._sent, self._unsent = writer, line, line.model_copy(update={"sent": -1})

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        self._journal(self._sent)
        try:
            return self.inner.complete(request, config, timeout_s=timeout_s, context=context)
        except ModelError as error:
            if error.attempts == 0:  # refused before anything left (a bad setting): not sent after all
                self._journal(self._unsent)
            raise

    def _journal(self, line: SpentCall) -> None:
        with contextlib.suppress(OSError):  # a full disk stops the run at its next record, not inside a call
            self._writer.spent(line)

    def prepare(self, config: ModelConfig) -> None:
        self.inner.prepare(config)


def _journal(writer: SpendSink | None, attempt: str, unit: Unit, role: str) -> Journal | None:
    if writer is None:
        return None

    def journal(step: ModelCallStep) -> None:
        with contextlib.suppress(OSError):  # a full disk stops the run at its next record, not inside a call
            writer.spent(_spent(attempt, unit, role, step))

    return journal


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
    provider = _provider_for(unit, plan, unit.model, "system", _sent_line(writer, attempt, unit, "system"))
    trace = Trace(task_id=task.id, system=unit.system, model=unit.model.alias)
    recorder = UnitRecorder(trace, budgets, provider, _journal(writer, attempt, unit, "system"))
    attempts.start(attempt, unit, recorder)
    try:
        answer = _answer(unit, plan, recorder, endpoint)
        trace = recorder.finish(answer.status, answer.error)
        judge, judge_recorder = _judge_for(
            unit, plan, _journal(writer, attempt, unit, "judge"), _sent_line(writer, attempt, unit, "judge")
        )
        if judge_recorder is not None:
            attempts.start(attempt, unit, judge_recorder)
        sheet = score(task, answer, trace, plan.benchmark.scorers, judge)  # a failing scorer scores its metrics 0
    finally:
        attempts.finish(attempt)
    judge_trace = judge_recorder.finish("completed") if judge_recorder else None
    answer = _replay_miss(answer, provider, judge_recorder.provider if judge_recorder else None)
    record = _result_record(unit, answer, trace, sheet.scores, sheet.error, judge_trace)
    record.attempt = attempt
    return UnitResult(record, trace, judge_trace)


def _sent_line(writer: SpendSink | None, attempt: str, unit: Unit, role: str) -> tuple[SpendSink, SpentCall] | None:
    return None if writer is None else (writer, _spent(attempt, unit, role).model_copy(update={"sent": 1}))


def _provider_for(
    unit: Unit, plan: RunPlan, model: ModelConfig, role: str, sent: tuple[SpendSink, SpentCall] | None = None
) -> KeyedProvider:
    """The unit's provider: its recorded responses (--replay), the registered provider through the
    response cache (--cache), or the registered provider; with `sent`, each request it sends is journaled first."""
    if plan.replay is not None:
        return plan.replay.provider(unit.key, "judge" if role == "judge" else "system")
    inner = get_provider(model.provider)
    if sent is not None:  # innermost: a cached call or a rate limit's refusal sends nothing
        inner = SentJournal(inner, *sent)
    limiter = plan.limiter
    if limiter is not None and limiter.applies_to(model):  # under the cache: a cached call takes no capacity
        inner = RateLimitedProvider(inner, limiter)
    cache = plan.cache
    return CachingProvider(inner, cache, unit.epoch) if cache is not None else KeyedProvider(inner)


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


def _judge_for(
    unit: Unit, plan: RunPlan, journal: Journal | None, sent: tuple[SpendSink, SpentCall] | None = None
) -> tuple[MeteredModel | None, UnitRecorder | None]:
    """The judge's metered model with its own trace, for report tasks when the run has a judge model."""
    task, judge = unit.task, plan.judge
    if judge is None or task.question_type != QuestionType.REPORT:
        return None, None
    provider = _provider_for(unit, plan, judge, "judge", sent)
    trace = Trace(task_id=task.id, system=f"judge:{unit.system}", model=judge.alias)
    recorder = UnitRecorder(trace, JUDGE_BUDGETS, provider, journal)
    retries, generation = plan.config.retries, plan.config.judge_generation  # the judge samples by its own settings
    return MeteredModel(judge, provider, recorder, system="judge", retries=retries, generation=generation), recorder


def _answer(unit: Unit, plan: RunPlan, recorder: UnitRecorder, endpoint: EndpointFactory | None) -> Answer:
    task = unit.task
    if task.unavailable:
        return Answer(status="data_unavailable", error=task.unavailable)
    try:
        env = ToolEnvironment(plan.benchmark.tools(task, plan.config.tools), recorder)
    except DataUnavailable as missing:  # the benchmark says the data is not here: left out of every mean
        return Answer(status="data_unavailable", error=str(missing))
    except Exception as failure:  # ours, counted: only the benchmark's `task.unavailable` leaves a task out
        why = f"building the task's tools failed: {type(failure).__name__}: {failure}"
        return Answer(status="error", error=f"{why}\n{traceback.format_exc(limit=8)}")
    model = MeteredModel(
        unit.model,
        recorder.provider,
        recorder,
        system=unit.system,
        retries=plan.config.retries,
        generation=plan.config.generation,
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
    except ModelError as failure:  # the provider refused the request (the system's), or failed after its retries
        status = _after_failed_call(recorder.trace, failure.kind) or "infra_error"
        answer = Answer(status=status, error=f"model error: {failure}")
    except Exception as failure:  # a system bug ends this task, not the run; the trace keeps the stack
        status = _after_failed_call(recorder.trace) or "error"
        answer = Answer(status=status, error=f"{type(failure).__name__}: {failure}\n{traceback.format_exc(limit=8)}")
    finally:
        env.close()
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
