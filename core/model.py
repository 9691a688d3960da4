"""The model gateway: one interface for every model, every call metered.

A `ModelProvider` turns a `ModelRequest` into a `ModelResponse` (OpenRouter, any
OpenAI-compatible endpoint, the embedded llama.cpp model, a scripted test model).
`MeteredModel` wraps a provider for one task run: it checks the budgets, times the
call with a monotonic clock, prices it, and records a `ModelCallStep` in the trace.
Systems only ever see a `MeteredModel` (in process, through their `RunContext`) or its HTTP
twin (the OpenAI-compatible endpoint of `providers/endpoint.py`), which goes through the same
`generate`. Providers are found by name (`PROVIDERS`): the `provider:` of a model alias.
"""

from __future__ import annotations

import json
import random
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from .registry import Registry
from .task import AnswerStatus, ToolCall
from .trace import FailedAttempt, LocalTokenCount, ModelCallStep, Phase, Trace, TraceRecorder, Usage, known_sum, utc_now


class Message(BaseModel):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None  # assistant messages that call tools
    tool_call_id: str | None = None  # tool messages: which call this answers
    name: str | None = None  # tool messages: the tool's name


class ToolSpec(BaseModel):
    """A tool as a model sees it: name, description, JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    messages: list[Message]
    tools: list[ToolSpec] = Field(default_factory=list)
    tool_choice: Literal["auto", "required", "none"] = "auto"
    response_schema: dict[str, Any] | None = None  # structured output instead of free text
    temperature: float | None = None
    max_output_tokens: int | None = None
    top_p: float | None = None
    seed: int | None = None
    # Chat-completions fields the run does not govern, as the system (or its library) sent them: `stop`,
    # `response_format`, a named `tool_choice`, `logprobs`, `user`, ... Passed to the provider unchanged, or
    # refused before anything is sent by a provider that cannot take one (`ModelProvider.request_fields`).
    options: dict[str, Any] = Field(default_factory=dict)

    def asked_options(self) -> dict[str, Any]:
        """The options that ask for something: those at their protocol default (`n: 1`, `logprobs: false`,
        `stop: null`, ...) ask for nothing, so a request carrying only those is the request without them."""
        return {name: value for name, value in self.options.items() if not neutral_option(name, value)}


# Option values that are the chat-completions protocol's own defaults: sending them changes nothing.
NEUTRAL_OPTIONS: dict[str, Any] = {
    "n": 1,
    "logprobs": False,
    "parallel_tool_calls": True,
    "presence_penalty": 0,
    "frequency_penalty": 0,
    "logit_bias": {},
}


def neutral_option(name: str, value: Any) -> bool:
    """Whether option `name` at `value` asks for nothing (null, or the protocol's default)."""
    if value is None:
        return True
    if name not in NEUTRAL_OPTIONS:
        return False
    default = NEUTRAL_OPTIONS[name]
    if isinstance(default, bool) or isinstance(value, bool):
        return value is default
    return bool(value == default)


class GenerationSettings(BaseModel):
    """The sampling settings of every request of a run (`generation:`; the judge's `judge_generation:`).
    The gateway sends exactly these: a field set here overrides what a system or its library asked for,
    a field left unset is removed from every request, so the provider's default applies alike to all."""

    model_config = ConfigDict(extra="forbid")

    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    # No model writes a million tokens in one reply: a larger limit is a typo, refused before the run.
    max_output_tokens: int | None = Field(default=None, gt=0, le=1_000_000)

    def sent(self) -> dict[str, float | int]:
        """The fields every request carries (the unset ones are removed)."""
        return self.model_dump(exclude_none=True)


# A model alias's `params` keys that set what `GenerationSettings` sets (the request body's names included).
SAMPLING_PARAMS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
}


def sampling_conflicts(config: ModelConfig, generation: GenerationSettings, section: str = "generation") -> list[str]:
    """Why this alias's `params` would override the run's sampling settings (`section`: `generation` or
    `judge_generation`): one line per key that a provider which sends `params` in the request body
    (`params_in_body`) would send with another value than the run's. The run's settings win, so such an alias
    is refused rather than silently sending its own."""
    if not _params_in_body(config.provider):
        return []
    run = generation.model_dump()
    conflicts = []
    for key, value in config.params.items():
        setting = SAMPLING_PARAMS.get(key)
        if setting is None or run[setting] is None or value == run[setting]:
            continue
        flag = f"--{setting.replace('_', '-')} or " if section == "generation" else ""
        conflicts.append(
            f"model alias {config.alias!r}: params {key}: {value!r} conflicts with the run's {setting} "
            f"{run[setting]!r} ({flag}{section}.{setting}); the run's settings go with every request: remove "
            f"{key!r} from the alias's params"
        )
    return conflicts


