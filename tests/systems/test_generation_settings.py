"""One generation config for every system: under the run's `generation:` (what `--temperature 0 --seed 7`
sets) every request of every system kind — workflows, framework adapters, semantic operators, RAG and its
index — reaches the provider with exactly those settings, whatever the library asked for; with none set,
no request carries a sampling setting. What each library asked for is kept in its record.

The provider is a local OpenAI-compatible fake server that records every request body; a scripted
responder answers each request by its kind (an index extraction, an operator plan, a tool choice)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from data_agent_compare.core import DataSource, DataSourceKind, Gold, ModelConfig, Task
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.task import QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.openai_protocol import request_from_openai
from data_agent_compare.reports import markdown, summarize
from data_agent_compare.systems.palimpzest_system import refusal, worker_python
from data_agent_compare.systems.rag_graph import EXTRACT_SYSTEM, SUMMARY_SYSTEM

from helpers import (
    FakeOpenAIServer,
    FakeResponse,
    RecordedRequest,
    make_plan,
    read_records,
    text_response,
    tool_call_response,
)

SAMPLING_KEYS = ("temperature", "top_p", "seed", "max_tokens", "max_completion_tokens")
OPERATOR = {"lotus": "sem_filter", "palimpzest": "sem_filter", "docetl": "filter"}
SYSTEMS = [
    "tool_use",
    "planning",
    "multi_agent",
    "langgraph_react",
    "langchain_agent",
    "autogen_assistant",
    "llamaindex_agent",
    "lotus",
    "docetl",
    "rag_naive",
    "rag_graph",
    "palimpzest",
]


def review_task(tmp_path: Path) -> Task:
    """Three reviews in SQLite, and two recorded passages as the task's document corpus (for RAG)."""
    database = tmp_path / "reviews.sqlite"
    with sqlite3.connect(database) as con:
        con.execute("CREATE TABLE reviews (id INTEGER PRIMARY KEY, comment TEXT)")
        con.executemany("INSERT INTO reviews VALUES (?, ?)", [(1, "late parcel"), (2, "great lamp"), (3, "late")])
    passages = [
        {"title": "Shipping", "content": "Northwind Express delivers parcels for the Aurora Shop."},
        {"title": "Lamps", "content": "The Aurora Shop sells lamps made by Lumen Works."},
    ]
    return Task(
        id="late",
        benchmark="bundled",
        question="How many reviews mention a late delivery?",
        question_type=QuestionType.FACTOID,
        data=[DataSource(name="shop", kind=DataSourceKind.SQLITE, location=str(database))],
        gold=Gold(answer="2"),
        metadata={"frozen_vector_search": passages},
    )


def filled(schema: dict[str, Any]) -> Any:
    """A value of the JSON schema (first enum value, empty lists, "x" for text)."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return {name: filled(sub) for name, sub in (schema.get("properties") or {}).items()}
    return {"array": [], "string": "x", "integer": 1, "number": 1, "boolean": True}.get(kind, "x")


def plan(system: str) -> dict[str, Any]:
    operator = {"operator": OPERATOR[system], "input": "table_1", "instruction": "the {comment} says late"}
    return {
        "queries": [{"tool": "execute_sql", "arguments": {"sql": "SELECT id, comment FROM reviews"}}],
        "operators": [operator],
    }


def responder(system: str):
    """The scripted replies of the fake server, by the kind of request."""

    def respond(recorded: RecordedRequest) -> FakeResponse:
        request = request_from_openai(recorded.body or {})
        first = request.messages[0].content or ""
        tools = {tool.name: tool for tool in request.tools}
        if first == EXTRACT_SYSTEM:
            return text_response(json.dumps({"entities": ["Aurora Shop", "Lumen Works"], "triples": []}))
        if first == SUMMARY_SYSTEM:
            return text_response(json.dumps({"title": "Shops", "summary": "The Aurora Shop and its suppliers."}))
        schema = request.response_schema or {}
        if "operators" in (schema.get("properties") or {}):
            return text_response(json.dumps(plan(system)))
        if schema:
            return text_response(json.dumps(filled(schema)))
        for name in ("answer", "send_output"):
            if name in tools:
                return tool_call_response([(f"call_{name}", name, json.dumps(filled(tools[name].parameters)))])
        return text_response("True")

    return respond


def run_against_recorder(tmp_path: Path, system: str, **config: Any) -> tuple[list[dict[str, Any]], Any]:
    """One task of `system` against the recording server; the request bodies it received and the record."""
    if system == "palimpzest" and (problem := refusal(worker_python())) is not None:
        pytest.skip(f"palimpzest runs in its own environment, not made here: {problem}")
    task = review_task(tmp_path)
    with FakeOpenAIServer() as fake:
        fake.responder = responder(system)
        model = ModelConfig(
            alias="recorder", provider="openai-compatible", model_id=f"m-{uuid.uuid4().hex[:8]}", base_url=fake.base_url
        )
        tools = {"cache_dir": str(tmp_path / "cache")}
        plan_ = make_plan(tmp_path, [task], model, [system], tools=tools, budgets={"max_steps": 8}, **config)
        execute(plan_)
        bodies = [r.body or {} for r in fake.requests if r.method == "POST"]
    return bodies, read_records(plan_.run_dir)[0]


@pytest.mark.parametrize("system", SYSTEMS)
def test_recording_server_sees_exactly_the_runs_temperature_and_seed_from_every_system(tmp_path, system):
    bodies, record = run_against_recorder(tmp_path, system, generation={"temperature": 0, "seed": 7})

    assert bodies, f"{system} sent no request"
    sampling = [{key: body[key] for key in SAMPLING_KEYS if key in body} for body in bodies]
    assert all(sent == {"temperature": 0, "seed": 7} for sent in sampling), sampling
    assert record.status not in ("error",), record.error


@pytest.mark.parametrize("system", SYSTEMS)
def test_recording_server_sees_no_sampling_setting_when_the_run_sets_none(tmp_path, system):
    bodies, _ = run_against_recorder(tmp_path, system)

    assert bodies, f"{system} sent no request"
    assert [body for body in bodies if any(key in body for key in SAMPLING_KEYS)] == []


@pytest.mark.parametrize(("system", "asked"), [("llamaindex_agent", "0.1"), ("lotus", "0.0")])
def test_what_a_library_asked_for_is_recorded_and_shown_in_the_summary(tmp_path, system, asked):
    bodies, record = run_against_recorder(tmp_path, system, generation={"temperature": 0.5})

    assert {body["temperature"] for body in bodies} == {0.5}
    assert asked in record.generation_asked["temperature"]
    run = read_run(tmp_path / "run")
    summary = markdown(summarize(run.records), run.manifest, records=run.records)
    assert f"{system} asked for temperature {asked}" in summary and "sent 0.5" in summary
