"""The counts a progress display shows (`RunProgress`): a listener of the engine's events (`engine/events.py`)
that keeps units done, failed and in flight, retries, tokens, cost and an ETA."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .events import RunEvent, StageStarted, UnitFinished, UnitStarted

if TYPE_CHECKING:
    from ..core.runlog import ResultRecord

FAILED_STATUSES = ("error", "infra_error", "replay_miss")


@dataclass
class RunProgress:
    """What the progress line shows, kept up to date from the run's events (this session's units; `done`
    starts at the units a resumed run already had)."""

    total: int
    done: int = 0
    failed: int = 0
    in_flight: int = 0
    retries: int = 0
    tokens: int = 0  # of the units whose token counts are known
    cost_usd: float = 0.0  # of the units whose cost is known
    cost_unknown: int = 0  # units (or their judging) whose cost is unknown: a model without a price
    unit_s: list[float] = field(default_factory=list)  # each finished unit's time from submission to its record
    stage: str = ""  # what the run does before its first unit ("" once units run)

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, StageStarted):
            self.stage = event.stage
        elif isinstance(event, UnitStarted):
            self.in_flight = event.in_flight
        elif isinstance(event, UnitFinished):
            self.add(event.record, event.seconds, event.in_flight)

    def add(self, record: ResultRecord, seconds: float, in_flight: int) -> None:
        usage = record.usage
        self.done += 1
        self.failed += record.status in FAILED_STATUSES
        self.in_flight = in_flight
        self.retries += record.retries
        self.tokens += usage.total_tokens or 0
        costs = [usage.cost_usd, *([record.judge_usage.cost_usd] if record.judge_usage else [])]
        self.cost_usd += sum(cost for cost in costs if cost is not None)
        self.cost_unknown += None in costs
        self.unit_s.append(seconds)

    def eta_s(self) -> float | None:
        """The median unit time × the waves of `in flight` units still needed; None before a unit finished."""
        left = self.total - self.done
        if not self.unit_s or left <= 0:
            return None if left > 0 else 0.0
        slots = max(1, self.in_flight)
        return statistics.median(self.unit_s) * -(-left // slots)
