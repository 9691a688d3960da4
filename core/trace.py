"""The trace of one task run: model calls, tool calls and messages, each timed and labelled.

Durations come from `time.perf_counter()` around the real work (the model call or the tool
call); nothing here is estimated. A model call's `duration_s` spans all its attempts; the backoff
sleeps between them (`backoff_s`, each failed attempt with its wait in `failed_attempts`) are not
model time: `by_phase` counts them in a `backoff` bucket of their own, so the phases still add up to
the wall time and a provider's rate limits never inflate a system's decision or generate latency.
Each step also keeps its start on the task's clock, so
steps that overlap (a framework's parallel tool calls, LOTUS's batched model calls) are
accounted without counting an instant twice (`Trace.by_phase`).

The recorder enforces the run's budgets, so every system — ours or an external framework
behind the HTTP endpoint — stops at the same limits, and it labels every step's phase by one
set of rules (`PhaseRules`), so a phase means the same in every system.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .task import AnswerStatus, ToolCall


class Phase(StrEnum):
    DECISION = "decision"  # choosing the next action
    EXECUTE = "execute"  # running a tool
    RETRY = "retry"  # redoing a failed or rejected step
    GENERATE = "generate"  # writing the final answer


QUEUE = "queue"  # time a model call waited for the model (the embedded model runs one call at a time)
BACKOFF = "backoff"  # time a model call slept between attempts (retry backoff): neither model nor system time
OTHER = "other"  # wall time in no step: the system's own work


CostSource = Literal["provider", "price_table", "free", "mixed", "cached", "unknown"]


class Usage(BaseModel):
    """Tokens and cost of model calls. None is unknown (never 0): a published trajectory that recorded no
    tokens, a provider that reported no cost. A sum with an unknown part is unknown (`plus`)."""

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    reasoning_tokens: int | None = 0  # part of output_tokens, reported separately by some providers
    cached_tokens: int | None = 0  # part of input_tokens served from the provider's prompt cache
    cache_write_tokens: int | None = 0  # part of input_tokens written to the provider's prompt cache
    cost_usd: float | None = 0.0
    # mixed: a sum over sources; unknown: nobody recorded what the calls cost (cost_usd is None)
    cost_source: CostSource = "free"
    # The price table's figure for the same tokens (the alias's `price:`), kept beside a provider's reported
    # cost so the two can be compared; equal to cost_usd when the table priced the call; None: no table figure.
    table_cost_usd: float | None = None

    # The fields a sum adds up (`plus`): every count and both costs.
    SUMMED: ClassVar[tuple[str, ...]] = (
        "input_tokens",
        "output_tokens",
        "reasoning_tokens",
        "cached_tokens",
        "cache_write_tokens",
        "cost_usd",
        "table_cost_usd",
    )

    @classmethod
    def unknown(cls) -> Usage:
        """Usage nobody recorded: tokens and cost unknown."""
        return cls(
            input_tokens=None,
            output_tokens=None,
            reasoning_tokens=None,
            cached_tokens=None,
            cache_write_tokens=None,
            cost_usd=None,
            cost_source="unknown",
        )

    @property
    def total_tokens(self) -> int:
        """Input + output tokens, the unknown parts counted as 0: for budgets, which only meet known usage."""
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    @property
    def tokens_known(self) -> bool:
        return self.input_tokens is not None and self.output_tokens is not None

    @property
    def cost_known(self) -> bool:
        return self.cost_usd is not None

    def plus(self, other: Usage) -> Usage:
        """The sum of two usages: a part unknown in either is unknown; sources that differ are "mixed"."""
        summed = {name: known_sum(getattr(self, name), getattr(other, name)) for name in self.SUMMED}
        source: CostSource = "unknown"
        if summed["cost_usd"] is not None:
            source = self.cost_source if self.cost_source == other.cost_source else "mixed"
        return Usage(**summed, cost_source=source)


_Number = TypeVar("_Number", int, float)


def known_sum(first: _Number | None, second: _Number | None) -> _Number | None:
    """A sum that stays unknown (None) when either part is unknown: an unknown count is never taken as 0."""
    return None if first is None or second is None else first + second


class FailedAttempt(BaseModel):
    """One attempt of a model call that failed (rate limit, server error, timeout, lost connection,
    an incomplete reply); the call's retry policy decided what followed."""

    attempt: int  # 1-based
    kind: str  # rate_limit, server_error, timeout, connection, malformed, invalid_tool_arguments, client_error, ...
    status_code: int | None = None
    error: str
    start_s: float | None = None  # on the task's clock
    duration_s: float = 0.0  # the attempt itself
    wait_s: float = 0.0  # backoff slept after it before the next attempt (0: none followed)
    usage: Usage | None = None  # a reply that arrived but was unusable was still paid for


