"""The HTTP providers (OpenRouter on its SDK, OpenAI-compatible on httpx) against a local fake
OpenAI-compatible server, through MeteredModel and its retry policy (small backoffs: tests stay fast)."""

from __future__ import annotations

import json
import random
import socket
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from data_agent_compare.core import model as model_module
from data_agent_compare.core.model import (
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    Price,
    RetrySettings,
)
from data_agent_compare.core.task import ToolCall
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openai_protocol import message_from_openai, message_to_openai
from data_agent_compare.providers.openrouter import OpenRouterProvider

from helpers import (
    KEY,
    QUESTION,
    RECORDED,
    SQL_TOOL,
    FakeOpenAIServer,
    FakeResponse,
    error_in_body,
    error_response,
    fault_response,
    text_response,
    tool_call_response,
    usage,
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


FAST = RetrySettings(max_attempts=3, base_backoff_s=0.01, max_backoff_s=0.05, read_timeout_s=2, attempt_timeout_s=5)


@pytest.fixture
def openrouter(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenRouterProvider]:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider = OpenRouterProvider()
    yield provider
    provider.close()


@pytest.fixture
def backoff_sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The waits the metered model sleeps between attempts (slept for real: the count is what a test reads)."""
    slept: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        real_sleep(seconds)

    monkeypatch.setattr(model_module, "time", SimpleNamespace(perf_counter=time.perf_counter, sleep=sleep))
    return slept


def gpt5(base_url: str) -> ModelConfig:
    price = Price(input_per_mtok=1.25, output_per_mtok=10.0)
    return ModelConfig(alias="gpt-5", provider="openrouter", model_id="openai/gpt-5", base_url=base_url, price=price)


def metered(
    provider: ModelProvider,
    config: ModelConfig,
    budgets: Budgets | None = None,
    *,
    retries: RetrySettings = FAST,
    **kw: float,
) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model=config.alias), budgets or Budgets())
    return MeteredModel(config, provider, recorder, system="sys", retries=retries, **kw)


# ---------------------------------------------------------------- OpenRouter through MeteredModel


def test_tokens_reasoning_and_provider_cost_are_metered(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(text_response("42", usage_body=usage(1200, 300, reasoning=256, cost=0.0045)))
    model = metered(openrouter, gpt5(fake.base_url))

    response = model.generate(QUESTION)

    assert response.message.content == "42"
    step = model.recorder.trace.model_calls[0]
    assert (step.phase, step.model, step.provider, step.provider_model) == (
        "decision",
        "gpt-5",
        "openrouter",
        "openai/gpt-5",
    )
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.reasoning_tokens) == (1200, 300, 256)
    assert (step.usage.cost_usd, step.usage.cost_source) == (0.0045, "provider")
    assert step.success and step.attempts == 1 and step.finish_reason == "stop" and step.failed_attempts == []
    sent = fake.requests[0]
    assert sent.path == "/api/v1/chat/completions"
    assert sent.body["model"] == "openai/gpt-5" and sent.headers["authorization"] == f"Bearer {KEY}"


def test_call_duration_includes_the_server_latency(openrouter: OpenRouterProvider) -> None:
    with FakeOpenAIServer(latency_s=0.3, default=text_response("ok")) as slow:
        model = metered(openrouter, gpt5(slow.base_url))
        model.generate(QUESTION)

    assert model.recorder.trace.model_calls[0].duration_s >= 0.3


def test_price_table_applies_when_provider_reports_no_cost(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(text_response("42", usage_body=usage(1000, 200)))
    model = metered(openrouter, gpt5(fake.base_url))

    model.generate(QUESTION)

    step = model.recorder.trace.model_calls[0]
    assert step.usage.cost_source == "price_table"
    assert step.usage.cost_usd == pytest.approx((1000 * 1.25 + 200 * 10.0) / 1e6)


def test_tool_calls_are_parsed_and_tool_messages_serialized(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(tool_call_response([("call_2", "sql_query", '{"sql": "SELECT COUNT(*) FROM orders"}')]))
    history = [
        *QUESTION,
        Message(role="assistant", tool_calls=[ToolCall(id="call_1", name="sql_query", arguments={"sql": "SELECT 1"})]),
        Message(role="tool", tool_call_id="call_1", name="sql_query", content="1"),
    ]
    model = metered(openrouter, gpt5(fake.base_url))

    response = model.generate(history, [SQL_TOOL], tool_choice="required")

    assert response.message.tool_calls == [
        ToolCall(id="call_2", name="sql_query", arguments={"sql": "SELECT COUNT(*) FROM orders"})
    ]
    assert response.message.content is None and response.finish_reason == "tool_calls"
    assert [c.name for c in model.recorder.trace.model_calls[0].tool_calls] == ["sql_query"]
    body = fake.requests[0].body
    assert body["tools"] == [{"type": "function", "function": SQL_TOOL.model_dump()}]
    assert body["tool_choice"] == "required"
    assistant, tool = body["messages"][2], body["messages"][3]
    call = assistant["tool_calls"][0]
    assert (call["id"], call["type"], call["function"]["name"]) == ("call_1", "function", "sql_query")
    assert json.loads(call["function"]["arguments"]) == {"sql": "SELECT 1"}
    assert tool == {"role": "tool", "content": "1", "tool_call_id": "call_1"}  # the SDK's schema has no name


def test_structured_output_sampling_and_params_reach_the_body(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(text_response('{"answer": "B"}'))
    config = gpt5(fake.base_url).model_copy(update={"params": {"provider": {"sort": "price"}}})
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
        "additionalProperties": False,
    }

    metered(openrouter, config).generate(QUESTION, response_schema=schema, temperature=0.0, max_output_tokens=64)

    body = fake.requests[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "response", "schema": schema, "strict": True},
    }
    assert (body["temperature"], body["max_tokens"], body["provider"]) == (0.0, 64, {"sort": "price"})
    assert "tools" not in body


def test_tool_call_arguments_that_are_not_json_are_asked_again_and_paid_for(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    broken = tool_call_response([("call_9", "sql_query", '{"sql": "SELECT')], usage_body=usage(20, 8, cost=0.001))
    fake.enqueue(broken, tool_call_response([("call_9", "sql_query", '{"sql": "SELECT 1"}')], usage_body=usage(20, 8)))
    model = metered(openrouter, gpt5(fake.base_url))

    response = model.generate(QUESTION, [SQL_TOOL])

    assert response.message.tool_calls[0].arguments == {"sql": "SELECT 1"}
    step = model.recorder.trace.model_calls[0]
    assert step.attempts == 2 and [a.kind for a in step.failed_attempts] == ["invalid_tool_arguments"]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (40, 16)  # the broken reply was paid for too


def test_tool_call_arguments_still_broken_after_the_last_attempt_are_kept_raw(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(*[tool_call_response([("call_9", "sql_query", '{"sql": "SELECT')])] * 3)
    model = metered(openrouter, gpt5(fake.base_url))

    response = model.generate(QUESTION, [SQL_TOOL])

    assert response.message.tool_calls[0].arguments == {"_raw": '{"sql": "SELECT'}
    step = model.recorder.trace.model_calls[0]
    assert step.success and step.attempts == 3 == len(fake.requests) and len(step.failed_attempts) == 2


def test_recorded_openrouter_tool_call_replays(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(RECORDED["gpt5_tool_call"])

    response = metered(openrouter, gpt5(fake.base_url)).generate(QUESTION, [SQL_TOOL])

    assert response.provider_model == "openai/gpt-5-2025-08-07"
    assert response.message.content is None
    assert response.message.tool_calls[0].arguments["database"] == "sales"
    assert (response.usage.reasoning_tokens, response.usage.cost_usd) == (128, 0.004055)


# ---------------------------------------------------------------- errors and retries


def test_429_is_retried_after_retry_after(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(error_response(429, "Rate limit exceeded", retry_after="0.2"), text_response("ok"))
    model = metered(openrouter, gpt5(fake.base_url))

    start = time.perf_counter()
    response = model.generate(QUESTION)

    assert time.perf_counter() - start >= 0.2
    assert response.attempts == 2 and len(fake.requests) == 2
    assert model.recorder.trace.model_calls[0].attempts == 2


def test_persistent_500_fails_after_the_configured_attempts(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(*[error_response(500, "Internal Server Error")] * 3)
    model = metered(openrouter, gpt5(fake.base_url))

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts) == (500, 3)
    step = model.recorder.trace.model_calls[0]
    assert not step.success and step.attempts == 3 and "HTTP 500" in (step.error or "")


def test_200_with_error_body_is_retried_when_upstream_failed(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(RECORDED["upstream_error_200"], RECORDED["deepseek_text"])

    response = metered(openrouter, gpt5(fake.base_url)).generate(QUESTION)

    assert response.attempts == 2 and response.usage.cost_usd == 0.00034248


def test_200_with_client_error_body_is_not_retried(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(error_in_body(400, "Invalid tool schema"))

    with pytest.raises(ModelError, match="Invalid tool schema") as raised:
        metered(openrouter, gpt5(fake.base_url)).generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts, len(fake.requests)) == (400, 1, 1)


def test_401_is_not_retried_and_the_key_never_leaks(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(error_response(401, f"Invalid API key {KEY}"))  # a server echoing the key back
    model = metered(openrouter, gpt5(fake.base_url))

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts, len(fake.requests)) == (401, 1, 1)
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "Invalid API key" in str(raised.value) and KEY not in str(raised.value)
    assert KEY not in model.recorder.trace.model_dump_json()
    assert KEY not in repr(openrouter) and KEY not in repr(vars(openrouter))


def test_retry_never_waits_beyond_the_call_timeout(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider, backoff_sleeps: list[float]
) -> None:
    fake.enqueue(error_response(429, "Rate limit exceeded", retry_after="30"))
    model = metered(openrouter, gpt5(fake.base_url), call_timeout_s=1.5)

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert backoff_sleeps == []  # a 30 s wait does not fit in the call's 1.5 s: given up at once, not slept
    assert (raised.value.status_code, raised.value.attempts, len(fake.requests)) == (429, 1, 1)


def test_connection_errors_are_retried(openrouter: OpenRouterProvider) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"

    with pytest.raises(ModelError, match="connection failed") as raised:
        metered(openrouter, gpt5(closed)).generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts) == (None, 3)


def test_openrouter_without_key_fails_before_any_request(
    fake: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)

    with pytest.raises(ModelError, match="OPENROUTER_API_KEY"):
        metered(OpenRouterProvider(), gpt5(fake.base_url)).generate(QUESTION)

    assert fake.requests == []


def test_openai_compatible_with_custom_base_url_and_no_key(fake: FakeOpenAIServer) -> None:
    fake.enqueue(RECORDED["compatible_no_cost"])
    base_url = fake.base_url.replace("/api/v1", "/custom/v1")
    config = ModelConfig(
        alias="qwen", provider="openai-compatible", model_id="Qwen/Qwen2.5-7B-Instruct", base_url=base_url
    )
    model = metered(OpenAIHTTPProvider(), config)

    response = model.generate(QUESTION)

    assert response.message.content == "42" and response.message.tool_calls is None
    sent = fake.requests[0]
    assert sent.path == "/custom/v1/chat/completions"
    assert "authorization" not in sent.headers and "usage" not in sent.body
    step = model.recorder.trace.model_calls[0]
    # no price in the alias and none reported by the server: the cost is unknown, never $0
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.cost_source) == (312, 2, "unknown")
    assert step.usage.cost_usd is None


def test_messages_round_trip_through_openai_json() -> None:
    messages = [
        *QUESTION,
        Message(role="assistant", content="Checking.", tool_calls=[ToolCall(id="c1", name="t", arguments={"a": [1]})]),
        Message(role="tool", tool_call_id="c1", name="t", content="done"),
    ]

    assert [message_from_openai(message_to_openai(m)) for m in messages] == messages


def test_structured_output_asks_strict_mode_only_for_schemas_that_allow_it():
    from data_agent_compare.providers.openai_protocol import strict_compatible

    closed = {
        "type": "object",
        "properties": {"verdict": {"enum": ["accept", "revise"]}, "reason": {"type": "string"}},
        "required": ["verdict", "reason"],
        "additionalProperties": False,
    }
    optional_field = {**closed, "required": ["verdict"]}
    open_object = {k: v for k, v in closed.items() if k != "additionalProperties"}
    nested = {
        "type": "object",
        "properties": {"steps": {"type": "array", "items": optional_field}},
        "required": ["steps"],
        "additionalProperties": False,
    }
    assert strict_compatible(closed)
    assert not strict_compatible(optional_field)
    assert not strict_compatible(open_object)
    assert not strict_compatible(nested)


# ---------------------------------------------------------------- incomplete replies, faults and deadlines


def compatible(base_url: str) -> ModelConfig:
    return ModelConfig(alias="qwen", provider="openai-compatible", model_id="qwen", base_url=base_url)


@pytest.fixture(params=["openrouter", "openai-compatible"])
def provider_and_config(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[ModelProvider, Callable[[str], ModelConfig]]]:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider: ModelProvider = OpenRouterProvider() if request.param == "openrouter" else OpenAIHTTPProvider()
    yield provider, gpt5 if request.param == "openrouter" else compatible
    provider.close()


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("429", "rate_limit"),
        ("500", "server_error"),
        ("no_choices", "malformed"),
        ("empty", "malformed"),
        ("invalid_json", "malformed"),
        ("reset", "connection"),
        ("hang", "timeout"),
        ("trickle", "timeout"),
    ],
)
def test_every_transient_fault_is_retried_and_recorded(
    provider_and_config: tuple[ModelProvider, Callable[[str], ModelConfig]], fault: str, kind: str
) -> None:
    provider, config = provider_and_config
    with FakeOpenAIServer() as server:
        server.enqueue(fault_response(fault), text_response("42"))
        policy = FAST.model_copy(update={"read_timeout_s": 1.0, "attempt_timeout_s": 1.5})
        model = metered(provider, config(server.base_url), retries=policy)

        response = model.generate(QUESTION)

        assert response.message.content == "42"
        step = model.recorder.trace.model_calls[0]
        assert step.success and step.attempts == 2 == len(server.requests)
        (failed,) = step.failed_attempts
        assert failed.kind == kind and failed.attempt == 1 and failed.wait_s == step.backoff_s
        assert "HTTP 200: OK" not in failed.error and KEY not in failed.error
        assert failed.duration_s < 2.0  # a hang or a trickle ends at the attempt's deadline


def test_a_trickling_server_cannot_hold_a_call_past_its_deadline(
    provider_and_config: tuple[ModelProvider, Callable[[str], ModelConfig]],
) -> None:
    provider, config = provider_and_config
    with FakeOpenAIServer(default=fault_response("trickle")) as server:
        policy = FAST.model_copy(update={"read_timeout_s": 10.0, "attempt_timeout_s": 10.0})
        model = metered(provider, config(server.base_url), retries=policy, call_timeout_s=1.5)

        start = time.perf_counter()
        with pytest.raises(ModelError, match="timed out") as raised:
            model.generate(QUESTION)
        elapsed = time.perf_counter() - start

    assert 1.5 <= elapsed < 2.5  # one byte every 0.25 s never resets the call's clock (it would take ~100 s)
    assert raised.value.retryable and raised.value.attempts == len(server.requests)


def test_backoff_is_recorded_apart_from_model_latency_and_phases_add_up(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(error_response(503, "busy", retry_after="0.3"), text_response("ok"))
    model = metered(openrouter, gpt5(fake.base_url))

    model.generate(QUESTION)

    trace = model.recorder.finish("completed")
    step = trace.model_calls[0]
    assert step.backoff_s >= 0.3 and step.failed_attempts[0].wait_s == step.backoff_s
    assert step.failed_attempts[0].status_code == 503
    assert step.model_latency_s == pytest.approx(step.duration_s - step.backoff_s)
    phases = trace.by_phase()
    assert phases["backoff"].latency_s == pytest.approx(step.backoff_s, abs=0.01)
    assert phases["decision"].latency_s == pytest.approx(step.model_latency_s, abs=0.01)
    assert sum(p.latency_s for p in phases.values()) == pytest.approx(trace.wall_time_s)
    assert (trace.retries(), trace.provider_errors(), trace.backoff_s()) == (1, 1, step.backoff_s)


def test_a_retry_after_beyond_the_ceiling_gives_up_at_once(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider, backoff_sleeps: list[float]
) -> None:
    fake.enqueue(error_response(429, "slow down", retry_after="5"))
    model = metered(openrouter, gpt5(fake.base_url), retries=FAST.model_copy(update={"max_retry_after_s": 1.0}))

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert backoff_sleeps == [] and raised.value.attempts == 1 == len(fake.requests)


def test_backoff_has_full_jitter_under_its_ceiling_and_honours_retry_after() -> None:
    policy = RetrySettings(base_backoff_s=1.0, max_backoff_s=3.0)
    rng = random.Random(7)

    third = [policy.backoff_s(3, None, rng) for _ in range(500)]  # ceiling min(3, 1 * 2**2) = 3
    first = [policy.backoff_s(1, None, rng) for _ in range(500)]

    assert 0 <= min(third) < 0.1 and 2.9 < max(third) <= 3.0  # uniform over [0, ceiling]
    assert max(first) <= 1.0
    assert min(policy.backoff_s(1, 2.5, rng) for _ in range(100)) >= 2.5  # never sooner than Retry-After


def test_the_sdk_does_not_retry_on_its_own(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    fake.enqueue(error_response(500, "boom"), text_response("never asked for"))
    model = metered(openrouter, gpt5(fake.base_url), retries=FAST.model_copy(update={"max_attempts": 1}))

    with pytest.raises(ModelError, match="HTTP 500"):
        model.generate(QUESTION)

    assert len(fake.requests) == 1  # the SDK's default would retry 5xx for up to an hour


def test_typed_usage_has_cached_tokens_and_a_reply_without_system_fingerprint_is_read(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(RECORDED["gpt5_tool_call"], RECORDED["deepseek_text"])  # deepseek's lacks system_fingerprint
    model = metered(openrouter, gpt5(fake.base_url))

    first, second = model.generate(QUESTION, [SQL_TOOL]), model.generate(QUESTION)

    assert (first.usage.cached_tokens, first.usage.reasoning_tokens, first.usage.cost_usd) == (1280, 128, 0.004055)
    assert second.message.content.startswith("The store") and second.usage.cost_usd == 0.00034248
    assert [step.attempts for step in model.recorder.trace.model_calls] == [1, 1]


def test_openrouter_base_url_comes_from_the_environment(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENROUTER_BASE_URL", fake.base_url)
    fake.enqueue(text_response("ok"))
    config = gpt5(fake.base_url).model_copy(update={"base_url": None})

    assert metered(openrouter, config).generate(QUESTION).message.content == "ok"
    assert fake.requests[0].path == "/api/v1/chat/completions"


def test_the_sdks_models_built_once_still_validate_strictly() -> None:
    from openrouter import components
    from openrouter.utils import serializers

    import data_agent_compare.providers.openrouter  # noqa: F401 - installs the once-per-type models

    complete = serializers.unmarshal_json(json.dumps(RECORDED["gpt5_tool_call"].body), components.ChatResult)
    assert complete.usage.prompt_tokens_details.cached_tokens == 1280
    with pytest.raises(ValueError, match="system_fingerprint"):  # pydantic's ValidationError, as without the cache
        serializers.unmarshal_json(json.dumps(RECORDED["deepseek_text"].body), components.ChatResult)


def test_prepare_warms_the_sdk_without_a_request(fake: FakeOpenAIServer, openrouter: OpenRouterProvider) -> None:
    config = gpt5(fake.base_url)

    openrouter.prepare(config)

    assert fake.requests == []
    fake.enqueue(text_response("ok"))
    assert metered(openrouter, config).generate(QUESTION).message.content == "ok"


def test_a_proxy_from_the_environment_is_used_and_keeps_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer(default=fault_response("trickle")) as proxy:  # answers as the proxy, trickling
        monkeypatch.setenv("HTTP_PROXY", proxy.base_url.removesuffix("/api/v1"))
        monkeypatch.setenv("NO_PROXY", "")
        provider = OpenAIHTTPProvider()  # reads the environment when its client is made
        model = metered(provider, compatible("http://upstream.invalid/v1"), call_timeout_s=1.2)

        start = time.perf_counter()
        with pytest.raises(ModelError, match="timed out"):
            model.generate(QUESTION)

    assert time.perf_counter() - start < 2.0
    assert proxy.requests[0].path == "http://upstream.invalid/v1/chat/completions"  # sent through the proxy
    provider.close()


def test_a_misspelt_provider_param_fails_once_without_a_request(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    config = gpt5(fake.base_url).model_copy(update={"params": {"temprature": 0.2}})

    with pytest.raises(ModelError, match="temprature") as raised:
        metered(openrouter, config).generate(QUESTION)

    assert raised.value.attempts == 0 and not raised.value.retryable and fake.requests == []  # nothing was sent


def test_a_garbled_reply_echoing_the_key_never_puts_it_in_the_trace(
    fake: FakeOpenAIServer, openrouter: OpenRouterProvider
) -> None:
    fake.enqueue(FakeResponse(f"<html>proxy error for Bearer {KEY}"), text_response("ok"))
    model = metered(openrouter, gpt5(fake.base_url))

    model.generate(QUESTION)

    (failed,) = model.recorder.trace.model_calls[0].failed_attempts
    assert failed.kind == "malformed" and "Bearer ***" in failed.error
    assert KEY not in model.recorder.trace.model_dump_json()