def unpriced(config: ModelConfig) -> bool:
    """Whether the model's calls cost an unknown amount unless its provider reports their cost: no price in its
    alias, and a backend that bills (`bills_nothing` False)."""
    if config.price is not None:
        return False
    factory = PROVIDERS.load(config.provider) if config.provider in PROVIDERS else None
    return not getattr(factory, "bills_nothing", False)


def _params_in_body(provider: str) -> bool:
    return provider in PROVIDERS and bool(getattr(PROVIDERS.load(provider), "params_in_body", False))


def sampling_sent(request: ModelRequest, config: ModelConfig, params_in_body: bool) -> dict[str, float | int]:
    """The sampling settings a request carried to the provider: the request's, and the alias's `params` keys
    the provider adds to the body (where the run left a setting unset, an alias may still set it)."""
    sent: dict[str, float | int] = {
        name: value
        for name in ("temperature", "top_p", "seed", "max_output_tokens")
        if (value := getattr(request, name)) is not None
    }
    if params_in_body:
        for key, value in config.params.items():
            if key in SAMPLING_PARAMS and isinstance(value, int | float) and not isinstance(value, bool):
                sent[SAMPLING_PARAMS[key]] = value
    return sent


class ModelResponse(BaseModel):
    message: Message  # role "assistant"
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    provider_model: str = ""  # the model id the provider says answered
    attempts: int = 1
    queue_s: float = 0.0  # time the call waited for the model before it ran (the local model's lock)
    logprobs: dict[str, Any] | None = None  # the choice's log probabilities, when the request asked for them
    # A reply that arrived but cannot be used as it is (tool-call arguments that are not JSON): the retry
    # policy asks again; the last attempt's reply is kept as it is when no attempt is left.
    defect: str | None = None


class Price(BaseModel):
    """A model's published rates, USD per million tokens of each class a provider bills apart. A class without a
    rate of its own is billed at the rate it is part of: cached input and cache writes at `input_per_mtok`,
    reasoning at `output_per_mtok` (as OpenAI and DeepSeek bill it). `checked` is the date the rates were
    last checked against the provider's published prices (`source`)."""

    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = Field(default=0.0, ge=0)  # USD per million input tokens not served from a cache
    output_per_mtok: float = Field(default=0.0, ge=0)  # USD per million output tokens (reasoning included)
    cached_input_per_mtok: float | None = Field(default=None, ge=0)  # a prompt-cache read (a cache hit)
    cache_write_per_mtok: float | None = Field(default=None, ge=0)  # input written to the prompt cache
    reasoning_per_mtok: float | None = Field(default=None, ge=0)  # hidden reasoning, part of the output
    request_fee_usd: float = Field(default=0.0, ge=0)  # USD per request, whatever its tokens
    checked: str | None = None  # YYYY-MM-DD
    source: str | None = None

    @property
    def rates(self) -> dict[str, float]:
        """The rate of every class (USD per million tokens; the request fee per request), defaults filled in."""
        given = self.input_per_mtok, self.output_per_mtok
        return {
            "input": given[0],
            "cached_input": given[0] if self.cached_input_per_mtok is None else self.cached_input_per_mtok,
            "cache_write": given[0] if self.cache_write_per_mtok is None else self.cache_write_per_mtok,
            "output": given[1],
            "reasoning": given[1] if self.reasoning_per_mtok is None else self.reasoning_per_mtok,
            "request": self.request_fee_usd,
        }

    @property
    def charges(self) -> bool:
        """Whether any rate is above 0 (a price of all zeros: a free model)."""
        return any(self.rates.values())

    def cost(self, usage: Usage, requests: int = 1) -> float | None:
        """USD for the usage's tokens, each class at its rate, and `requests` request fees; None (unknown) when
        its input or output count is unknown. Cached and written input are parts of `input_tokens`, reasoning a
        part of `output_tokens` (as providers report them); an unknown part of them is taken as none."""
        if usage.input_tokens is None or usage.output_tokens is None:
            return None
        rates = self.rates
        cached, written = usage.cached_tokens or 0, usage.cache_write_tokens or 0
        reasoning = usage.reasoning_tokens or 0
        fresh = max(0, (usage.input_tokens or 0) - cached - written)
        visible = max(0, (usage.output_tokens or 0) - reasoning)
        per_million = (
            fresh * rates["input"]
            + cached * rates["cached_input"]
            + written * rates["cache_write"]
            + visible * rates["output"]
            + reasoning * rates["reasoning"]
        )
        return per_million / 1e6 + requests * rates["request"]


