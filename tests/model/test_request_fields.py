"""Requests as the agent sent them, less only what the run governs (issue 35): every chat-completions field the
gateway does not govern reaches the provider unchanged (a local OpenAI-compatible server, OpenRouter's SDK), or
is refused with HTTP 400 naming it when the provider cannot take it (the embedded model), before anything is
sent; the generation settings the run overrides are recorded per call; cache and replay keys of requests
without such fields are what they were."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from data_agent_compare.core import (
    Budgets,
    CallContext,
    Endpoint,
    Message,
    MeteredModel,
    ModelConfig,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    Trace,
    TraceRecorder,
)
from data_agent_compare.core.model import FieldRefused, GenerationSettings
from data_agent_compare.providers import local
from data_agent_compare.providers.cache import request_key
from data_agent_compare.providers.endpoint import GatewayServer
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openrouter import OpenRouterProvider
from data_agent_compare.providers.scripted import ScriptedProvider

from helpers import KEY, QUESTION, RECORDED, SCRIPTED, SQL_TOOL, FakeOpenAIServer, FakeResponse, usage

LOGPROBS = {"content": [{"token": "42", "logprob": -0.01, "bytes": [52, 50], "top_logprobs": []}]}
# Fields no run governs, each with a value that asks for something.
UNGOVERNED: dict[str, Any] = {
    "stop": ["\nObservation:"],
    "response_format": {
        "type": "json_schema",
        "json_schema": {"name": "verdict", "strict": True, "schema": {"type": "object", "properties": {}}},
    },
    "tool_choice": {"type": "function", "function": {"name": "sql_query"}},
    "parallel_tool_calls": False,
    "logprobs": True,
    "top_logprobs": 2,
    "user": "agent-7",
    "metadata": {"purpose": "test"},
    "presence_penalty": 0.5,
    "frequency_penalty": 0.25,
    "logit_bias": {"50256": -100},
    "reasoning_effort": "low",
}


def metered(provider: ModelProvider, config: ModelConfig, generation: GenerationSettings | None = None) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t", system="s", model=config.alias), Budgets(max_steps=20))
    return MeteredModel(config, provider, recorder, system="s", generation=generation)


def chat(endpoint: Endpoint, **fields: Any) -> httpx.Response:
    body = {
        "model": "whatever-the-agent-thinks",
        "messages": [{"role": "user", "content": "How many orders?"}],
        "tools": [{"type": "function", "function": SQL_TOOL.model_dump()}],
        **fields,
    }
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    return httpx.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers, timeout=30)


@pytest.fixture
def gateway() -> Iterator[GatewayServer]:
    server = GatewayServer()
    yield server
    server.stop()


def with_logprobs(text: str) -> FakeResponse:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    body = {"id": "c1", "object": "chat.completion", "created": 1, "model": "vendor/model", "usage": usage(9, 1)}
    return FakeResponse({**body, "choices": [{**choice, "logprobs": LOGPROBS}]})


def test_ungoverned_fields_reach_a_local_openai_compatible_server_unchanged_and_the_overrides_are_recorded(
    gateway,
) -> None:
    with FakeOpenAIServer() as fake:
        fake.enqueue(with_logprobs("42"))
        config = ModelConfig(
            alias="compat", provider="openai-compatible", model_id="vendor/model", base_url=fake.base_url
        )
        model = metered(OpenAIHTTPProvider(), config, GenerationSettings(temperature=0.3))
        with gateway.open_session(model) as endpoint:
            reply = chat(endpoint, temperature=0.9, stream_options={"include_usage": True}, **UNGOVERNED)

    assert reply.status_code == 200, reply.text
    (sent,) = [request.body for request in fake.requests]
    assert {name: sent.get(name) for name in UNGOVERNED} == UNGOVERNED  # each as the agent sent it
    assert sent["model"] == "vendor/model" and sent["temperature"] == 0.3  # the run's model and setting
    assert "stream_options" not in sent and "stream" not in sent  # the gateway answers the reply's form
    assert reply.json()["choices"][0]["logprobs"] == LOGPROBS  # what the request asked for comes back
    (step,) = model.recorder.trace.model_calls
    assert step.request_options == UNGOVERNED
    assert (step.generation_asked, step.generation_sent) == ({"temperature": 0.9}, {"temperature": 0.3})
    assert step.logprobs == LOGPROBS


def test_ungoverned_fields_reach_openrouter_through_its_sdk_and_a_field_it_lacks_is_a_400_naming_it(
    monkeypatch: pytest.MonkeyPatch, gateway
) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    taken = {name: UNGOVERNED[name] for name in ("stop", "tool_choice", "user", "logprobs", "reasoning_effort")}
    with FakeOpenAIServer() as fake:
        fake.enqueue(RECORDED["deepseek_reasoning_text"])
        config = ModelConfig(
            alias="ds", provider="openrouter", model_id="deepseek/deepseek-v3.2", base_url=fake.base_url
        )
        model = metered(OpenRouterProvider(), config)
        with gateway.open_session(model) as endpoint:
            reply = chat(endpoint, n=1, **taken)  # n at its default asks for nothing: the SDK has no such field
            lacking = chat(endpoint, top_k=5, frobnicate=True)
            several = chat(endpoint, n=2)

    assert reply.status_code == 200, reply.text
    (sent,) = [request.body for request in fake.requests]  # the refused requests sent nothing
    assert {name: sent.get(name) for name in taken} == taken
    assert lacking.status_code == 400 and lacking.json()["error"]["param"] == "frobnicate"
    assert "frobnicate" in lacking.json()["error"]["message"]
    assert several.status_code == 400 and several.json()["error"]["param"] == "n"
    assert len(model.recorder.trace.model_calls) == 1


@pytest.mark.parametrize(
    ("field", "value"), [("models", ["openai/gpt-5"]), ("plugins", [{"id": "web"}]), ("functions", [{"name": "f"}])]
)
def test_a_field_that_would_step_outside_the_run_is_refused_for_every_provider(gateway, field, value) -> None:
    asked: list[ModelRequest] = []
    model = metered(
        ScriptedProvider(lambda request, context: asked.append(request) or Message(role="assistant")), SCRIPTED
    )
    with gateway.open_session(model) as endpoint:
        reply = chat(endpoint, **{field: value})

    assert reply.status_code == 400 and reply.json()["error"]["param"] == field
    assert asked == [] and model.recorder.trace.model_calls == []


def test_the_scripted_test_model_sees_every_ungoverned_field_through_the_gateway(gateway) -> None:
    asked: list[ModelRequest] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        asked.append(request)
        return Message(role="assistant", content="42")

    with gateway.open_session(metered(ScriptedProvider(respond), SCRIPTED)) as endpoint:
        assert chat(endpoint, **UNGOVERNED).status_code == 200

    (request,) = asked
    assert request.options == UNGOVERNED
    assert request.tool_choice == "required" and request.response_schema == {"type": "object", "properties": {}}


# ---------------------------------------------------------------- the embedded model


@pytest.fixture
def embedded(monkeypatch: pytest.MonkeyPatch) -> tuple[MeteredModel, list[ModelRequest]]:
    """The embedded model's provider with llama.cpp's generation stubbed: what reaches it is recorded."""
    generated: list[ModelRequest] = []

    def generate(llama, request, config, deadline, pace) -> ModelResponse:
        generated.append(request)
        return ModelResponse(message=Message(role="assistant", content="42"))

    monkeypatch.setattr(local, "_generate", generate)
    provider = local.LocalLlamaProvider()
    monkeypatch.setattr(provider, "_load", lambda config: None)
    return metered(provider, ModelConfig(alias="local", provider="local", model_id="gemma")), generated


@pytest.mark.parametrize(
    ("field", "value"),
    [("logprobs", True), ("presence_penalty", 0.7), ("logit_bias", {"1": 5}), ("reasoning_effort", "high")],
)
def test_a_field_the_embedded_model_cannot_take_is_refused_with_400_naming_it_before_anything_runs(
    gateway, embedded, field, value
) -> None:
    model, generated = embedded
    with gateway.open_session(model) as endpoint:
        reply = chat(endpoint, **{field: value})

    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == field and error["code"] == "unsupported_parameter" and field in error["message"]
    assert generated == [] and model.recorder.trace.model_calls == []  # no step admitted, no budget spent
    assert [w.code for w in model.recorder.trace.warnings] == ["request_field_refused"]


def test_the_embedded_model_takes_what_it_honours_and_fields_at_their_defaults(gateway, embedded) -> None:
    model, generated = embedded
    fields = {"stop": ["\nUser:"], "user": "u1", "parallel_tool_calls": False, "logprobs": False, "n": 1}
    with gateway.open_session(model) as endpoint:
        reply = chat(endpoint, **fields)

    assert reply.status_code == 200, reply.text
    assert generated[0].options == fields


class StubLlama:
    """llama.cpp's completion stubbed: what a generation is asked for is kept."""

    model_path = "gemma.gguf"

    def __init__(self) -> None:
        self.asked: dict[str, Any] = {}

    def n_ctx(self) -> int:
        return 8192

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def create_completion(self, prompt: str, **asked: Any) -> dict[str, Any]:
        self.asked = asked
        return {
            "choices": [{"text": "Thought: done", "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 3},
        }


def test_the_embedded_model_stops_at_the_requests_stop_strings_with_llama_stubbed() -> None:
    llama = StubLlama()
    request = ModelRequest(messages=QUESTION, options={"stop": "\nObservation:"})
    local._generate(llama, request, ModelConfig(alias="local", provider="local", model_id="g"), 1e12, local.Pace())

    assert llama.asked["stop"] == [*local.STOP_SEQUENCES, "\nObservation:"]


def test_the_embedded_models_grammar_allows_only_the_named_function() -> None:
    other = SQL_TOOL.model_copy(update={"name": "list_tables"})
    named = {"tool_choice": {"type": "function", "function": {"name": "list_tables"}}}
    request = ModelRequest(messages=QUESTION, tools=[SQL_TOOL, other], tool_choice="required", options=named)

    schema = local.output_schema(request)

    assert [option["properties"]["tool"] for option in schema["oneOf"]] == [{"const": "list_tables"}]
    missing = request.model_copy(update={"options": {"tool_choice": {"type": "function", "function": {"name": "x"}}}})
    with pytest.raises(FieldRefused, match="not among the request's tools"):
        local.output_schema(missing)


# ---------------------------------------------------------------- cache and replay keys

# Computed by the suite before request options existed (commit 3200b57): recorded runs' keys must stay these.
KEY_WITH_TOOLS = "fc6b45496c66848b63c65436aa4dbb72323fe9eea1b3105f30feadf78c7eaf4d"
KEY_PLAIN = "865e36dcb644d70f6cac4a2cb7d6e22010a4b9e8659b2347178f62f6d11258e8"


def test_request_keys_without_fields_asking_for_something_are_the_recorded_runs_keys() -> None:
    with_tools = ModelRequest(messages=QUESTION, tools=[SQL_TOOL], temperature=0.2, seed=7)
    plain = ModelRequest(messages=QUESTION)
    defaults = {"logprobs": False, "n": 1, "stop": None, "parallel_tool_calls": True, "presence_penalty": 0.0}

    assert request_key(with_tools, SCRIPTED) == KEY_WITH_TOOLS
    assert request_key(plain, SCRIPTED) == KEY_PLAIN
    assert request_key(plain.model_copy(update={"options": defaults}), SCRIPTED) == KEY_PLAIN
    stopped = plain.model_copy(update={"options": {**defaults, "stop": ["\n"]}})
    assert request_key(stopped, SCRIPTED) != KEY_PLAIN  # a stop string asks for something: another request
