"""Replay: a recorded run's model responses served again, with no model (`compare --replay RUN_DIR`).

Every model call step of a trace keeps the full reply (text, tool calls, usage) and the request's key
(`providers.cache.request_key`). `ReplayLog(run_dir)` indexes the run's records; `provider(unit, role)`
gives that unit's provider, which answers each request with the unit's next recorded response to the
same request key — in order, so a unit that asked the same thing twice gets both answers as it did —
and replays recorded failures as failures. A request the recorded unit never made raises `ReplayMiss`
(a `ModelError`, so the trace records it) and the runner ends the unit with status `replay_miss`.
Frameworks behind the gateway's HTTP endpoint go through the same `MeteredModel`, so they replay too.
A request option the recorded model's provider could not take is refused again as it was (`MeteredModel`
asks the provider registered under the recorded alias's `provider:`), before any recorded reply is used.
"""

from __future__ import annotations

import threading
from collections import defaultdict, deque
from pathlib import Path
from typing import Literal

from ..core.model import CallContext, ModelConfig, ModelError, ModelRequest, ModelResponse
from ..core.runlog import ResultRecord, RunLogError, UnitKey, read_run
from ..core.trace import ModelCallStep, Trace
from .cache import KeyedProvider, PendingCall, cached_mark, response_of

Role = Literal["system", "judge"]


class ReplayMiss(ModelError):
    """A request the recorded run has no response for."""


class ReplayProvider(KeyedProvider):
    """One unit's recorded responses (module docstring); `missed` says why the unit cannot be replayed."""

    name = "replay"

    def __init__(self, steps: list[ModelCallStep], source: str) -> None:
        super().__init__(None)
        self.source = source
        self.recorded = len(steps)
        self.missed: str | None = None
        self._served = 0
        self._lock = threading.Lock()
        self._by_key: dict[str, deque[ModelCallStep]] = defaultdict(deque)
        for step in steps:
            if step.request_key:
                self._by_key[step.request_key].append(step)

    def respond(
        self,
        pending: PendingCall,
        request: ModelRequest,
        config: ModelConfig,
        *,
        timeout_s: float,
        context: CallContext,
    ) -> ModelResponse:
        with self._lock:
            queue = self._by_key.get(pending.request_key)
            step = queue.popleft() if queue else None
            self._served += 1
            call = self._served
        if step is None:
            miss = (
                f"replay: {self.source} has no recorded response for call {call} of this unit"
                f" (request key {pending.request_key[:12]}…; the recorded unit made {self.recorded} model call(s))"
            )
            with self._lock:
                self.missed = self.missed or miss
            raise ReplayMiss(miss)
        if not step.success:
            kind = step.failed_attempts[-1].kind if step.failed_attempts else None  # the unit ends as it did
            raise ModelError(step.error or "a recorded failure", attempts=step.attempts, kind=kind)
        pending.cached = cached_mark("replay", pending.request_key, step)
        return response_of(step)


class ReplayLog:
    """The recorded run a replay draws from (module docstring)."""

    def __init__(self, run_dir: Path) -> None:
        self.run = read_run(run_dir)
        self.run_dir = Path(run_dir)
        self._records: dict[UnitKey, ResultRecord] = {record.key: record for record in self.run.records}
        if not any(self._keyed(record) for record in self.run.records[:50]):
            raise RunLogError(
                f"{run_dir} cannot be replayed: its traces do not record request keys"
                " (a run recorded before replay existed, or without model calls)"
            )

    def _keyed(self, record: ResultRecord) -> bool:
        return any(step.request_key for step in self._steps(record.trace_file))

    def _steps(self, trace_file: str | None) -> list[ModelCallStep]:
        if not trace_file:
            return []
        try:
            text = (self.run_dir / trace_file).read_text(encoding="utf-8")
        except OSError:
            return []
        return Trace.model_validate_json(text).model_calls

    def provider(self, unit: UnitKey, role: Role = "system") -> ReplayProvider:
        """The recorded responses of one unit (of its judge, for role "judge"); none for a unit the
        recorded run did not finish, so its first call misses."""
        record = self._records.get(unit)
        trace_file = None if record is None else record.trace_file if role == "system" else record.judge_trace_file
        return ReplayProvider(self._steps(trace_file), str(self.run_dir))