class ModelConfig(BaseModel):
    """A model alias from configs/models.yaml (or the command line) resolved."""

    model_config = ConfigDict(extra="forbid")  # `temprature:` in an alias must not be ignored

    alias: str
    provider: str  # a registered provider name (`compare models` lists them)
    model_id: str
    base_url: str | None = None
    # HTTP Basic auth from the base URL's user info (`http://user:password@host/v1`) is meant: without it
    # such a URL is refused, since the key then never reaches the server and the password the logs.
    basic_auth: bool = False
    api_key_env: str | None = None  # the *name* of the variable holding the key; never the key
    price: Price | None = None
    context_window: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # provider-specific settings


class ModelError(Exception):
    """A model call (or one attempt of it) failed. `retryable` failures are retried by `MeteredModel`
    under the run's `RetrySettings`; `retry_after_s` is the server's Retry-After; `usage` the tokens (and
    cost) the provider reported for the failed attempt, which count in the trace and the budgets."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int | None = None,
        attempts: int = 1,
        queue_s: float = 0.0,
        retryable: bool = False,
        kind: str | None = None,
        retry_after_s: float | None = None,
        usage: Usage | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts
        self.queue_s = queue_s
        self.retryable = retryable
        self.kind = kind or ("server_error" if retryable else "error")
        self.retry_after_s = retry_after_s
        self.usage = usage  # what the provider reported (and billed) for the failed attempt, if anything


class FieldRefused(ModelError):
    """A request field refused before anything was sent: the run governs it, the gateway cannot answer it, or
    the provider cannot take it. `field` is its chat-completions name (the gateway answers HTTP 400 naming it)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(
            f"request field {field!r} refused: {reason}", status_code=400, attempts=0, kind="invalid_request"
        )
        self.field = field


# Failures caused by what the system sent (`ModelError.kind`): the provider refused the request (HTTP
# 400/413/422) or the embedded model could not take it. Each ends the unit with a status of the system's own,
# a failure in every quality mean; any other failure after the retries is the provider's (`infra_error`).
REQUEST_FAULTS: dict[str, AnswerStatus] = {
    "context_overflow": "context_overflow",
    "output_limit": "output_limit",
    "invalid_request": "invalid_request",
    "content_filter": "content_filter",
}


def failure_status(kind: str | None) -> AnswerStatus:
    """How a unit ends when it stopped on a failed model call of this kind."""
    return REQUEST_FAULTS.get(kind or "", "infra_error")


# A system that went on past a model call the provider failed, on purpose, says so with this warning code
# (`RunContext.warn`); then its unit keeps the status it ended with (`unrecovered_failure`).
RECOVERED = "recovered"


def unrecovered_failure(trace: Trace) -> str | None:
    """Why a unit that finished is the provider's failure after all: a model call inside the system (a
    semantic operator, a query engine, a tool step) failed after its retries for the provider's reasons and
    the system went on without it and did not say it recovered (`RECOVERED`). None when no such call failed.
    Requests the provider refused (`REQUEST_FAULTS`) are the system's own failures and stay its own."""
    calls = trace.model_calls
    failed = [step for step in calls if not step.success and failure_status(_kind(step)) == "infra_error"]
    if not failed or any(warning.code == RECOVERED for warning in trace.warnings):
        return None
    last = (failed[-1].error or "").splitlines()[0] if failed[-1].error else "no error recorded"
    return (
        f"{len(failed)} of {len(calls)} model calls failed after their retries inside the system, which went on "
        f"without them: a provider failure (the last: {last})"
    )


def _kind(step: ModelCallStep) -> str | None:
    return step.failed_attempts[-1].kind if step.failed_attempts else None


