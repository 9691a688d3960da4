"""The HTTP providers (OpenRouter, OpenAI-compatible) against a local fake OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from data_agent_compare.compare.model import (
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    Price,
)
from data_agent_compare.compare.task import ToolCall
from data_agent_compare.compare.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider, OpenRouterProvider
from data_agent_compare.providers.openai_protocol import message_from_openai, message_to_openai

from helpers import (
    KEY,
    QUESTION,
    RECORDED,
    SQL_TOOL,
    FakeOpenAIServer,
    error_in_body,
    error_response,
    text_response,
    tool_call_response,
    usage,
)


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def openrouter(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIHTTPProvider]:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider = OpenRouterProvider(base_backoff_s=0.01)
    yield provider
    provider.close()


def gpt5(base_url: str) -> ModelConfig:
    price = Price(input_per_mtok=1.25, output_per_mtok=10.0)
    return ModelConfig(alias="gpt-5", provider="openrouter", model_id="openai/gpt-5", base_url=base_url, price=price)


def metered(provider: ModelProvider, config: ModelConfig, budgets: Budgets | None = None, **kw: float) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model=config.alias), budgets or Budgets())
    return MeteredModel(config, provider, recorder, system="sys", **kw)


# ---------------------------------------------------------------- OpenRouter through MeteredModel


def test_tokens_reasoning_and_provider_cost_are_metered(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
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
    assert step.success and step.attempts == 1 and step.finish_reason == "stop"
    sent = fake.requests[0]
    assert sent.path == "/api/v1/chat/completions"
    assert sent.body["model"] == "openai/gpt-5" and sent.body["usage"] == {"include": True}


def test_call_duration_includes_the_server_latency(openrouter: OpenAIHTTPProvider) -> None:
    with FakeOpenAIServer(latency_s=0.3, default=text_response("ok")) as slow:
        model = metered(openrouter, gpt5(slow.base_url))
        model.generate(QUESTION)

    assert model.recorder.trace.model_calls[0].duration_s >= 0.3


def test_price_table_applies_when_provider_reports_no_cost(
    fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider
) -> None:
    fake.enqueue(text_response("42", usage_body=usage(1000, 200)))
    model = metered(openrouter, gpt5(fake.base_url))

    model.generate(QUESTION)

    step = model.recorder.trace.model_calls[0]
    assert step.usage.cost_source == "price_table"
    assert step.usage.cost_usd == pytest.approx((1000 * 1.25 + 200 * 10.0) / 1e6)


def test_tool_calls_are_parsed_and_tool_messages_serialized(
    fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider
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
    assert tool == {"role": "tool", "content": "1", "tool_call_id": "call_1", "name": "sql_query"}


def test_structured_output_sampling_and_params_reach_the_body(
    fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider
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


def test_tool_call_with_invalid_json_arguments_is_kept_raw(
    fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider
) -> None:
    fake.enqueue(tool_call_response([("call_9", "sql_query", '{"sql": "SELECT')]))

    response = metered(openrouter, gpt5(fake.base_url)).generate(QUESTION, [SQL_TOOL])

    assert response.message.tool_calls[0].arguments == {"_raw": '{"sql": "SELECT'}


def test_recorded_openrouter_tool_call_replays(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(RECORDED["gpt5_tool_call"])

    response = metered(openrouter, gpt5(fake.base_url)).generate(QUESTION, [SQL_TOOL])

    assert response.provider_model == "openai/gpt-5-2025-08-07"
    assert response.message.content is None
    assert response.message.tool_calls[0].arguments["database"] == "sales"
    assert (response.usage.reasoning_tokens, response.usage.cost_usd) == (128, 0.004055)


# ---------------------------------------------------------------- errors and retries


def test_429_is_retried_after_retry_after(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(error_response(429, "Rate limit exceeded", retry_after="0.2"), text_response("ok"))
    model = metered(openrouter, gpt5(fake.base_url))

    start = time.perf_counter()
    response = model.generate(QUESTION)

    assert time.perf_counter() - start >= 0.2
    assert response.attempts == 2 and len(fake.requests) == 2
    assert model.recorder.trace.model_calls[0].attempts == 2


def test_persistent_500_fails_after_three_attempts(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(*[error_response(500, "Internal Server Error")] * 3)
    model = metered(openrouter, gpt5(fake.base_url))

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts) == (500, 3)
    step = model.recorder.trace.model_calls[0]
    assert not step.success and step.attempts == 3 and "HTTP 500" in (step.error or "")


def test_200_with_error_body_is_retried_when_upstream_failed(
    fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider
) -> None:
    fake.enqueue(RECORDED["upstream_error_200"], RECORDED["deepseek_text"])

    response = metered(openrouter, gpt5(fake.base_url)).generate(QUESTION)

    assert response.attempts == 2 and response.usage.cost_usd == 0.00034248


def test_200_with_client_error_body_is_not_retried(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(error_in_body(400, "Invalid tool schema"))

    with pytest.raises(ModelError, match="Invalid tool schema") as raised:
        metered(openrouter, gpt5(fake.base_url)).generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts, len(fake.requests)) == (400, 1, 1)


def test_401_is_not_retried_and_the_key_never_leaks(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(error_response(401, f"Invalid API key {KEY}"))  # a server echoing the key back
    model = metered(openrouter, gpt5(fake.base_url))

    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert (raised.value.status_code, raised.value.attempts, len(fake.requests)) == (401, 1, 1)
    assert fake.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "Invalid API key" in str(raised.value) and KEY not in str(raised.value)
    assert KEY not in model.recorder.trace.model_dump_json()
    assert KEY not in repr(openrouter) and KEY not in repr(vars(openrouter))


def test_retry_never_waits_beyond_the_call_timeout(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(error_response(429, "Rate limit exceeded", retry_after="30"))
    model = metered(openrouter, gpt5(fake.base_url), call_timeout_s=1.5)

    start = time.perf_counter()
    with pytest.raises(ModelError) as raised:
        model.generate(QUESTION)

    assert time.perf_counter() - start < 1.0
    assert (raised.value.status_code, raised.value.attempts) == (429, 1)


def test_connection_errors_are_retried(openrouter: OpenAIHTTPProvider) -> None:
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
    assert (step.usage.input_tokens, step.usage.output_tokens, step.usage.cost_source) == (312, 2, "free")


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
