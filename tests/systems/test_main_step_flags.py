"""A RAG system's main step that did not happen is flagged (issue 25 item 5): on a DABstep task, which has no
corpus, rag_naive, rag_graph and rag_hippo only call `answer` with a scripted model — retrieval is never
called — and the record says so (`no_retrieval`); it used to carry no warning. An entity graph built with one
of its extraction calls failed (a scripted server answering 500 to one text unit) is a `partial_failure`
warning on the record that used it, not only a line of the manifest (issue 25 item 2)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from data_agent_compare.core import CallContext, Message, ModelConfig, ModelRequest
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.openai_protocol import request_from_openai
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.systems.rag_graph import EXTRACT_SYSTEM

from helpers import (
    FIXTURES,
    FakeOpenAIServer,
    FakeResponse,
    RecordedRequest,
    error_response,
    load_tasks,
    make_plan,
    text_response,
    tool_call_response,
)


def answers_at_once(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("answer", {"answer": "NL"})


@pytest.mark.parametrize("system", ["rag_naive", "rag_graph", "rag_hippo"])
def test_a_rag_system_that_only_answers_a_dabstep_task_says_it_retrieved_nothing(tmp_path, scripted_model, system):
    task = load_tasks("dabstep", FIXTURES / "dabstep")[0]
    plan = make_plan(tmp_path, [task], scripted_model(answers_at_once), [system], tools={"cache_dir": str(tmp_path)})
    execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert [c.tool for c in record.tool_calls] == ["answer"]  # retrieval was never called
    assert record.status == "completed"
    assert [(w.code, w.detail) for w in record.warnings] == [
        ("no_retrieval", "the task has no documents or text this system retrieves from")
    ]


def filled(schema: dict[str, Any]) -> Any:
    """A value of the JSON schema (first enum value, one-item lists, "x" for text)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: filled(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [filled(schema.get("items") or {})]
    return {"string": "Aurora Shop", "integer": 1, "number": 1, "boolean": True}.get(kind, "x")


def one_extraction_fails():
    """Every extraction call succeeds but those for the first text unit seen, which get HTTP 500."""
    failing: list[str] = []

    def respond(recorded: RecordedRequest) -> FakeResponse:
        request = request_from_openai(recorded.body or {})
        if request.messages[0].content == EXTRACT_SYSTEM:
            unit = request.messages[-1].content or ""
            failing[:] = failing or [unit]
            if unit == failing[0]:
                return error_response(500, "upstream exploded")
            return text_response(json.dumps({"entities": ["Aurora Shop"], "triples": []}))
        tools = {tool.name: tool for tool in request.tools}
        if "answer" in tools:
            return tool_call_response([("call_answer", "answer", json.dumps(filled(tools["answer"].parameters)))])
        return text_response(json.dumps(filled(request.response_schema or {})))

    return respond


def test_an_entity_graph_with_one_failed_extraction_call_is_a_warning_on_the_record(tmp_path):
    task = next(t for t in load_tasks("bundled") if any(s.kind == "documents" for s in t.data))
    with FakeOpenAIServer() as fake:
        fake.responder = one_extraction_fails()
        model = ModelConfig(alias="flaky", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        plan = make_plan(tmp_path, [task], model, ["rag_graph"], tools={"cache_dir": str(tmp_path / "cache")})
        execute(plan)
    run = read_run(plan.run_dir)
    (record,) = run.records
    assert record.status == "completed"  # the graph is usable; what it lacks is said on the record
    (warning,) = [w for w in record.warnings if w.code == "partial_failure"]
    assert warning.detail.startswith("the index was built with failed indexing calls: 1 of ")
    assert "entity_graph calls" in warning.detail
