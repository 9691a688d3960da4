"""The model one unit talks to, built in one place, layer by layer from the inside out:

    the registered provider (or, under --replay, the recorded run's replies)
    → each request journaled before it is sent (`SentJournal`: calls.jsonl's `sent` lines)
    → the run's rate limits (`RateLimitedProvider`, under the cache: a cached call takes no capacity)
    → the response cache (`CachingProvider`) or none (`KeyedProvider`): each call keyed
    → the unit's trace recorder (`UnitRecorder`: budgets, journal of finished calls)
    → the metered model a system or the judge calls (`MeteredModel`).

`build_unit_model` is the only place that knows this order; `units.py` asks it once per role.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.limits import RateLimitedProvider, RateLimiter
from ..core.model import (
    CallContext,
    GenerationSettings,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    RetrySettings,
    get_provider,
)
from ..core.runlog import SpentCall, UnitKey
from ..core.trace import Budgets, ModelCallStep, Step, Trace, TraceRecorder
from ..providers.cache import CachingProvider, KeyedProvider, ResponseCache
from ..providers.replay import ReplayLog

Journal = Callable[[ModelCallStep], None]


class SpendSink(Protocol):
    """Where a unit's model calls are journaled: the run's `RunLogWriter`, or a worker's own appender."""

    def spent(self, call: SpentCall) -> None: ...


def spent_line(
    attempt: str, key: UnitKey, role: str, step: ModelCallStep | None = None, in_flight: int = 0
) -> SpentCall:
    """A calls.jsonl line of one attempt at a unit: a finished call (`step`), or calls still in flight."""
    task_id, system, model, epoch = key
    fields: dict[str, object] = {"attempt": attempt, "task_id": task_id, "system": system, "model": model}
    if step is not None:
        fields |= {"usage": step.usage, "success": step.success, "cached": step.cached is not None}
        fields["attempts"] = step.attempts
    return SpentCall.model_validate({**fields, "epoch": epoch, "role": role, "in_flight": in_flight})


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


@dataclass(frozen=True)
class ModelLayers:
    """What a run puts around every model it calls: a recorded run's replies instead (--replay), its rate
    limits, its response cache, and the retries of the metered model."""

    replay: ReplayLog | None
    limiter: RateLimiter | None
    cache: ResponseCache | None
    retries: RetrySettings


@dataclass(frozen=True)
class SpendJournal:
    """Where one attempt at a unit journals its model calls (calls.jsonl): the writer and the attempt's id."""

    writer: SpendSink
    attempt: str


@dataclass
class UnitModel:
    """One role's model for a unit (the system's, or the judge's): what it calls and what records it."""

    metered: MeteredModel
    recorder: UnitRecorder


def build_unit_model(
    key: UnitKey,
    model: ModelConfig,
    role: str,
    budgets: Budgets,
    layers: ModelLayers,
    generation: GenerationSettings | None,
    journal: SpendJournal | None = None,
) -> UnitModel:
    """The metered model of unit `key` in `role` ("system" or "judge", each sampling by its own `generation`
    settings), with its own trace; with a `journal`, each call is journaled when sent and when finished."""
    task_id, system, _, _ = key
    provider = _keyed_provider(key, model, role, layers, journal)
    label = system if role == "system" else f"judge:{system}"
    trace = Trace(task_id=task_id, system=label, model=model.alias)
    recorder = UnitRecorder(trace, budgets, provider, _finished_calls(key, role, journal))
    name = system if role == "system" else "judge"
    metered = MeteredModel(model, provider, recorder, system=name, retries=layers.retries, generation=generation)
    return UnitModel(metered, recorder)


def _keyed_provider(
    key: UnitKey, model: ModelConfig, role: str, layers: ModelLayers, journal: SpendJournal | None
) -> KeyedProvider:
    """The provider layers of the module docstring, innermost first; the outermost says whether the
    innermost takes a per-attempt deadline (the embedded model does not: its own pace bounds its calls)."""
    if layers.replay is not None:
        return layers.replay.provider(key, "judge" if role == "judge" else "system")
    base = inner = get_provider(model.provider)
    if journal is not None:  # innermost: a cached call or a rate limit's refusal sends nothing
        sent = spent_line(journal.attempt, key, role).model_copy(update={"sent": 1})
        inner = SentJournal(inner, journal.writer, sent)
    if layers.limiter is not None and layers.limiter.applies_to(model):
        inner = RateLimitedProvider(inner, layers.limiter)
    keyed = CachingProvider(inner, layers.cache, key[3]) if layers.cache is not None else KeyedProvider(inner)
    keyed.attempt_deadline = base.attempt_deadline
    keyed.bills_nothing = base.bills_nothing  # MeteredModel prices by the outermost layer
    return keyed


def _finished_calls(key: UnitKey, role: str, journal: SpendJournal | None) -> Journal | None:
    if journal is None:
        return None
    writer, attempt = journal.writer, journal.attempt

    def record(step: ModelCallStep) -> None:
        with contextlib.suppress(OSError):  # a full disk stops the run at its next record, not inside a call
            writer.spent(spent_line(attempt, key, role, step))

    return record