class CachedCall(BaseModel):
    """A model call answered from the response cache or a recorded run (`--replay`), not by the model:
    it cost nothing now; what the original call cost is kept for reference."""

    source: Literal["cache", "replay"]
    key: str  # the cache entry, or the request key looked up in the recorded run
    original_cost_usd: float | None = 0.0  # None: the original call's cost was unknown
    original_cost_source: str = "free"


# How the suite counts a call's tokens when its provider reported none (`LocalTokenCount.method`).
CHARACTERS_PER_TOKEN = 4
ESTIMATE_METHOD = f"estimate: {CHARACTERS_PER_TOKEN} characters per token"


class LocalTokenCount(BaseModel):
    """Tokens counted here for a call whose provider reported none: what the token budget meets. The call's
    usage stays unknown (never 0) in every total; this count only keeps the budget enforced."""

    input_tokens: int
    output_tokens: int
    method: str = ESTIMATE_METHOD  # how they were counted (a tokenizer's name, or the stated estimate)

    @classmethod
    def estimate(cls, sent: str, received: str) -> LocalTokenCount:
        return cls(input_tokens=_estimated(sent), output_tokens=_estimated(received))


def _estimated(text: str) -> int:
    return -(-len(text) // CHARACTERS_PER_TOKEN)  # rounded up: a budget errs on the side of stopping


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
    request_key: str | None = None  # `model.request_key` of the request: what a cache or replay looks up
    cached: CachedCall | None = None  # answered from the cache or a replay (its usage.cost_usd is 0)
    attempts: int = 1  # HTTP attempts, retries of transient errors included
    via_http: bool = False  # made through the loopback OpenAI-compatible endpoint
    start_s: float | None = None  # on the task's clock; None in traces written before schema 2
    queue_s: float = 0.0  # the part of duration_s spent waiting for the model, not in it
    # duration_s spans the whole call; retries' backoff sleeps are part of it but not model time:
    backoff_s: float = 0.0  # the part of duration_s slept between attempts (the `backoff` bucket of by_phase)
    failed_attempts: list[FailedAttempt] = Field(default_factory=list)  # attempts - 1 on success, attempts on failure
    # The sampling settings the system (or its library) asked for; what was sent is the run's `generation:`.
    generation_asked: dict[str, float | int] | None = None
    generation_sent: dict[str, float | int] | None = None  # the sampling settings the request carried (None: unknown)
    # The request's fields beyond the run's governance (`stop`, `response_format`, ...), as sent; None: none.
    request_options: dict[str, Any] | None = None
    logprobs: dict[str, Any] | None = None  # the reply's log probabilities, when the request asked for them
    # The provider reported no token counts: the suite's own count, which the token budget meets (None: reported)
    local_tokens: LocalTokenCount | None = None

    @property
    def budget_tokens(self) -> int:
        """Input + output tokens as the budget counts them: reported, else counted locally (`local_tokens`)."""
        usage, local = self.usage, self.local_tokens
        sent = usage.input_tokens if usage.input_tokens is not None else (local.input_tokens if local else 0)
        received = usage.output_tokens if usage.output_tokens is not None else (local.output_tokens if local else 0)
        return sent + received

    @computed_field  # type: ignore[prop-decorator]
    @property
    def model_latency_s(self) -> float:
        """Time spent in the model: the call's span without queueing and backoff."""
        return max(0.0, self.duration_s - self.queue_s - self.backoff_s)


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
    start_s: float | None = None  # on the task's clock


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
    start_s: float | None = None


Step = Annotated[ModelCallStep | ToolCallStep | MessageStep, Field(discriminator="kind")]


# What a warning's code says in the summary ("12 of 37 answered without running an operator"); a system may
# use a code of its own, shown as it is.
WARNING_PHRASES = {
    "no_operator": "answered without running an operator",
    "no_retrieval": "answered without retrieving anything",
    "no_answer": "stopped without an answer",
    "planner_fallback": "fell back from an unusable plan",
    "recovered": "went on past a failed model call",
    "partial_failure": "went on with some model calls failed",
    "empty_operator": "ran operators over no rows",
    "hedged": "gave a hedged answer (listed many candidates)",
    "request_field_refused": "sent a request field its model's provider cannot take (refused, HTTP 400)",
}


class RunWarning(BaseModel):
    """A system did not do what it is compared for (its plan ran no operator, it retrieved nothing, its
    planner fell back) yet went on: the record stays as it ended, and says so (`RunContext.warn`)."""

    code: str  # a key of WARNING_PHRASES, or the system's own
    detail: str = ""

    @property
    def phrase(self) -> str:
        return WARNING_PHRASES.get(self.code, self.code)


class PhaseTotals(BaseModel):
    latency_s: float | None = 0.0  # None: the steps' times were not recorded (`Trace.step_times_known`)
    model_calls: int = 0
    tool_calls: int = 0
    input_tokens: int | None = 0  # None: some call of the phase recorded no tokens
    output_tokens: int | None = 0
    reasoning_tokens: int | None = 0
    cost_usd: float | None = 0.0  # None: some call of the phase has no known cost


TRACE_SCHEMA_VERSION = 2  # 2: steps carry start_s (and model calls queue_s); phases by the rules of PhaseRules


class Trace(BaseModel):
    schema_version: int = TRACE_SCHEMA_VERSION
    task_id: str
    system: str
    model: str
    started_at: str = ""
    setup_s: float = 0.0  # building the tool environment (opening databases, loading indexes), before the clock
    wall_time_s: float = 0.0  # the system's run, from its first instruction to its answer
    status: AnswerStatus = "completed"
    error: str | None = None
    steps: list[Step] = Field(default_factory=list)
    warnings: list[RunWarning] = Field(default_factory=list)  # the system skipped its main step (`RunWarning`)
    # False when the steps' durations were not recorded (a published trajectory without its call logs): the
    # wall time may be known, its split into phases is not
    step_times_known: bool = True

    @property
    def model_calls(self) -> list[ModelCallStep]:
        return [s for s in self.steps if isinstance(s, ModelCallStep)]

    @property
    def tool_calls(self) -> list[ToolCallStep]:
        return [s for s in self.steps if isinstance(s, ToolCallStep)]

    def usage(self) -> Usage:
        """The model calls' usage summed; a part some call did not record is unknown for the whole trace."""
        calls = self.model_calls
        if not calls:
            return Usage()
        total = calls[0].usage
        for step in calls[1:]:
            total = total.plus(step.usage)
        return total.model_copy()

    def budget_tokens(self) -> int:
        """The tokens the token budget counts: every call's reported tokens, or its local count where its
        provider reported none (`ModelCallStep.local_tokens`)."""
        return sum(step.budget_tokens for step in self.model_calls)

    def retries(self) -> int:
        """Attempts beyond the first, over all model calls."""
        return sum(max(0, step.attempts - 1) for step in self.model_calls)

    def backoff_s(self) -> float:
        return sum(step.backoff_s for step in self.model_calls)

    def generation_asked(self) -> dict[str, dict[str, int]]:
        """Per sampling setting, the values the system asked for and in how many model calls."""
        asked: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for step in self.model_calls:
            for name, value in (step.generation_asked or {}).items():
                asked[name][str(value)] += 1
        return {name: dict(values) for name, values in asked.items()}

    def generation_sent(self) -> dict[str, dict[str, int]] | None:
        """Per sampling setting, the values the requests carried and in how many model calls (a call that
        carried none of a setting got the provider's default); None for traces recorded before this was kept."""
        if any(step.generation_sent is None for step in self.model_calls):
            return None
        sent: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for step in self.model_calls:
            for name, value in (step.generation_sent or {}).items():
                sent[name][str(value)] += 1
        return {name: dict(values) for name, values in sent.items()}

    def provider_errors(self) -> int:
        """Failed attempts (each error a provider gave, retried or final)."""
        return sum(len(step.failed_attempts) for step in self.model_calls)

    def by_phase(self) -> dict[str, PhaseTotals]:
        """Latency, calls, tokens and cost per phase; `queue` is waiting for the model, `backoff` sleeping
        between a call's attempts, `other` the wall time in no step. Every instant of the wall time counts
        once (`phase_seconds`), so the latencies add up to the wall time also when steps overlap."""
        totals: dict[str, PhaseTotals] = defaultdict(PhaseTotals)
        for step in self.steps:
            bucket = totals[step.phase.value]
            if isinstance(step, MessageStep):
                continue
            if isinstance(step, ModelCallStep):
                bucket.model_calls += 1
                for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cost_usd"):
                    setattr(bucket, name, known_sum(getattr(bucket, name), getattr(step.usage, name)))
            else:
                bucket.tool_calls += 1
        if not self.step_times_known:
            for bucket in totals.values():
                bucket.latency_s = None
            return dict(totals)
        for name, seconds in phase_seconds(self.steps, self.wall_time_s).items():
            totals[name].latency_s = seconds
        return dict(totals)


def _intervals(steps: list[Step]) -> list[tuple[float, float, str, int]]:
    """(start, end, bucket, step number) of every timed step; a model call's queueing and its backoff
    sleeps are buckets of their own. Steps without a start (traces before schema 2) are laid end to end."""
    intervals, cursor = [], 0.0
    for number, step in enumerate(steps):
        if step.duration_s <= 0:
            continue
        start = cursor if step.start_s is None else step.start_s
        end = start + step.duration_s
        cursor = end
        queued = min(step.queue_s, step.duration_s) if isinstance(step, ModelCallStep) else 0.0
        if queued > 0:
            intervals.append((start, start + queued, QUEUE, number))
        waits = _backoff_windows(step, start + queued, end) if isinstance(step, ModelCallStep) else []
        left = start + queued
        for wait_start, wait_end in waits:  # the call's own phase between its backoff sleeps
            if wait_start > left:
                intervals.append((left, wait_start, step.phase.value, number))
            intervals.append((wait_start, wait_end, BACKOFF, number))
            left = wait_end
        if end > left:
            intervals.append((left, end, step.phase.value, number))
    return intervals


def _backoff_windows(step: ModelCallStep, low: float, high: float) -> list[tuple[float, float]]:
    """The call's backoff sleeps on the task's clock, in order, clipped to [low, high]."""
    windows: list[tuple[float, float]] = []
    for attempt in step.failed_attempts:
        if attempt.wait_s <= 0 or attempt.start_s is None:
            continue
        wait_start = max(low, attempt.start_s + attempt.duration_s)
        wait_end = min(high, wait_start + attempt.wait_s)
        if wait_end > wait_start and (not windows or wait_start >= windows[-1][1]):
            windows.append((wait_start, wait_end))
    return windows


def phase_seconds(steps: list[Step], wall_time_s: float) -> dict[str, float]:
    """Seconds per phase bucket, with `other` for the rest of the wall time.

    The rule for overlapping steps: each instant counts once, for the innermost steps running
    then. A tool step whose span holds another step's (the model calls a semantic operator makes)
    keeps only the instants in none of them: the nested work is the inner step's phase. Only a tool
    step holds others (it runs code that may call the model); a model call is always a leaf, so a
    tool running during a model call's backoff is its sibling. An instant in which sibling steps of
    several buckets run is shared equally among those buckets; an instant in which several steps of
    one bucket run counts once for it. So the buckets sum to the union of the steps' intervals, and
    with `other` to the wall time (never more).
    """
    intervals = _intervals(steps)
    spans: dict[int, tuple[float, float]] = {}
    for start, end, _, number in intervals:
        low, high = spans.get(number, (start, end))
        spans[number] = (min(low, start), max(high, end))
    holders = {n for n, step in enumerate(steps) if isinstance(step, ToolCallStep)}
    seconds: dict[str, float] = defaultdict(float)
    edges = sorted({t for start, end, _, _ in intervals for t in (start, end)})
    for left, right in itertools.pairwise(edges):
        running = [(bucket, n) for start, end, bucket, n in intervals if start <= left and end >= right]
        outer = {n for _, n in running if n in holders and any(_holds(spans[n], spans[m]) for _, m in running)}
        active = {bucket for bucket, n in running if n not in outer}
        for bucket in active:
            seconds[bucket] += (right - left) / len(active)
    busy = sum(seconds.values())
    seconds[OTHER] = max(0.0, wall_time_s - busy)
    return dict(seconds)


def _holds(outer: tuple[float, float], inner: tuple[float, float]) -> bool:
    """Whether the span `inner` lies within `outer` and is not the same span (siblings share)."""
    return outer[0] <= inner[0] and inner[1] <= outer[1] and outer != inner


class Budgets(BaseModel):
    """Limits shared by every system; hitting one ends the task with an explicit status."""

    model_config = ConfigDict(extra="forbid")  # a misspelt budget must not be ignored

    # strict: `max_steps: true` is no number of steps (lax validation would make it 1)
    max_steps: int = Field(default=12, gt=0, strict=True)  # model calls per task
    max_tokens: int = Field(default=60_000, gt=0, strict=True)  # input + output tokens per task
    wall_time_s: float = Field(default=300.0, gt=0)
    # what a tool result may put into the model's context
    tool_result_max_chars: int = Field(default=4_000, gt=0, strict=True)


class BudgetExceeded(Exception):
    def __init__(self, status: AnswerStatus, detail: str) -> None:
        super().__init__(detail)
        self.status = status


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class PhaseRules:
    """The one place where a step's phase is decided; the same in every system.

    - GENERATE: a model call that gives the final answer — it was offered only answer tools, or
      its reply calls one, or the system takes its text as the answer (`RunContext.answer_from_text`);
      and every call of an answer tool (`Tool.answers`: `answer`, DAB's `return_answer`, a
      function-calling task's prediction).
    - RETRY: otherwise, a model call of an agent whose last step failed (a tool call came back
      unsuccessful) or was rejected (`RunContext.redo`: a critic's "revise", a plan step that found
      nothing); and the tool calls such a model call asks for.
    - DECISION: every other model call. EXECUTE: every other tool call.

    Agents are told apart by the `agent` label of a step (None for a single-agent system), so one
    agent's failure never turns another agent's next call into a retry.
    """

    def __init__(self) -> None:
        self.answer_tools: set[str] = set()
        self._redo: set[str | None] = set()
        self._last_model_phase: dict[str | None, Phase] = {}
        self._lock = threading.Lock()

    def before_model_call(self, agent: str | None, offered: list[str]) -> Phase:
        """The phase a model call is made in (the reply may still make it GENERATE)."""
        with self._lock:
            if offered and all(name in self.answer_tools for name in offered):
                return Phase.GENERATE
            return Phase.RETRY if agent in self._redo else Phase.DECISION

    def after_model_call(self, agent: str | None, phase: Phase, called: list[str]) -> Phase:
        """The phase of a finished model call, given the tools its reply calls."""
        with self._lock:
            if any(name in self.answer_tools for name in called):
                phase = Phase.GENERATE
            self._redo.discard(agent)
            self._last_model_phase[agent] = phase
            return phase

    def tool_call(self, agent: str | None, tool: str) -> Phase:
        with self._lock:
            if tool in self.answer_tools:
                return Phase.GENERATE
            return Phase.RETRY if self._last_model_phase.get(agent) == Phase.RETRY else Phase.EXECUTE

    def redo(self, agent: str | None) -> None:
        """The agent's next model call redoes a step (after a failed tool call or a rejected result)."""
        with self._lock:
            self._redo.add(agent)


class TraceRecorder:
    """Collects the steps of one task run, labels their phases and checks its budgets. Thread-safe."""

    def __init__(self, trace: Trace, budgets: Budgets) -> None:
        self.trace = trace
        self.budgets = budgets
        self.phases = PhaseRules()
        self.stopped_by: BudgetExceeded | None = None  # the first budget that refused a call
        self._lock = threading.Lock()
        self._started = time.perf_counter()
        self._model_calls_admitted = 0
        trace.started_at = utc_now()

    def start(self, setup: bool = True) -> None:
        """Start the task's clock now; what happened since construction was setup (unless `setup` is
        False: a judge's recorder, built with the unit, waits for the system's run and sets up nothing)."""
        now = time.perf_counter()
        if setup:
            self.trace.setup_s = now - self._started
        self._started = now
        self.trace.started_at = utc_now()

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._started

    def clock(self, instant: float) -> float:
        """A `perf_counter()` reading as seconds on the task's clock."""
        return instant - self._started

    def remaining_s(self) -> float:
        return self.budgets.wall_time_s - self.elapsed_s()

    def add(self, step: ModelCallStep | ToolCallStep | MessageStep) -> None:
        with self._lock:
            step.index = len(self.trace.steps)
            self.trace.steps.append(step)

    def warn(self, code: str, detail: str = "") -> None:
        """Record that the system skipped its main step (`RunWarning`); a code is recorded once per run."""
        with self._lock:
            if all(w.code != code for w in self.trace.warnings):
                self.trace.warnings.append(RunWarning(code=code, detail=detail))

    def message(self, sender: str, recipient: str, content: str, phase: Phase = Phase.DECISION) -> None:
        """Record a message passed between agents."""
        self.add(
            MessageStep(
                index=0,
                phase=phase,
                agent=sender,
                recipient=recipient,
                started_at=utc_now(),
                content=content[:500],
                start_s=self.elapsed_s(),
            )
        )

    def admit_model_call(self) -> None:
        """Reserve one model call of the step budget before the call is sent, so that parallel
        calls can never together exceed it; raise BudgetExceeded when a limit is reached.

        Tokens are checked against the calls that have finished: parallel calls in flight can
        together pass `max_tokens` by what they use, and the next call is refused."""
        with self._lock:
            self._check_locked(self._model_calls_admitted)
            self._model_calls_admitted += 1

    def check_budget(self) -> None:
        """Raise BudgetExceeded when the next model call would exceed a limit (reserves nothing)."""
        with self._lock:
            self._check_locked(self._model_calls_admitted)

    def refuse(self, status: AnswerStatus, detail: str) -> BudgetExceeded:
        """The BudgetExceeded to raise for `status`; the first one is remembered as `stopped_by`."""
        refusal = BudgetExceeded(status, detail)
        if self.stopped_by is None:
            self.stopped_by = refusal
        return refusal

    def _check_locked(self, admitted: int) -> None:
        if self.remaining_s() <= 0:
            raise self.refuse("time_limit", f"wall-time limit of {self.budgets.wall_time_s}s reached")
        if admitted >= self.budgets.max_steps:
            raise self.refuse("max_steps", f"step limit of {self.budgets.max_steps} model calls reached")
        if self.trace.budget_tokens() >= self.budgets.max_tokens:
            raise self.refuse("max_tokens", f"token limit of {self.budgets.max_tokens} reached")

    def mark_answer(self, agent: str | None) -> None:
        """The agent's last model call gave the final answer in its text (PhaseRules: GENERATE)."""
        with self._lock:
            for step in reversed(self.trace.steps):
                if isinstance(step, ModelCallStep) and step.agent == agent:
                    step.phase = Phase.GENERATE
                    return

    def finish(self, status: AnswerStatus, error: str | None = None) -> Trace:
        self.trace.wall_time_s = self.elapsed_s()
        self.trace.status = status
        self.trace.error = error
        return self.trace
