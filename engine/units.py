"""One unit of a run (task × system × model × epoch) and what carries it out: the plan it belongs to,
its metered providers (keyed, journaled, cached or replayed), its trace, answer, scores and result
record. The runner (`runner.py`) plans and orders units; the executors (`executors.py`,
`ray_executor.py`) run them. Both import this module, and it imports neither.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..core.benchmark import Benchmark
from ..core.context import EndpointFactory
from ..core.limits import RateLimiter
from ..core.model import PROVIDERS, ModelConfig, ModelProvider, get_provider
from ..core.registry import RegistryError, import_lazy_dependencies
from ..core.runlog import ResultRecord, UnitKey, record_of, trace_path
from ..core.scorer import SCORERS, score
from ..core.system import System, run_system
from ..core.task import QuestionType, Task
from ..core.trace import Budgets, Trace
from ..providers.cache import ResponseCache, default_cache_dir
from ..providers.journal import AttemptJournal, SpendSink, UnitRecorder, spent_line
from ..providers.replay import ReplayLog, ReplayProvider
from .config import RunConfig
from .model_stack import ModelLayers, ModelRole, UnitModel, build_unit_models


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
    def concurrency(self) -> int:
        """Units at once, as settled at planning (the run's `concurrency`, else its providers' default)."""
        assert self.config.concurrency is not None  # settled in __post_init__
        return self.config.concurrency

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

    def model_layers(self, roles: list[ModelRole]) -> ModelLayers:
        """What this run puts around each model of `roles` (`model_stack.py`)."""
        providers = {r.model.provider: get_provider(r.model.provider) for r in roles} if self.replay is None else {}
        return ModelLayers(providers, self.replay, self.limiter, self.cache, self.config.retries)

    def model_roles(self, task: Task, model: ModelConfig) -> list[ModelRole]:
        """The models a unit of `task` calls: the system's (by the run's budgets, the task's step limit
        first), and the judge's for report tasks when the run has a judge (by its own sampling settings)."""
        budgets = self.config.budgets
        if task.max_steps is not None:
            budgets = budgets.model_copy(update={"max_steps": task.max_steps})
        roles = [ModelRole("system", model, budgets, self.config.generation)]
        if self.judge is not None and task.question_type == QuestionType.REPORT:
            roles.append(ModelRole("judge", self.judge, JUDGE_BUDGETS, self.config.judge_generation))
        return roles

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

    def start(self, attempt: str, unit: Unit, recorders: list[UnitRecorder]) -> None:
        with self._lock:
            self._running.setdefault(attempt, (unit, []))[1].extend(recorders)

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
    the seconds it took to load each model (`model_load_s`), which the runner puts in the manifest; and its
    traces encoded (`encoded`): JSON text crosses processes for less CPU than a pickled trace, and the run
    log writes it as it is."""

    record: ResultRecord
    trace: Trace | str
    judge_trace: Trace | str | None
    model_load_s: dict[str, float] | None = None

    def encoded(self) -> UnitResult:
        """This result with its traces as JSON text (`Trace.model_dump_json`)."""
        judge = self.judge_trace
        return self._replace(
            trace=self.trace if isinstance(self.trace, str) else self.trace.model_dump_json(),
            judge_trace=judge.model_dump_json() if isinstance(judge, Trace) else judge,
        )


def run_unit(
    unit: Unit,
    plan: RunPlan,
    endpoint: EndpointFactory | None = None,
    writer: SpendSink | None = None,
    attempts: Attempts | None = None,
) -> UnitResult:
    """Run one task with one system and model, then score it; never raises for failures of the system.
    Returns the result record, the system's trace and the judge's trace (when a judge scored it).
    With a writer, each model call is journaled as it finishes (calls.jsonl).

    One pass down the floors: the unit's models (`model_stack.py`), the system's answer (`run_system`),
    the scores (`score`) and the record (`record_of`)."""
    task, config = unit.task, plan.config
    attempt, attempts = uuid.uuid4().hex[:16], attempts or Attempts()
    journal = AttemptJournal(writer, attempt) if writer is not None else None
    roles = plan.model_roles(task, unit.model)
    layers = plan.model_layers(roles)
    models = build_unit_models(unit.key, roles, layers, journal)
    attempts.start(attempt, unit, models.recorders)
    try:
        tools = functools.partial(plan.benchmark.tools, task, config.tools)
        answer = run_system(plan.systems[unit.system], task, tools, models.system.metered, endpoint)
        trace = models.system.recorder.finish(answer.status, answer.error)
        judge = models.judge.metered if models.judge else None
        if models.judge is not None:
            models.judge.recorder.start(setup=False)  # the judge's clock starts with the scoring
        sheet = score(task, answer, trace, plan.benchmark.scorers, judge, strict_answers=config.strict_answers)
    finally:
        attempts.finish(attempt)
    judge_trace = models.judge.recorder.finish("completed") if models.judge else None
    if missed := models.replay_missed:  # a request the recorded unit never made: no replay of it
        answer = answer.model_copy(update={"status": "replay_miss", "error": missed})
    record = record_of(
        trace,
        answer,
        task,
        task_id=task.id,
        benchmark=task.benchmark,
        system=unit.system,
        model=unit.model.alias,
        epoch=unit.epoch,
        scores=sheet.scores,
        scoring_error=sheet.error,
        trace_file=unit.trace_file,
        judge_usage=judge_trace.usage() if judge_trace else None,
        judge_trace_file=unit.trace_file.removesuffix(".json") + ".judge.json" if judge_trace else None,
    )
    record.attempt = attempt
    return UnitResult(record, trace, judge_trace)


def judge_model(unit: Unit, plan: RunPlan) -> UnitModel | None:
    """The judge's metered model for `unit` (its own trace), alone: when a judge scores the unit again
    (`compare rescore`); None when no judge scores it."""
    roles = [role for role in plan.model_roles(unit.task, unit.model) if role.name == "judge"]
    return build_unit_models(unit.key, roles, plan.model_layers(roles)).judge if roles else None


def setup_provider(plan: RunPlan) -> Callable[[ModelConfig], ModelProvider | None] | None:
    """The provider of `System.prepare`'s model calls (indexes): under --replay one that refuses every
    call, so a replay never reaches a model (an index must come from the index cache); else the
    registered one (indexes have a content cache of their own)."""
    if plan.replay is None:
        return None
    source = str(plan.replay.run_dir)
    return lambda model: ReplayProvider([], f"{source} (indexing calls are not replayed; the index cache serves them)")


def prepare_imports(plan: RunPlan) -> None:
    """Load the run's scorers and import, in this thread, what its loaded modules import on first use
    (`LAZY_IMPORTS`), before units run on threads (`core/registry.import_lazy_dependencies`)."""
    for name in plan.benchmark.scorers:
        with contextlib.suppress(RegistryError):  # an unknown scorer is each unit's scoring error, said there
            SCORERS.load(name)
    import_lazy_dependencies()


def prepare_models(plan: RunPlan) -> dict[str, float]:
    """Load weights before any task's clock starts; returns the load time of each model."""
    seconds = {}
    for model in [*plan.models, plan.judge] if plan.judge else plan.models:
        start = time.perf_counter()
        get_provider(model.provider).prepare(model)
        seconds[model.alias] = time.perf_counter() - start
    return seconds
