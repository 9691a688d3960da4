"""The embedded Gemma 3 270M: grammar-constrained tool calls and structured output (slow: real weights)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import jsonschema
import pytest

from data_agent_compare.core.model import (
    CallContext,
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelRequest,
    RetrySettings,
    ToolSpec,
)
from data_agent_compare.core.task import ToolCall
from data_agent_compare.core.trace import Budgets, Phase, Trace, TraceRecorder
from data_agent_compare.providers.local import Block, LocalLlamaProvider, fit_prompt, output_schema
from data_agent_compare.providers.scripted import ScriptedProvider

TOOLS = [
    ToolSpec(
        name="sql_query",
        description="Run a read-only SQL query against a database and return the rows.",
        parameters={
            "type": "object",
            "properties": {"database": {"type": "string", "enum": ["sales", "hr"]}, "sql": {"type": "string"}},
            "required": ["database", "sql"],
        },
    ),
    ToolSpec(
        name="list_tables",
        description="List the tables of a database.",
        parameters={"type": "object", "properties": {"database": {"type": "string"}}, "required": ["database"]},
    ),
]
QUESTION = [
    Message(role="system", content="You answer questions about the sales and hr databases."),
    Message(role="user", content="How many orders were placed in 2023?"),
]


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalLlamaProvider]:
    local = LocalLlamaProvider()
    yield local
    local.close()


def metered(provider: LocalLlamaProvider, **params: int) -> MeteredModel:
    config = ModelConfig(alias="gemma-3-270m", provider="local", model_id="gemma-3-270m", params=params)
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model=config.alias), Budgets())
    return MeteredModel(config, provider, recorder, system="sys")


@pytest.mark.slow
def test_tool_call_is_valid_against_the_tool_schema(provider: LocalLlamaProvider) -> None:
    model = metered(provider)

    response = model.generate(QUESTION, TOOLS, tool_choice="required", max_output_tokens=160)

    [call] = response.message.tool_calls or []
    jsonschema.validate(call.arguments, next(t.parameters for t in TOOLS if t.name == call.name))
    assert call.id == "call_0" and response.finish_reason == "tool_calls"
    step = model.recorder.trace.model_calls[0]
    assert step.success and step.provider == "local" and step.phase == Phase.DECISION
    assert step.usage.input_tokens > 50 and step.usage.output_tokens > 5 and step.usage.cost_source == "free"


@pytest.mark.slow
def test_response_schema_output_is_valid_json(provider: LocalLlamaProvider) -> None:
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "string", "enum": ["A", "B", "C", "D"]},
            "confidence": {"type": "number"},
            "reasons": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["answer", "confidence", "reasons"],
    }
    question = [Message(role="user", content="Which table holds customer addresses? A) orders B) customers")]

    response = metered(provider).generate(question, response_schema=schema, max_output_tokens=128)

    jsonschema.validate(json.loads(response.message.content or ""), schema)


@pytest.mark.slow
def test_long_tool_results_are_elided_to_fit_the_window(provider: LocalLlamaProvider) -> None:
    rows = "\n".join(f"{i}, order {i}, 2023-01-{i % 28 + 1:02d}, {i * 3.5}" for i in range(400))
    history = [
        *QUESTION,
        Message(role="assistant", tool_calls=[ToolCall(id="call_0", name="sql_query", arguments={"sql": "SELECT *"})]),
        Message(role="tool", tool_call_id="call_0", name="sql_query", content=rows),
    ]

    response = metered(provider, n_ctx=1024).generate(history, TOOLS, max_output_tokens=64)

    assert response.usage.input_tokens <= 1024 - 64


def test_fit_prompt_elides_oldest_tool_results_before_dropping_turns() -> None:
    blocks = [
        Block("S" * 10, protected=True),
        Block("Q" * 10, protected=True),
        Block("R1" * 20, elided="R1 gone"),
        Block("A" * 10),
        Block("R2" * 20, elided="R2 gone"),
    ]

    assert fit_prompt(blocks, len, 90) == "S" * 10 + "Q" * 10 + "R1 gone" + "A" * 10 + "R2" * 20 + "Assistant:"
    assert fit_prompt(blocks, len, 40) == "S" * 10 + "Q" * 10 + "R2 gone" + "Assistant:"


def test_output_schema_offers_tools_and_a_final_answer_with_bounded_strings() -> None:
    schema = output_schema(ModelRequest(messages=QUESTION, tools=TOOLS))

    options = schema["oneOf"] if schema else []
    assert [o["properties"].get("tool", {}).get("const") for o in options] == ["sql_query", "list_tables", None]
    assert options[0]["properties"]["arguments"]["properties"]["sql"]["maxLength"] > 0
    assert "maxLength" not in options[0]["properties"]["arguments"]["properties"]["database"]  # an enum
    required_only = output_schema(ModelRequest(messages=QUESTION, tools=TOOLS, tool_choice="required"))
    assert len(required_only["oneOf"] if required_only else []) == 2


@pytest.mark.slow
def test_a_small_token_budget_still_yields_complete_json(provider: LocalLlamaProvider) -> None:
    schema = {
        "type": "object",
        "properties": {"story": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["story", "n"],
    }
    question = [Message(role="user", content="Write a long story about a fox.")]

    response = metered(provider).generate(question, response_schema=schema, max_output_tokens=24)

    jsonschema.validate(json.loads(response.message.content or ""), schema)
    assert response.usage.output_tokens <= 24


@pytest.mark.slow
def test_generation_stops_at_the_deadline(provider: LocalLlamaProvider) -> None:
    config = ModelConfig(alias="gemma-3-270m", provider="local", model_id="gemma-3-270m")
    context = CallContext(task_id="t1", system="sys", model=config.alias, phase=Phase.DECISION)
    request = ModelRequest(messages=QUESTION, tools=TOOLS)

    with pytest.raises(ModelError, match="ran past the call's deadline"):
        provider.complete(request, config, timeout_s=0.01, context=context)


def test_scripted_backend_that_cannot_hang_gets_the_tasks_time_not_the_attempt_or_call_timeout() -> None:
    """The per-attempt and per-call deadlines guard against a hanging network peer; the embedded model cannot
    hang, and on a busy machine one of its calls may outlast both while the task still has time."""
    given: list[float] = []

    class Remote(ScriptedProvider):
        def complete(self, request, config, *, timeout_s, context):  # type: ignore[no-untyped-def]
            given.append(timeout_s)
            return super().complete(request, config, timeout_s=timeout_s, context=context)

    class Embedded(Remote):
        attempt_deadline = False

    retries = RetrySettings(attempt_timeout_s=2.0, call_timeout_s=50.0)
    for provider in (Remote(reply_text), Embedded(reply_text)):
        config = ModelConfig(alias="scripted", provider="scripted", model_id="scripted-test-model")
        trace = TraceRecorder(Trace(task_id="t", system="s", model="scripted"), Budgets(wall_time_s=100.0))
        model = MeteredModel(config, provider, trace, system="s", retries=retries)
        model.generate([Message(role="user", content="hi")])
    assert given == [pytest.approx(2.0, abs=0.5), pytest.approx(100.0, abs=0.5)]  # the task's wall time
    assert LocalLlamaProvider.attempt_deadline is False


def reply_text(request: ModelRequest, context: CallContext) -> Message:
    return Message(role="assistant", content="an answer")