class RetrySettings(BaseModel):
    """One retry policy for every provider and every framework behind the gateway (`retries:` in
    configs/defaults.yaml). Waits are exponential with full jitter (uniform in [0, min(max_backoff_s,
    base_backoff_s * 2**(n-1))]) and never shorter than the server's Retry-After."""

    model_config = ConfigDict(extra="forbid")

    max_attempts: int = Field(default=4, ge=1)  # attempts per model call, the first included
    base_backoff_s: float = Field(default=1.0, gt=0)
    max_backoff_s: float = Field(default=30.0, gt=0)  # ceiling of one jittered wait
    max_retry_after_s: float = Field(default=60.0, ge=0)  # a longer Retry-After gives up instead of waiting
    connect_timeout_s: float = Field(default=10.0, gt=0)
    read_timeout_s: float = Field(default=60.0, gt=0)  # the longest silence between two bytes
    attempt_timeout_s: float = Field(default=120.0, gt=0)  # hard deadline of one attempt, body included
    call_timeout_s: float = Field(default=300.0, gt=0)  # hard deadline of a call with its retries and waits
    retry_invalid_tool_arguments: bool = True  # ask again when tool-call arguments are not JSON

    def backoff_s(self, attempt: int, retry_after_s: float | None, rng: random.Random | None = None) -> float:
        """The wait after failed attempt number `attempt` (1-based)."""
        ceiling = min(self.max_backoff_s, self.base_backoff_s * 2 ** (attempt - 1))
        jittered = (rng or random).uniform(0.0, ceiling)
        return max(jittered, retry_after_s or 0.0)


class ModelProvider(ABC):
    """Talks to one kind of model backend. Implementations must be thread-safe."""

    name: str
    # The per-attempt deadline (`retries.attempt_timeout_s`) guards against a network peer that hangs or
    # trickles. A backend that cannot hang (the embedded model: its output is bounded by max_output_tokens,
    # and waiting for its lock is queueing) sets this False: only the call's deadline bounds an attempt.
    attempt_deadline: ClassVar[bool] = True
    # Units a run takes at once when `--concurrency` is not given (the smallest of its models' providers):
    # what the provider serves without queueing or rate-limit errors. 1 unless a provider says more.
    default_concurrency: ClassVar[int] = 1
    # The provider puts the alias's `params` into the request body (OpenAI-compatible, OpenRouter): their sampling
    # keys are then checked against the run's settings (`sampling_conflicts`) and recorded as sent.
    params_in_body: ClassVar[bool] = False
    # The backend charges nothing (the embedded model runs here): an alias without a price costs $0. Any other
    # backend's call with neither a provider-reported cost nor a price costs an unknown amount, never $0.
    bills_nothing: ClassVar[bool] = False
    # The request options (`ModelRequest.options`) the backend takes; None: every one, passed on as given (an
    # HTTP provider: its server refuses what it cannot take). An option outside the set that asks for something
    # is refused before anything is sent (`refused_field`); one at its protocol default asks nothing and is kept.
    request_fields: ClassVar[frozenset[str] | None] = None

    @classmethod
    def refused_field(cls, request: ModelRequest) -> FieldRefused | None:
        """Why this backend cannot take one of the request's options, or None when it takes them all."""
        taken = cls.request_fields
        if taken is None:
            return None
        for name in request.asked_options():
            if name not in taken:
                return FieldRefused(name, f"the {cls.name} provider cannot take it (it takes {_listed(taken)})")
        return None

    @abstractmethod
    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        """Run one chat completion. Report tokens (and cost, when the backend does)."""

    @classmethod
    def key_variable(cls, config: ModelConfig) -> str | None:
        """The environment variable that must hold this model's API key (None: no key needed)."""
        return config.api_key_env

    def prepare(self, config: ModelConfig) -> None:  # noqa: B027 - optional hook
        """Load what the first call would otherwise load (weights), so no call's timing includes it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (loaded weights, HTTP pools)."""


def _listed(fields: frozenset[str]) -> str:
    return ", ".join(sorted(fields)) if fields else "none"


def refused_field(provider: str, request: ModelRequest) -> FieldRefused | None:
    """Why the registered provider `provider` cannot take one of the request's options (None: it takes them)."""
    if not request.options or provider not in PROVIDERS:
        return None
    check = getattr(PROVIDERS.load(provider), "refused_field", None)  # a factory function takes every option
    return check(request) if check is not None else None


class CallContext(BaseModel):
    """Who a call belongs to; providers may use it (the scripted test model does)."""

    task_id: str
    system: str
    model: str
    phase: Phase  # the phase the call is made in; a reply that calls an answer tool makes it GENERATE
    agent: str | None = None
    retries: RetrySettings = Field(default_factory=RetrySettings)  # providers take their timeouts from it


