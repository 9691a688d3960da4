"""The HTTP providers (OpenRouter, OpenAI-compatible) against a local fake server, and the loopback gateway."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from compare.gateway_server import GatewayServer
from compare.model import (
    CallContext,
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    Price,
    ToolSpec,
)
from compare.providers.openai_http import OpenAIHTTPProvider
from compare.providers.openai_protocol import message_from_openai, message_to_openai
from compare.providers.scripted import ScriptedProvider, tool_call_message
from compare.task import ToolCall
from compare.trace import Budgets, Phase, Trace, TraceRecorder
from tests.fake_openai_server import (
    FakeOpenAIServer,
    error_in_body,
    error_response,
    load_recorded,
    text_response,
    tool_call_response,
    usage,
)

KEY = "sk-or-v1-test-0123456789abcdef"
RECORDED = load_recorded(Path(__file__).parent / "fixtures" / "openrouter_responses.jsonl")
SQL_TOOL = ToolSpec(
    name="sql_query",
    description="Run a read-only SQL query.",
    parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
)
QUESTION = [Message(role="system", content="You answer questions."), Message(role="user", content="How many orders?")]


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def openrouter(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIHTTPProvider]:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider = OpenAIHTTPProvider("openrouter", base_backoff_s=0.01)
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

    response = model.generate(QUESTION, phase=Phase.GENERATE)

    assert response.message.content == "42"
    step = model.recorder.trace.model_calls[0]
    assert (step.phase, step.model, step.provider, step.provider_model) == (
        "generate",
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
        metered(OpenAIHTTPProvider("openrouter"), gpt5(fake.base_url)).generate(QUESTION)

    assert fake.requests == []


def test_openai_compatible_with_custom_base_url_and_no_key(fake: FakeOpenAIServer) -> None:
    fake.enqueue(RECORDED["compatible_no_cost"])
    base_url = fake.base_url.replace("/api/v1", "/custom/v1")
    config = ModelConfig(
        alias="qwen", provider="openai-compatible", model_id="Qwen/Qwen2.5-7B-Instruct", base_url=base_url
    )
    model = metered(OpenAIHTTPProvider("openai-compatible"), config)

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


# ---------------------------------------------------------------- the loopback gateway


def scripted_sql(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("sql_query", {"sql": f"SELECT {len(request.messages)}"}, call_id="call_7")


def scripted_config() -> ModelConfig:
    return ModelConfig(alias="scripted-model", provider="scripted", model_id="scripted/v1")


def post(url: str, body: dict, **headers: str) -> httpx.Response:
    return httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=10)


def openai_body(messages: list[Message], tools: list[ToolSpec]) -> dict:
    return {
        "model": "anything",
        "messages": [message_to_openai(m) for m in messages],
        "tools": [{"type": "function", "function": t.model_dump()} for t in tools],
    }


def test_gateway_call_is_metered_like_the_in_process_call() -> None:
    model = metered(ScriptedProvider(scripted_sql), scripted_config())
    model.generate(QUESTION, [SQL_TOOL], phase=Phase.RETRY, agent="planner")

    with GatewayServer() as gateway:
        url = gateway.base_url(gateway.register(model))
        reply = post(
            url, openai_body(QUESTION, [SQL_TOOL]), **{"X-Compare-Phase": "retry", "X-Compare-Agent": "planner"}
        )

    assert reply.status_code == 200
    direct, via_http = model.recorder.trace.model_calls
    same = {"phase", "agent", "model", "provider", "provider_model", "usage", "success", "error", "finish_reason"}
    same |= {"tool_calls", "content", "attempts"}
    assert direct.model_dump(include=same) == via_http.model_dump(include=same)
    assert (direct.via_http, via_http.via_http) == (False, True)
    choice = reply.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"sql": "SELECT 2"}
    assert reply.json()["usage"]["prompt_tokens"] == via_http.usage.input_tokens


def test_gateway_passes_provider_usage_and_cost(fake: FakeOpenAIServer, openrouter: OpenAIHTTPProvider) -> None:
    fake.enqueue(RECORDED["deepseek_reasoning_text"])
    model = metered(openrouter, gpt5(fake.base_url))

    with GatewayServer() as gateway:
        reply = post(gateway.base_url(gateway.register(model)), openai_body(QUESTION, []))

    usage_json = reply.json()["usage"]
    assert (usage_json["prompt_tokens"], usage_json["completion_tokens"]) == (906, 152)
    assert usage_json["completion_tokens_details"] == {"reasoning_tokens": 149}
    assert usage_json["cost"] == 0.00031752
    step = model.recorder.trace.model_calls[0]
    assert step.via_http and step.usage.cost_source == "provider" and step.phase == "decision"


def test_gateway_lists_the_model_and_rejects_unknown_sessions() -> None:
    model = metered(ScriptedProvider(scripted_sql), scripted_config())
    with GatewayServer() as gateway:
        session = gateway.register(model)
        url = gateway.base_url(session)
        listed = httpx.get(f"{url}/models", timeout=10)
        unknown = post(url.replace("/s/", "/s/nope"), openai_body(QUESTION, []))
        bad_phase = post(url, openai_body(QUESTION, []), **{"X-Compare-Phase": "thinking"})
        gateway.unregister(session)
        after_unregister = httpx.get(f"{url}/models", timeout=10)

    assert [m["id"] for m in listed.json()["data"]] == ["scripted-model"]
    assert unknown.status_code == 404 and "unknown session" in unknown.json()["error"]["message"]
    assert bad_phase.status_code == 400 and model.recorder.trace.model_calls == []
    assert after_unregister.status_code == 404


def test_gateway_budget_exhaustion_stops_the_framework() -> None:
    model = metered(ScriptedProvider(scripted_sql), scripted_config(), Budgets(max_steps=1))
    with GatewayServer() as gateway:
        url = gateway.base_url(gateway.register(model))
        first, second = post(url, openai_body(QUESTION, [])), post(url, openai_body(QUESTION, []))

    assert first.status_code == 200
    assert second.status_code == 402 and second.headers["x-should-retry"] == "false"
    assert second.json()["error"]["type"] == "budget_exceeded" and second.json()["error"]["code"] == "max_steps"
    assert len(model.recorder.trace.model_calls) == 1


def test_gateway_model_error_is_a_502_and_a_failed_step() -> None:
    def failing(request: ModelRequest, context: CallContext) -> Message:
        raise ModelError("upstream exploded", status_code=503, attempts=3)

    model = metered(ScriptedProvider(failing), scripted_config())
    with GatewayServer() as gateway:
        reply = post(gateway.base_url(gateway.register(model)), openai_body(QUESTION, []))

    assert reply.status_code == 502 and "upstream exploded" in reply.json()["error"]["message"]
    step = model.recorder.trace.model_calls[0]
    assert not step.success and step.via_http and step.attempts == 3


def test_gateway_streams_a_minimal_sse_response() -> None:
    model = metered(ScriptedProvider(scripted_sql), scripted_config())
    with GatewayServer() as gateway:
        reply = post(gateway.base_url(gateway.register(model)), {**openai_body(QUESTION, [SQL_TOOL]), "stream": True})

    assert reply.headers["content-type"] == "text/event-stream"
    events = [line.removeprefix("data: ") for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "sql_query"
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"]["prompt_tokens"] == model.recorder.trace.model_calls[0].usage.input_tokens


def test_structured_output_asks_strict_mode_only_for_schemas_that_allow_it():
    from compare.providers.openai_protocol import strict_compatible

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
