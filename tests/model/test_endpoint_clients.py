"""Strict clients accept the gateway's OpenAI-compatible endpoint: the official `openai` and
`openrouter` Python clients, non-streaming and streaming, with a scripted test model behind it; and the
gateway never retries on top of the retry policy (nor lets a client do so)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openrouter import OpenRouter, components

from data_agent_compare.core import (
    CallContext,
    Message,
    MeteredModel,
    ModelConfig,
    ModelRequest,
    Trace,
    TraceRecorder,
)
from data_agent_compare.core.model import ModelProvider, RetrySettings
from data_agent_compare.core.trace import Budgets
from data_agent_compare.providers.endpoint import GatewayServer
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.scripted import ScriptedProvider, tool_call_message

from helpers import FakeOpenAIServer, error_response, text_response

SCRIPTED = ModelConfig(alias="scripted-model", provider="scripted", model_id="scripted/v1")
SQL_TOOL = {
    "type": "function",
    "function": {
        "name": "sql_query",
        "description": "Run SQL.",
        "parameters": {"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
    },
}
ASK = [{"role": "user", "content": "How many orders?"}]


def scripted_reply(request: ModelRequest, context: CallContext) -> Message:
    """Calls the SQL tool when it is offered, else answers in text."""
    if request.tools:
        return tool_call_message("sql_query", {"sql": "SELECT COUNT(*) FROM orders"}, call_id="call_1")
    return Message(role="assistant", content="There are 42 orders.")


def metered(provider: ModelProvider, config: ModelConfig = SCRIPTED, **retries: float) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model=config.alias), Budgets())
    policy = RetrySettings(base_backoff_s=0.01, max_backoff_s=0.02, **retries)
    return MeteredModel(config, provider, recorder, system="sys", retries=policy)


@pytest.fixture
def gateway() -> Iterator[GatewayServer]:
    server = GatewayServer()
    yield server
    server.stop()


@pytest.fixture
def scripted_model() -> MeteredModel:
    return metered(ScriptedProvider(scripted_reply))


# ---------------------------------------------------------------- the openai client


def test_openai_client_reads_text_and_tool_calls_with_a_scripted_model(
    gateway: GatewayServer, scripted_model: MeteredModel
) -> None:
    with gateway.open_session(scripted_model) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        text = client.chat.completions.create(model=ep.model, messages=ASK)
        calls = client.chat.completions.create(model=ep.model, messages=ASK, tools=[SQL_TOOL], tool_choice="required")

    assert text.choices[0].message.content == "There are 42 orders." and text.choices[0].finish_reason == "stop"
    assert text.usage is not None and text.usage.prompt_tokens > 0
    call = calls.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == (
        "call_1",
        "sql_query",
        {"sql": "SELECT COUNT(*) FROM orders"},
    )
    assert calls.choices[0].finish_reason == "tool_calls"


def test_openai_client_streams_text_tool_calls_and_usage_with_a_scripted_model(
    gateway: GatewayServer, scripted_model: MeteredModel
) -> None:
    with gateway.open_session(scripted_model) as ep:
        client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0)
        text_chunks = list(
            client.chat.completions.create(
                model=ep.model, messages=ASK, stream=True, stream_options={"include_usage": True}
            )
        )
        tool_chunks = list(client.chat.completions.create(model=ep.model, messages=ASK, tools=[SQL_TOOL], stream=True))

    assert "".join(c.choices[0].delta.content or "" for c in text_chunks if c.choices) == "There are 42 orders."
    assert text_chunks[-1].usage is not None and text_chunks[-1].usage.completion_tokens > 0
    deltas = [call for c in tool_chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert [(d.index, d.id, d.function.name) for d in deltas] == [(0, "call_1", "sql_query")]
    assert [c.choices[0].finish_reason for c in tool_chunks if c.choices][-1] == "tool_calls"


def test_endpoint_bodies_validate_against_the_openai_types_strictly(
    gateway: GatewayServer, scripted_model: MeteredModel
) -> None:
    with gateway.open_session(scripted_model) as ep:
        headers = {"Authorization": f"Bearer {ep.api_key}"}
        body = {"model": ep.model, "messages": ASK, "tools": [SQL_TOOL]}
        whole = httpx.post(f"{ep.base_url}/chat/completions", json=body, headers=headers, timeout=30)
        stream = httpx.post(f"{ep.base_url}/chat/completions", json={**body, "stream": True}, headers=headers)

    ChatCompletion.model_validate(whole.json(), strict=False)  # raises on a missing required field
    events = [line.removeprefix("data: ") for line in stream.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    for event in events[:-1]:
        ChatCompletionChunk.model_validate(json.loads(event))


# ---------------------------------------------------------------- the openrouter client (strict validation)


def test_openrouter_client_validates_replies_with_a_scripted_model(
    gateway: GatewayServer, scripted_model: MeteredModel
) -> None:
    with gateway.open_session(scripted_model) as ep:
        client = OpenRouter(api_key=ep.api_key, server_url=ep.base_url, retry_config=None)
        text = client.chat.send(model=ep.model, messages=ASK)
        calls = client.chat.send(model=ep.model, messages=ASK, tools=[SQL_TOOL])

    assert isinstance(text, components.ChatResult) and text.choices[0].message.content == "There are 42 orders."
    assert text.usage is not None and text.usage.prompt_tokens > 0 and text.usage.cost == 0.0
    assert isinstance(calls, components.ChatResult)
    call = calls.choices[0].message.tool_calls[0]
    expected = ("sql_query", {"sql": "SELECT COUNT(*) FROM orders"})
    assert (call.function.name, json.loads(call.function.arguments)) == expected


def test_openrouter_client_streams_with_a_scripted_model(gateway: GatewayServer, scripted_model: MeteredModel) -> None:
    with gateway.open_session(scripted_model) as ep:
        client = OpenRouter(api_key=ep.api_key, server_url=ep.base_url, retry_config=None)
        chunks = list(client.chat.send(model=ep.model, messages=ASK, stream=True))
        tool_chunks = list(client.chat.send(model=ep.model, messages=ASK, tools=[SQL_TOOL], stream=True))

    assert all(isinstance(c, components.ChatStreamChunk) for c in chunks + tool_chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "There are 42 orders."
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    calls = [call for c in tool_chunks if c.choices for call in c.choices[0].delta.tool_calls or []]
    assert [(call.index, call.function.name) for call in calls] == [(0, "sql_query")]


# ---------------------------------------------------------------- one retry policy, never two


def test_the_gateway_and_its_client_never_retry_on_top_of_the_policy(gateway: GatewayServer) -> None:
    with FakeOpenAIServer(default=error_response(503, "upstream busy")) as upstream:
        config = ModelConfig(alias="m", provider="openai-compatible", model_id="m", base_url=upstream.base_url)
        model = metered(OpenAIHTTPProvider(), config, max_attempts=2)
        with gateway.open_session(model) as ep:
            client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key)  # the client's default: 2 retries
            with pytest.raises(openai.APIStatusError) as raised:
                client.chat.completions.create(model=ep.model, messages=ASK)

    assert raised.value.status_code == 502
    (step,) = model.recorder.trace.model_calls  # one call reached the gateway
    assert step.attempts == 2 == len(upstream.requests)  # the policy's two attempts, nothing more
    assert [a.status_code for a in step.failed_attempts] == [503, 503]


def test_a_framework_call_through_the_gateway_is_retried_by_the_policy(gateway: GatewayServer) -> None:
    with FakeOpenAIServer() as upstream:
        upstream.enqueue(error_response(429, "slow down", retry_after="0"), text_response("ok"))
        config = ModelConfig(alias="m", provider="openai-compatible", model_id="m", base_url=upstream.base_url)
        model = metered(OpenAIHTTPProvider(), config)
        with gateway.open_session(model) as ep:
            reply = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key, max_retries=0).chat.completions.create(
                model=ep.model, messages=ASK
            )

    assert reply.choices[0].message.content == "ok"
    (step,) = model.recorder.trace.model_calls
    assert step.via_http and step.attempts == 2 == len(upstream.requests)
    assert step.failed_attempts[0].kind == "rate_limit"