# ---------------------------------------------------------------- providers by name

ProviderFactory = Callable[[], ModelProvider]

PROVIDERS: Registry[ProviderFactory] = Registry("providers")
_instances: dict[str, ModelProvider] = {}
_instances_lock = threading.Lock()


def register_provider(name: str) -> Callable[[ProviderFactory], ProviderFactory]:
    """Register a provider class (or factory) under `name`, the `provider:` of a model alias."""

    def decorate(factory: ProviderFactory) -> ProviderFactory:
        PROVIDERS.register(name, factory)
        with _instances_lock:
            _instances.pop(name, None)
        return factory

    return decorate


def get_provider(name: str) -> ModelProvider:
    """One shared instance per provider name and process (the local model loads its weights once)."""
    with _instances_lock:
        if name not in _instances:
            _instances[name] = PROVIDERS.load(name)()
        return _instances[name]


def forget_provider(name: str) -> None:
    """Drop the shared instance of `name` (after its registration changed), closing it."""
    with _instances_lock:
        provider = _instances.pop(name, None)
    if provider is not None:
        provider.close()


# ---------------------------------------------------------------- the metered model


class MeteredModel:
    """A model bound to one task run: every `generate` is budget-checked, retried under the run's
    `RetrySettings`, timed, priced and traced (each failed attempt with its error and wait)."""

    def __init__(
        self,
        config: ModelConfig,
        provider: ModelProvider,
        recorder: TraceRecorder,
        *,
        system: str,
        retries: RetrySettings | None = None,
        call_timeout_s: float | None = None,  # overrides retries.call_timeout_s
        generation: GenerationSettings | None = None,  # None: each request as the system asked
    ) -> None:
        self.config = config
        self.generation = generation
        self.provider = provider
        self.recorder = recorder
        self.system = system
        self.retries = retries or RetrySettings()
        self.call_timeout_s = self.retries.call_timeout_s if call_timeout_s is None else call_timeout_s

    @property
    def alias(self) -> str:
        return self.config.alias

    def generate(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        response_schema: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        agent: str | None = None,
        via_http: bool = False,
        options: dict[str, Any] | None = None,
    ) -> ModelResponse:
        """One model call: admitted by the budgets, retried, timed, priced, phase-labelled and traced.
        The sampling settings sent are the run's (`generation`); what the system asked for is recorded.
        `options` (`ModelRequest.options`) go as they are, or the call is refused (`FieldRefused`) before it is
        admitted when the provider cannot take one; the refusal is noted in the trace's warnings."""
        recorder = self.recorder
        settings = {"temperature": temperature, "top_p": top_p, "seed": seed, "max_output_tokens": max_output_tokens}
        asked: dict[str, float | int] = {name: value for name, value in settings.items() if value is not None}
        sampling = asked if self.generation is None else self.generation.sent()
        request = ModelRequest.model_validate(  # validated as one dict: the sampling fields are set by name
            {
                "messages": messages,
                "tools": tools or [],
                "tool_choice": tool_choice,
                "response_schema": response_schema,
                "options": options or {},
                **sampling,
            }
        )
        refused = refused_field(self.config.provider, request)
        if refused is not None:
            recorder.warn("request_field_refused", f"{self.alias}: {refused}")
            raise refused
        phase = recorder.phases.before_model_call(agent, [tool.name for tool in tools or []])
        recorder.admit_model_call()
        context = CallContext(
            task_id=recorder.trace.task_id,
            system=self.system,
            model=self.alias,
            phase=phase,
            agent=agent,
            retries=self.retries,
        )
        call = _Call(agent, utc_now(), time.perf_counter(), via_http, asked=asked or None, options=options or None)
        call.sent = sampling_sent(request, self.config, _params_in_body(self.config.provider))
        # The call's hard deadline: its own timeout, never past the task's wall time (at least 1 s to try); a
        # backend that cannot hang (`attempt_deadline` False: the embedded model, paced by its own progress)
        # has the task's wall time alone, so a busy machine makes its calls slow, not failed.
        own_timeout = self.call_timeout_s if self.provider.attempt_deadline else float("inf")
        call.deadline = call.start + max(1.0, min(own_timeout, recorder.remaining_s()))
        try:
            response = self._attempts(request, context, call)
        except ModelError as error:
            paid = _paid_requests(call.failed)  # billed although the call failed
            call.paid = self._price(_with_paid_attempts(Usage(), call.failed), paid)
            self._record(call, recorder.phases.after_model_call(agent, phase, []), None, error)
            if recorder.remaining_s() <= 0:  # the call was cut short by the task's wall-time budget
                raise recorder.refuse("time_limit", f"wall-time limit reached during a model call: {error}") from error
            raise
        response.usage = _with_paid_attempts(response.usage, call.failed)
        self._price(response.usage, 1 + _paid_requests(call.failed))
        if not response.usage.tokens_known:  # the budget still meets this call: counted here, said in the record
            call.local_tokens = local_token_count(request, response.message)
        called = [c.name for c in response.message.tool_calls or []]
        self._record(call, recorder.phases.after_model_call(agent, phase, called), response, None)
        return response

    def _attempts(self, request: ModelRequest, context: CallContext, call: _Call) -> ModelResponse:
        """Attempts until one succeeds, a failure is not retryable, attempts run out or the deadline
        would pass during the wait; every failed attempt goes into `call.failed`."""
        policy = self.retries
        while True:
            number = len(call.failed) + 1
            started = time.perf_counter()
            limit = policy.attempt_timeout_s if self.provider.attempt_deadline else float("inf")
            timeout_s = max(0.001, min(limit, call.deadline - started))
            try:
                response = self.provider.complete(request, self.config, timeout_s=timeout_s, context=context)
            except ModelError as error:
                if error.attempts == 0:  # refused before any request was sent (no key, bad config, a rate limit)
                    call.queued_s += error.queue_s
                    error.attempts = len(call.failed) + call.extra_attempts
                    raise
                call.extra_attempts += max(0, error.attempts - 1)  # a provider that retried on its own
                call.queued_s += error.queue_s  # waiting for the model (a rate limit, its lock) before the attempt
                failure = self._failed(number, started, error, error.usage)
                call.failed.append(failure)
                retry_after = error.retry_after_s
                if not error.retryable or not self._wait(call, number, retry_after, failure):
                    error.attempts = len(call.failed) + call.extra_attempts
                    raise
                continue
            call.extra_attempts += max(0, response.attempts - 1)
            retry_defect = response.defect and policy.retry_invalid_tool_arguments
            if retry_defect and number < policy.max_attempts:
                defect = ModelError(response.defect or "", kind="invalid_tool_arguments", retryable=True)
                failure = self._failed(number, started, defect, response.usage)
                if self._wait(call, number, None, failure):
                    call.failed.append(failure)
                    continue
            response.attempts = number + call.extra_attempts
            return response

    def _failed(self, number: int, started: float, error: ModelError, usage: Usage | None) -> FailedAttempt:
        return FailedAttempt(
            attempt=number,
            kind=error.kind,
            status_code=error.status_code,
            error=str(error),
            start_s=self.recorder.clock(started),
            duration_s=time.perf_counter() - started,
            usage=usage,
        )

    def _wait(self, call: _Call, number: int, retry_after_s: float | None, failure: FailedAttempt) -> bool:
        """Sleep the backoff before attempt `number + 1`; False (no sleep) when the policy gives up."""
        policy = self.retries
        if number >= policy.max_attempts:
            return False
        if retry_after_s is not None and retry_after_s > policy.max_retry_after_s:
            return False
        wait = policy.backoff_s(number, retry_after_s)
        if time.perf_counter() + wait >= call.deadline:  # no time left for another attempt after the wait
            return False
        time.sleep(wait)
        failure.wait_s = wait
        call.backoff_s += wait
        return True

    def _price(self, usage: Usage, requests: int = 1) -> Usage:
        """The provider's cost, else the alias's price (explicitly 0: free); no tokens and a backend that bills
        nothing cost $0; an API model without a price costs an unknown amount (None), never $0. The price
        table's figure is kept beside a provider's cost (`table_cost_usd`), so the two can be compared."""
        price, known = self.config.price, usage.tokens_known
        table = price.cost(usage, requests) if price is not None and price.charges and known else None
        if usage.cost_source == "provider":
            usage.table_cost_usd = table
            return usage
        free_backend = getattr(self.provider, "bills_nothing", False)
        if table is not None:
            usage.cost_usd, usage.cost_source = table, "price_table"
        elif (known and (price is not None or not usage.total_tokens)) or free_backend:
            usage.cost_usd, usage.cost_source = 0.0, "free"  # priced at 0 explicitly, no tokens, or a free backend
        else:
            usage.cost_usd, usage.cost_source = None, "unknown"
        usage.table_cost_usd = usage.cost_usd
        return usage

    def _record(self, call: _Call, phase: Phase, response: ModelResponse | None, error: ModelError | None) -> None:
        message = response.message if response else None
        self.recorder.add(
            ModelCallStep(
                index=0,
                phase=phase,
                agent=call.agent,
                model=self.alias,
                provider=self.config.provider,
                provider_model=(response.provider_model if response else "") or self.config.model_id,
                started_at=call.started_at,
                duration_s=time.perf_counter() - call.start,
                start_s=self.recorder.clock(call.start),
                queue_s=call.queued_s + (response.queue_s if response else 0.0),  # every attempt's queueing
                usage=response.usage if response else call.paid or Usage(),
                success=error is None,
                error=str(error) if error else None,
                finish_reason=response.finish_reason if response else None,
                content=message.content if message else None,
                tool_calls=list(message.tool_calls or []) if message else [],
                attempts=response.attempts if response else (error.attempts if error else 1),
                via_http=call.via_http,
                backoff_s=call.backoff_s,
                failed_attempts=call.failed,
                generation_asked=call.asked,
                generation_sent=call.sent,
                request_options=call.options,
                logprobs=response.logprobs if response else None,
                local_tokens=call.local_tokens,
            )
        )


