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

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .registry import Registry
from .task import ToolCall
from .trace import ModelCallStep, Phase, TraceRecorder, Usage, utc_now


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


class ModelResponse(BaseModel):
    message: Message  # role "assistant"
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    provider_model: str = ""  # the model id the provider says answered
    attempts: int = 1
    queue_s: float = 0.0  # time the call waited for the model before it ran (the local model's lock)


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_per_mtok: float = 0.0  # USD per million input tokens
    output_per_mtok: float = 0.0  # USD per million output tokens (reasoning included)

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok) / 1e6


class ModelConfig(BaseModel):
    """A model alias from configs/models.yaml (or the command line) resolved."""

    model_config = ConfigDict(extra="forbid")  # `temprature:` in an alias must not be ignored

    alias: str
    provider: str  # a registered provider name (`compare models` lists them)
    model_id: str
    base_url: str | None = None
    api_key_env: str | None = None  # the *name* of the variable holding the key; never the key
    price: Price | None = None
    context_window: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # provider-specific settings


class ModelError(Exception):
    """A model call failed after the provider's own retries."""

    def __init__(
        self, message: str, *, status_code: int | None = None, attempts: int = 1, queue_s: float = 0.0
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts
        self.queue_s = queue_s


class ModelProvider(ABC):
    """Talks to one kind of model backend. Implementations must be thread-safe."""

    name: str

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


class CallContext(BaseModel):
    """Who a call belongs to; providers may use it (the scripted test model does)."""

    task_id: str
    system: str
    model: str
    phase: Phase  # the phase the call is made in; a reply that calls an answer tool makes it GENERATE
    agent: str | None = None


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
    """A model bound to one task run: every `generate` is budget-checked, timed, priced, traced."""

    def __init__(
        self,
        config: ModelConfig,
        provider: ModelProvider,
        recorder: TraceRecorder,
        *,
        system: str,
        call_timeout_s: float = 600.0,
    ) -> None:
        self.config = config
        self.provider = provider
        self.recorder = recorder
        self.system = system
        self.call_timeout_s = call_timeout_s

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
        agent: str | None = None,
        via_http: bool = False,
    ) -> ModelResponse:
        """One model call: admitted by the budgets, timed, priced, phase-labelled and traced."""
        recorder = self.recorder
        phase = recorder.phases.before_model_call(agent, [tool.name for tool in tools or []])
        recorder.admit_model_call()
        request = ModelRequest(
            messages=messages,
            tools=tools or [],
            tool_choice=tool_choice,
            response_schema=response_schema,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
        )
        context = CallContext(
            task_id=recorder.trace.task_id, system=self.system, model=self.alias, phase=phase, agent=agent
        )
        timeout_s = max(1.0, min(self.call_timeout_s, recorder.remaining_s()))
        call = _CallTiming(agent, utc_now(), time.perf_counter(), via_http)
        try:
            response = self.provider.complete(request, self.config, timeout_s=timeout_s, context=context)
        except ModelError as error:
            self._record(call, recorder.phases.after_model_call(agent, phase, []), None, error)
            if recorder.remaining_s() <= 0:  # the call was cut short by the task's wall-time budget
                raise recorder.refuse("time_limit", f"wall-time limit reached during a model call: {error}") from error
            raise
        self._price(response.usage)
        called = [c.name for c in response.message.tool_calls or []]
        self._record(call, recorder.phases.after_model_call(agent, phase, called), response, None)
        return response

    def _price(self, usage: Usage) -> None:
        if usage.cost_source == "provider":
            return
        if self.config.price and (self.config.price.input_per_mtok or self.config.price.output_per_mtok):
            usage.cost_usd = self.config.price.cost(usage)
            usage.cost_source = "price_table"
        else:
            usage.cost_usd, usage.cost_source = 0.0, "free"

    def _record(
        self, call: _CallTiming, phase: Phase, response: ModelResponse | None, error: ModelError | None
    ) -> None:
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
                queue_s=response.queue_s if response else (error.queue_s if error else 0.0),
                usage=response.usage if response else Usage(),
                success=error is None,
                error=str(error) if error else None,
                finish_reason=response.finish_reason if response else None,
                content=message.content if message else None,
                tool_calls=list(message.tool_calls or []) if message else [],
                attempts=response.attempts if response else (error.attempts if error else 1),
                via_http=call.via_http,
            )
        )


@dataclass(frozen=True)
class _CallTiming:
    agent: str | None
    started_at: str  # UTC, for people
    start: float  # perf_counter, for durations
    via_http: bool
