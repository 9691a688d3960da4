"""The gateway as an OpenAI-compatible endpoint on loopback: metered like in-process calls, keyed per
session, refusing calls past a budget, and accounting parallel calls of one task honestly."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from data_agent_compare.core import (
    Answer,
    Budgets,
    CallContext,
    Endpoint,
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    RunContext,
    System,
    Task,
    ToolSpec,
    Trace,
    TraceRecorder,
)
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.endpoint import GatewayServer
from data_agent_compare.providers.openai_protocol import message_to_openai
from data_agent_compare.providers.openrouter import OpenRouterProvider
from data_agent_compare.providers.scripted import ScriptedProvider, tool_call_message

from helpers import (
    KEY,
    QUESTION,
    RECORDED,
    SQL_TOOL,
    FakeOpenAIServer,
    load_tasks,
    make_plan,
    registered_system,
)

CONFIG = ModelConfig(alias="scripted-model", provider="scripted", model_id="scripted/v1")


def scripted_sql(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("sql_query", {"sql": f"SELECT {len(request.messages)}"}, call_id="call_7")


def metered(provider: ModelProvider, config: ModelConfig = CONFIG, budgets: Budgets | None = None) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model=config.alias), budgets or Budgets())
    return MeteredModel(config, provider, recorder, system="sys")


def post(endpoint: Endpoint, body: dict, *, key: str | None = None, **headers: str) -> httpx.Response:
    headers["Authorization"] = f"Bearer {endpoint.api_key if key is None else key}"
    return httpx.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers, timeout=30)


def openai_body(messages: list[Message], tools: list[ToolSpec]) -> dict:
    return {
        "model": "anything",
        "messages": [message_to_openai(m) for m in messages],
        "tools": [{"type": "function", "function": t.model_dump()} for t in tools],
    }


@pytest.fixture
def gateway() -> Iterator[GatewayServer]:
    server = GatewayServer()
    yield server
    server.stop()


def test_gateway_call_is_metered_like_the_in_process_call(gateway: GatewayServer) -> None:
    model = metered(ScriptedProvider(scripted_sql))
    model.generate(QUESTION, [SQL_TOOL], agent="planner")

    with gateway.open_session(model) as endpoint:
        reply = post(endpoint, openai_body(QUESTION, [SQL_TOOL]), **{"X-Compare-Agent": "planner"})

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


def test_gateway_passes_provider_usage_and_cost(monkeypatch: pytest.MonkeyPatch, gateway: GatewayServer) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    config = ModelConfig(alias="deepseek", provider="openrouter", model_id="deepseek/deepseek-v3.2")
    with FakeOpenAIServer() as fake:
        fake.enqueue(RECORDED["deepseek_reasoning_text"])
        model = metered(OpenRouterProvider(), config.model_copy(update={"base_url": fake.base_url}))
        with gateway.open_session(model) as endpoint:
            reply = post(endpoint, openai_body(QUESTION, []))

    usage_json = reply.json()["usage"]
    assert (usage_json["prompt_tokens"], usage_json["completion_tokens"]) == (906, 152)
    assert usage_json["completion_tokens_details"] == {"reasoning_tokens": 149}
    assert usage_json["cost"] == 0.00031752
    step = model.recorder.trace.model_calls[0]
    assert step.via_http and step.usage.cost_source == "provider" and step.phase == "decision"


def test_a_session_answers_only_to_its_key_and_ends_with_its_block(gateway: GatewayServer) -> None:
    model = metered(ScriptedProvider(scripted_sql))
    with gateway.open_session(model) as endpoint:
        listed = httpx.get(f"{endpoint.base_url}/models", headers={"Authorization": f"Bearer {endpoint.api_key}"})
        no_key = httpx.post(f"{endpoint.base_url}/chat/completions", json=openai_body(QUESTION, []))
        wrong_key = post(endpoint, openai_body(QUESTION, []), key="sk-someone-else")
        unknown = post(Endpoint(endpoint.base_url.replace("/s/", "/s/x"), endpoint.api_key, endpoint.model), {})
    after = post(endpoint, openai_body(QUESTION, []))

    assert [m["id"] for m in listed.json()["data"]] == ["scripted-model"]
    assert no_key.status_code == 401 and wrong_key.status_code == 401
    assert "invalid API key" in wrong_key.json()["error"]["message"]
    assert unknown.status_code == 404 and "unknown session" in unknown.json()["error"]["message"]
    assert after.status_code == 404  # the session ended with its block
    assert model.recorder.trace.model_calls == []


def test_budget_refusal_is_a_402_that_clients_do_not_retry(gateway: GatewayServer) -> None:
    model = metered(ScriptedProvider(scripted_sql), budgets=Budgets(max_steps=1))
    with gateway.open_session(model) as endpoint:
        first, second = post(endpoint, openai_body(QUESTION, [])), post(endpoint, openai_body(QUESTION, []))

    assert first.status_code == 200
    assert second.status_code == 402 and second.headers["x-should-retry"] == "false"
    error = second.json()["error"]
    assert error["type"] == "budget_exceeded" and error["code"] == "max_steps"
    assert "step limit of 1 model calls" in error["message"]
    assert len(model.recorder.trace.model_calls) == 1
    assert model.recorder.stopped_by is not None and model.recorder.stopped_by.status == "max_steps"


def test_model_error_is_a_502_and_a_failed_step(gateway: GatewayServer) -> None:
    def failing(request: ModelRequest, context: CallContext) -> Message:
        raise ModelError("upstream exploded", status_code=503, attempts=3)

    model = metered(ScriptedProvider(failing))
    with gateway.open_session(model) as endpoint:
        reply = post(endpoint, openai_body(QUESTION, []))

    assert reply.status_code == 502 and "upstream exploded" in reply.json()["error"]["message"]
    step = model.recorder.trace.model_calls[0]
    assert not step.success and step.via_http and step.attempts == 3


def test_stream_is_a_minimal_sse_response(gateway: GatewayServer) -> None:
    model = metered(ScriptedProvider(scripted_sql))
    with gateway.open_session(model) as endpoint:
        reply = post(endpoint, {**openai_body(QUESTION, [SQL_TOOL]), "stream": True})

    assert reply.headers["content-type"] == "text/event-stream"
    events = [line.removeprefix("data: ") for line in reply.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] == "sql_query"
    assert chunks[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[2]["usage"]["prompt_tokens"] == model.recorder.trace.model_calls[0].usage.input_tokens


# ---------------------------------------------------------------- parallel calls of one task

CALL_S = 0.4  # each scripted model call sleeps this long
ADMITTED = 3  # max_steps of the task
FIRED = ADMITTED + 5  # calls sent at once


def slow_answer(request: ModelRequest, context: CallContext) -> Message:
    time.sleep(CALL_S)
    return Message(role="assistant", content="42")


class ParallelCallsSystem(System):
    """A test system standing in for a framework that sends all its model calls at once."""

    name = "test_parallel_calls"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        with ctx.openai_endpoint() as endpoint, ThreadPoolExecutor(max_workers=FIRED) as pool:
            replies = list(pool.map(lambda _: post(endpoint, openai_body(QUESTION, [])), range(FIRED)))
        statuses = sorted(reply.status_code for reply in replies)
        return ctx.answer_from_text(json.dumps(statuses))


@pytest.fixture
def parallel_system() -> Iterator[type[System]]:
    with registered_system(ParallelCallsSystem) as cls:
        yield cls


def test_parallel_calls_admit_exactly_the_step_budget_and_count_each_instant_once(
    tmp_path, scripted_model, parallel_system
) -> None:
    """N+5 simultaneous calls through the endpoint, max_steps=N: N admitted, 5 refused with 402, the
    task ends `max_steps`; the phases of the overlapping calls add up to no more than the wall time."""
    task = next(t for t in load_tasks("bundled") if t.question_type == "factoid")
    model = scripted_model(slow_answer)
    plan = make_plan(tmp_path, [task], model, [ParallelCallsSystem.name], budgets=Budgets(max_steps=ADMITTED))
    execute(plan)

    run = read_run(plan.run_dir)
    (record,) = run.records
    assert json.loads(record.answer["text"]) == [200] * ADMITTED + [402] * (FIRED - ADMITTED)
    assert record.status == "max_steps" and "step limit of 3" in record.error
    trace = run.trace(record)
    assert len(trace.model_calls) == ADMITTED and all(step.via_http for step in trace.model_calls)
    busy = sum(step.duration_s for step in trace.model_calls)
    phases = {name: totals.latency_s for name, totals in record.latency_by_phase.items()}
    assert busy >= ADMITTED * CALL_S  # the calls overlapped: their durations add up past the wall time
    assert sum(phases.values()) == pytest.approx(record.latency_s, abs=1e-6)
    assert phases["decision"] <= record.latency_s < busy


def test_local_provider_reports_waiting_for_the_model_as_queueing_with_generation_stubbed(monkeypatch) -> None:
    """The embedded model runs one call at a time: the second of two simultaneous calls waits for the
    first, and that wait is recorded as queueing, not as the call's own latency. (llama.cpp's generation
    is replaced by a sleep here; the lock and the accounting are the real ones.)"""
    from data_agent_compare.core.model import ModelResponse
    from data_agent_compare.providers import local

    def generate(llama, request, config, deadline, pace) -> ModelResponse:
        time.sleep(CALL_S)
        return ModelResponse(message=Message(role="assistant", content="42"))

    monkeypatch.setattr(local, "_generate", generate)
    provider = local.LocalLlamaProvider()
    monkeypatch.setattr(provider, "_load", lambda config: None)
    model = metered(provider, ModelConfig(alias="local", provider="local", model_id="gemma"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda _: model.generate(QUESTION), range(2)))
    model.recorder.finish("completed")

    first, second = sorted(model.recorder.trace.model_calls, key=lambda step: step.queue_s)
    assert first.queue_s < 0.05 and second.queue_s >= CALL_S * 0.9
    assert second.duration_s >= 2 * CALL_S * 0.95  # its wait is part of its duration, and marked as queueing
    # While the first call runs, the second waits: that stretch is shared by both buckets (each
    # instant counts once), then the second call runs alone.
    phases = model.recorder.trace.by_phase()
    assert phases["queue"].latency_s == pytest.approx(CALL_S / 2, abs=0.05)
    assert phases["decision"].latency_s == pytest.approx(1.5 * CALL_S, abs=0.1)
    assert sum(totals.latency_s for totals in phases.values()) == pytest.approx(model.recorder.trace.wall_time_s)