def local_token_count(request: ModelRequest, reply: Message) -> LocalTokenCount:
    """The tokens of a call whose provider reported none, by the stated estimate (`LocalTokenCount`): the
    text sent (messages, tool calls, tool schemas) and the text received."""
    sent = [_message_text(message) for message in request.messages]
    sent += [json.dumps(tool.model_dump()) for tool in request.tools]
    return LocalTokenCount.estimate("".join(sent), _message_text(reply))


def _message_text(message: Message) -> str:
    calls = [json.dumps(call.model_dump(mode="json")) for call in message.tool_calls or []]
    return (message.content or "") + "".join(calls)


def _with_paid_attempts(usage: Usage, failed: list[FailedAttempt]) -> Usage:
    """The call's usage with the tokens of unusable replies that were paid for (a retried defect);
    priced by the table afterwards unless the provider reported the cost."""
    for extra in (attempt.usage for attempt in failed if attempt.usage is not None):
        if extra.cost_source == "provider" and not usage.total_tokens:  # nothing else to price: keep its cost
            usage.cost_source = "provider"
        # In place (the response keeps its one Usage object); a count unknown on either side stays unknown.
        usage.input_tokens = known_sum(usage.input_tokens, extra.input_tokens)
        usage.output_tokens = known_sum(usage.output_tokens, extra.output_tokens)
        usage.reasoning_tokens = known_sum(usage.reasoning_tokens, extra.reasoning_tokens)
        usage.cached_tokens = known_sum(usage.cached_tokens, extra.cached_tokens)
        usage.cache_write_tokens = known_sum(usage.cache_write_tokens, extra.cache_write_tokens)
        usage.cost_usd = known_sum(usage.cost_usd, extra.cost_usd)
    return usage


def _paid_requests(failed: list[FailedAttempt]) -> int:
    """Failed attempts whose reply was billed (it reported usage): each a request fee."""
    return sum(1 for attempt in failed if attempt.usage is not None)


@dataclass
class _Call:
    agent: str | None
    started_at: str  # UTC, for people
    start: float  # perf_counter, for durations
    via_http: bool
    deadline: float = 0.0  # perf_counter: the call's hard deadline
    failed: list[FailedAttempt] = field(default_factory=list)
    backoff_s: float = 0.0
    queued_s: float = 0.0  # queueing of the failed attempts (a rate limit's wait), not model latency
    extra_attempts: int = 0  # attempts a provider made on its own inside one of ours (legacy providers)
    asked: dict[str, float | int] | None = None  # the sampling settings the system asked for (None: none)
    paid: Usage | None = None  # a failed call: what its failed attempts were billed
    sent: dict[str, float | int] = field(default_factory=dict)  # the sampling settings the request carried
    options: dict[str, Any] | None = None  # the request's options, as the system sent them
    local_tokens: LocalTokenCount | None = None  # the provider reported no tokens: the suite's count
