"""A unit's model calls journaled and recorded as they happen (calls.jsonl, the unit's trace).

    SentJournal   each request journaled before it is sent (a `sent` line): a request that `kill -9` cuts
                  off is still counted, sent and never answered, usage unknown
    UnitRecorder  the unit's trace recorder: each finished call keyed (`KeyedProvider.annotate`) and
                  journaled, so the calls of a unit interrupted before its record are still counted

Both write through an `AttemptJournal`: the run's spend sink (`RunLogWriter`, or a worker's own appender)
and the id of this attempt at the unit. A finished call's request, as sent, goes to the same sink first
(`requested`: the run's conversations.sqlite, `core/conversations.py`), so every journaled call has its request.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..core.conversations import CallRequest, request_parts
from ..core.model import CallContext, ModelConfig, ModelError, ModelProvider, ModelRequest, ModelResponse
from ..core.runlog import SpentCall, UnitKey
from ..core.trace import Budgets, ModelCallStep, Step, Trace, TraceRecorder
from .cache import KeyedProvider


class SpendSink(Protocol):
    """Where a unit's model calls are journaled: the run's `RunLogWriter`, or a worker's own appender."""

    def spent(self, call: SpentCall) -> None: ...

    def requested(self, call: CallRequest) -> None: ...


@dataclass(frozen=True)
class AttemptJournal:
    """Where one attempt at a unit journals its model calls (calls.jsonl): the sink and the attempt's id."""

    writer: SpendSink
    attempt: str

    def write(self, line: SpentCall) -> None:
        with contextlib.suppress(OSError):  # a full disk stops the run at its next record, not inside a call
            self.writer.spent(line)

    def store(self, key: UnitKey, role: str, step: ModelCallStep, request: ModelRequest) -> None:
        """Keep a finished call's request, as sent (before its journal line)."""
        task_id, system, model, epoch = key
        call = CallRequest(
            task_id=task_id,
            system=system,
            model=model,
            epoch=epoch,
            attempt=self.attempt,
            role=role,
            step=step.index,
            request_key=step.request_key,
            parts=request_parts(request),
        )
        with contextlib.suppress(OSError, sqlite3.Error):  # a store that cannot be written loses a transcript,
            self.writer.requested(call)  # never the call (the record and the journal still have it)


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


class SentJournal(ModelProvider):
    """`inner` with each request journaled before it is sent (module docstring). The line is made once per
    unit and written with one write and flush, no fsync: a written line outlives the process (the kernel
    holds it); only a crash of the machine itself could lose it."""

    name = "journaled"

    def __init__(self, inner: ModelProvider, journal: AttemptJournal, key: UnitKey, role: str) -> None:
        self.inner = inner
        self.attempt_deadline = inner.attempt_deadline
        self._journal = journal
        self._sent = spent_line(journal.attempt, key, role).model_copy(update={"sent": 1})
        self._unsent = self._sent.model_copy(update={"sent": -1})

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        self._journal.write(self._sent)
        try:
            return self.inner.complete(request, config, timeout_s=timeout_s, context=context)
        except ModelError as error:
            if error.attempts == 0:  # refused before anything left (a bad setting): not sent after all
                self._journal.write(self._unsent)
            raise

    def prepare(self, config: ModelConfig) -> None:
        self.inner.prepare(config)


class UnitRecorder(TraceRecorder):
    """A unit's trace recorder (module docstring); `journal` gets each finished model call."""

    def __init__(
        self,
        trace: Trace,
        budgets: Budgets,
        provider: KeyedProvider,
        journal: Callable[[ModelCallStep, ModelRequest | None], None] | None,
    ) -> None:
        super().__init__(trace, budgets)
        self.provider = provider
        self.journal = journal
        self.sent = 0  # model calls admitted, i.e. sent to the provider
        self._sent_lock = threading.Lock()

    @classmethod
    def for_unit(
        cls,
        key: UnitKey,
        role: str,
        model: str,
        budgets: Budgets,
        provider: KeyedProvider,
        journal: AttemptJournal | None,
    ) -> UnitRecorder:
        """The recorder of unit `key` in `role` ("system" or "judge", calling model alias `model`), on a
        fresh trace."""
        task_id, system, _, _ = key
        trace = Trace(task_id=task_id, system=system if role == "system" else f"judge:{system}", model=model)
        if journal is None:
            return cls(trace, budgets, provider, None)

        def journaled(step: ModelCallStep, request: ModelRequest | None) -> None:
            if request is not None:
                journal.store(key, role, step, request)
            journal.write(spent_line(journal.attempt, key, role, step))

        return cls(trace, budgets, provider, journaled)

    def admit_model_call(self) -> None:
        super().admit_model_call()
        with self._sent_lock:
            self.sent += 1

    def add(self, step: Step) -> None:
        request = self.provider.annotate(step) if isinstance(step, ModelCallStep) else None
        super().add(step)
        if isinstance(step, ModelCallStep) and self.journal is not None:
            self.journal(step, request)

    def in_flight(self) -> int:
        """Calls sent and not answered yet."""
        return max(0, self.sent - len(self.trace.model_calls))
