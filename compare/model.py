"""The model gateway: one interface for every model, every call metered.

A `ModelProvider` turns a `ModelRequest` into a `ModelResponse` (OpenRouter, any
OpenAI-compatible endpoint, the embedded llama.cpp model, a scripted test model).
`MeteredModel` wraps a provider for one task run: it checks the budgets, times the
call with a monotonic clock, prices it, and records a `ModelCallStep` in the trace.
Systems only ever see a `MeteredModel` (in process) or its HTTP twin
(`compare.gateway_server`), which goes through the same `generate`.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel, Field

from compare.task import ToolCall
from compare.trace import BudgetExceeded, ModelCallStep, Phase, TraceRecorder, Usage, utc_now

ProviderName = Literal["openrouter", "openai-compatible", "local", "scripted"]


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


class Price(BaseModel):
    input_per_mtok: float = 0.0  # USD per million input tokens
    output_per_mtok: float = 0.0  # USD per million output tokens (reasoning included)

    def cost(self, usage: Usage) -> float:
        return (usage.input_tokens * self.input_per_mtok + usage.output_tokens * self.output_per_mtok) / 1e6


class ModelConfig(BaseModel):
    """A model alias from configs/models.yaml (or the command line) resolved."""

    alias: str
    provider: ProviderName
    model_id: str
    base_url: str | None = None
    api_key_env: str | None = None  # the *name* of the variable holding the key; never the key
    price: Price | None = None
    context_window: int | None = None
    params: dict[str, Any] = Field(default_factory=dict)  # provider-specific settings


class ModelError(Exception):
    """A model call failed after the provider's own retries."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.attempts = attempts


class ModelProvider(ABC):
    """Talks to one kind of model backend. Implementations must be thread-safe."""

    name: str

    @abstractmethod
    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        """Run one chat completion. Report tokens (and cost, when the backend does)."""

    def prepare(self, config: ModelConfig) -> None:  # noqa: B027 - optional hook
        """Load what the first call would otherwise load (weights), so no call's timing includes it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (loaded weights, HTTP pools)."""


class CallContext(BaseModel):
    """Who a call belongs to; providers may use it (the scripted test model does)."""

    task_id: str
    system: str
    model: str
    phase: Phase
    agent: str | None = None


# ---------------------------------------------------------------- provider registry

_PROVIDER_FACTORIES: dict[str, Callable[[], ModelProvider]] = {}
_PROVIDER_INSTANCES: dict[str, ModelProvider] = {}
_registry_lock = threading.Lock()


def register_provider(name: str) -> Callable[[Callable[[], ModelProvider]], Callable[[], ModelProvider]]:
    def decorate(factory: Callable[[], ModelProvider]) -> Callable[[], ModelProvider]:
        _PROVIDER_FACTORIES[name] = factory
        return factory

    return decorate


def get_provider(name: str) -> ModelProvider:
    """One shared instance per provider kind (the local model loads its weights once)."""
    import compare.providers  # noqa: F401 - registers the built-in providers

    with _registry_lock:
        if name not in _PROVIDER_INSTANCES:
            if name not in _PROVIDER_FACTORIES:
                raise KeyError(f"unknown model provider {name!r}; known: {sorted(_PROVIDER_FACTORIES)}")
            _PROVIDER_INSTANCES[name] = _PROVIDER_FACTORIES[name]()
        return _PROVIDER_INSTANCES[name]


def set_provider(name: str, provider: ModelProvider) -> None:
    """Install a provider instance (tests use it for scripted models)."""
    with _registry_lock:
        _PROVIDER_INSTANCES[name] = provider


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
        phase: Phase = Phase.DECISION,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        response_schema: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
        agent: str | None = None,
        via_http: bool = False,
    ) -> ModelResponse:
        self.recorder.check_budget()
        request = ModelRequest(
            messages=messages,
            tools=tools or [],
            tool_choice=tool_choice,
            response_schema=response_schema,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
        )
        context = CallContext(
            task_id=self.recorder.trace.task_id, system=self.system, model=self.alias, phase=phase, agent=agent
        )
        timeout_s = max(1.0, min(self.call_timeout_s, self.recorder.remaining_s()))
        started_at = utc_now()
        start = time.perf_counter()
        try:
            response = self.provider.complete(request, self.config, timeout_s=timeout_s, context=context)
        except ModelError as error:
            self._record(phase, agent, started_at, time.perf_counter() - start, None, error, via_http)
            if self.recorder.remaining_s() <= 0:  # the call was cut short by the task's wall-time budget
                raise BudgetExceeded("time_limit", f"wall-time limit reached during a model call: {error}") from error
            raise
        self._price(response.usage)
        self._record(phase, agent, started_at, time.perf_counter() - start, response, None, via_http)
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
        self,
        phase: Phase,
        agent: str | None,
        started_at: str,
        duration_s: float,
        response: ModelResponse | None,
        error: ModelError | None,
        via_http: bool,
    ) -> None:
        message = response.message if response else None
        self.recorder.add(
            ModelCallStep(
                index=0,
                phase=phase,
                agent=agent,
                model=self.alias,
                provider=self.config.provider,
                provider_model=(response.provider_model if response else "") or self.config.model_id,
                started_at=started_at,
                duration_s=duration_s,
                usage=response.usage if response else Usage(),
                success=error is None,
                error=str(error) if error else None,
                finish_reason=response.finish_reason if response else None,
                content=message.content if message else None,
                tool_calls=list(message.tool_calls or []) if message else [],
                attempts=response.attempts if response else (error.attempts if error else 1),
                via_http=via_http,
            )
        )
