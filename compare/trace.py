"""The trace of one task run: ordered model calls and tool calls, each timed and labelled.

Durations come from `time.perf_counter()` around the real work (the model call or the
tool call); nothing here is estimated. The recorder also enforces the run's budgets,
so every system — ours or an external framework behind the HTTP gateway — stops at
the same limits.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from compare.task import AnswerStatus, ToolCall


class Phase(StrEnum):
    DECISION = "decision"  # choosing the next action
    EXECUTE = "execute"  # running a tool
    RETRY = "retry"  # redoing a failed step
    GENERATE = "generate"  # writing the final answer


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0  # part of output_tokens, reported separately by some providers
    cost_usd: float = 0.0
    cost_source: Literal["provider", "price_table", "free", "mixed"] = "free"  # mixed: a sum over sources

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ModelCallStep(BaseModel):
    kind: Literal["model_call"] = "model_call"
    index: int
    phase: Phase
    agent: str | None = None  # which agent of a multi-agent system made the call
    model: str  # alias, e.g. gpt-5
    provider: str
    provider_model: str  # provider's id, e.g. openai/gpt-5
    started_at: str
    duration_s: float
    usage: Usage
    success: bool
    error: str | None = None
    finish_reason: str | None = None
    content: str | None = None  # the model's full text (a plan, a verdict, an answer)
    tool_calls: list[ToolCall] = Field(default_factory=list)  # the calls it asked for, with arguments
    attempts: int = 1  # HTTP attempts, retries of transient errors included
    via_http: bool = False  # made through the loopback OpenAI-compatible endpoint


class ToolCallStep(BaseModel):
    kind: Literal["tool_call"] = "tool_call"
    index: int
    phase: Phase
    agent: str | None = None
    tool: str  # canonical tool name
    arguments: dict[str, Any]
    started_at: str
    duration_s: float
    success: bool
    error: str | None = None
    result_summary: str = ""
    truncated: bool = False


class MessageStep(BaseModel):
    """A message between agents of a multi-agent system (no time of its own: duration 0)."""

    kind: Literal["message"] = "message"
    index: int
    phase: Phase
    agent: str  # the sender
    recipient: str
    started_at: str
    duration_s: float = 0.0
    content: str  # the message, summarized to its first characters


Step = Annotated[ModelCallStep | ToolCallStep | MessageStep, Field(discriminator="kind")]


class PhaseTotals(BaseModel):
    latency_s: float = 0.0
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0


class Trace(BaseModel):
    task_id: str
    system: str
    model: str
    started_at: str = ""
    setup_s: float = 0.0  # building the tool environment (opening databases, loading indexes), before the clock
    wall_time_s: float = 0.0  # the system's run, from its first instruction to its answer
    status: AnswerStatus = "completed"
    error: str | None = None
    steps: list[Step] = Field(default_factory=list)

    @property
    def model_calls(self) -> list[ModelCallStep]:
        return [s for s in self.steps if isinstance(s, ModelCallStep)]

    @property
    def tool_calls(self) -> list[ToolCallStep]:
        return [s for s in self.steps if isinstance(s, ToolCallStep)]

    def usage(self) -> Usage:
        total = Usage()
        for step in self.model_calls:
            total.input_tokens += step.usage.input_tokens
            total.output_tokens += step.usage.output_tokens
            total.reasoning_tokens += step.usage.reasoning_tokens
            total.cost_usd += step.usage.cost_usd
        sources = {step.usage.cost_source for step in self.model_calls}
        total.cost_source = sources.pop() if len(sources) == 1 else ("mixed" if sources else "free")
        return total

    def by_phase(self) -> dict[str, PhaseTotals]:
        """Latency, calls, tokens and cost per phase; 'other' is wall time outside any step."""
        totals: dict[str, PhaseTotals] = defaultdict(PhaseTotals)
        for step in self.steps:
            bucket = totals[step.phase.value]
            bucket.latency_s += step.duration_s
            if isinstance(step, MessageStep):
                continue
            if isinstance(step, ModelCallStep):
                bucket.model_calls += 1
                bucket.input_tokens += step.usage.input_tokens
                bucket.output_tokens += step.usage.output_tokens
                bucket.reasoning_tokens += step.usage.reasoning_tokens
                bucket.cost_usd += step.usage.cost_usd
            else:
                bucket.tool_calls += 1
        measured = sum(b.latency_s for b in totals.values())
        totals["other"] = PhaseTotals(latency_s=max(0.0, self.wall_time_s - measured))
        return dict(totals)


class Budgets(BaseModel):
    """Limits shared by every system; hitting one ends the task with an explicit status."""

    max_steps: int = 12  # model calls per task
    max_tokens: int = 60_000  # input + output tokens per task
    wall_time_s: float = 300.0
    tool_result_max_chars: int = 4_000  # what a tool result may put into the model's context


class BudgetExceeded(Exception):
    def __init__(self, status: AnswerStatus, detail: str) -> None:
        super().__init__(detail)
        self.status = status


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class TraceRecorder:
    """Collects the steps of one task run and checks its budgets. Thread-safe."""

    def __init__(self, trace: Trace, budgets: Budgets) -> None:
        self.trace = trace
        self.budgets = budgets
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        trace.started_at = utc_now()

    def start(self) -> None:
        """Start the task's clock now; what happened since construction was setup."""
        now = time.perf_counter()
        self.trace.setup_s = now - self._started
        self._started = now
        self.trace.started_at = utc_now()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    def remaining_s(self) -> float:
        return self.budgets.wall_time_s - self.elapsed_s()

    def next_index(self) -> int:
        return len(self.trace.steps)

    def add(self, step: ModelCallStep | ToolCallStep | MessageStep) -> None:
        with self._lock:
            step.index = len(self.trace.steps)
            self.trace.steps.append(step)

    def message(self, sender: str, recipient: str, content: str, phase: Phase = Phase.DECISION) -> None:
        """Record a message passed between agents."""
        self.add(
            MessageStep(
                index=0, phase=phase, agent=sender, recipient=recipient, started_at=utc_now(), content=content[:500]
            )
        )

    def check_budget(self) -> None:
        """Raise BudgetExceeded when the next model call would exceed a limit."""
        if self.remaining_s() <= 0:
            raise BudgetExceeded("time_limit", f"wall-time limit of {self.budgets.wall_time_s}s reached")
        if len(self.trace.model_calls) >= self.budgets.max_steps:
            raise BudgetExceeded("max_steps", f"step limit of {self.budgets.max_steps} model calls reached")
        if self.trace.usage().total_tokens >= self.budgets.max_tokens:
            raise BudgetExceeded("max_tokens", f"token limit of {self.budgets.max_tokens} reached")

    def relabel_last_model_call(self, phase: Phase) -> None:
        """Workflows learn what a model call was for only from its output (e.g. it wrote the answer)."""
        with self._lock:
            for step in reversed(self.trace.steps):
                if isinstance(step, ModelCallStep):
                    step.phase = phase
                    return

    def finish(self, status: AnswerStatus, error: str | None = None) -> Trace:
        self.trace.wall_time_s = self.elapsed_s()
        self.trace.status = status
        self.trace.error = error
        return self.trace
