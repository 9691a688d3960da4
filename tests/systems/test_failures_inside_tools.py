"""A provider failure inside a system's own step is the provider's failure (issue 25 item 2): a scripted server
answering HTTP 500 on every semantic-operator call ends a LOTUS or DocETL unit as `infra_error` (the unit
is retried by `--retry-errors` and stays out of accuracy), where it used to end `completed` with an answer
written without the operators. A system that went on past such a failure on purpose says so (warning
`recovered`) and keeps its status; an index built with some of its calls failed is a warning on every
record that used it (`partial_failure`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest

from data_agent_compare.core import Answer, DataSource, DataSourceKind, Gold, Message, ModelConfig, RunContext, Task
from data_agent_compare.core.model import ModelError
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.system import System
from data_agent_compare.core.task import QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.openai_protocol import request_from_openai

from helpers import (
    FakeOpenAIServer,
    FakeResponse,
    RecordedRequest,
    error_response,
    make_plan,
    registered_system,
    text_response,
    tool_call_response,
)

OPERATOR = {"lotus": "sem_filter", "docetl": "filter"}
ONE_ATTEMPT = {"max_attempts": 1}  # the 500 survives the retries at once: no backoff in the test


def review_task(tmp_path: Path) -> Task:
    database = tmp_path / "reviews.sqlite"
    with sqlite3.connect(database) as con:
        con.execute("CREATE TABLE reviews (id INTEGER PRIMARY KEY, comment TEXT)")
        con.executemany("INSERT INTO reviews VALUES (?, ?)", [(1, "late parcel"), (2, "great lamp"), (3, "late")])
    return Task(
        id="late",
        benchmark="bundled",
        question="How many reviews mention a late delivery?",
        question_type=QuestionType.FACTOID,
        data=[DataSource(name="shop", kind=DataSourceKind.SQLITE, location=str(database))],
        gold=Gold(answer="2"),
    )


def operators_fail(system: str, where: str = "SELECT id, comment FROM reviews"):
    """The plan and the answer are served; every other call (an operator's) gets HTTP 500."""
    operator = {"operator": OPERATOR[system], "input": "table_1", "instruction": "the {comment} says late"}
    plan = {"queries": [{"tool": "execute_sql", "arguments": {"sql": where}}], "operators": [operator]}

    def respond(recorded: RecordedRequest) -> FakeResponse:
        request = request_from_openai(recorded.body or {})
        if "operators" in ((request.response_schema or {}).get("properties") or {}):
            return text_response(json.dumps(plan))
        if any(tool.name == "answer" for tool in request.tools):
            return tool_call_response([("call_answer", "answer", json.dumps({"answer": "2"}))])
        return error_response(500, "upstream exploded")

    return respond


def run_one(tmp_path: Path, system: str, respond) -> Any:
    with FakeOpenAIServer() as fake:
        fake.responder = respond
        model = ModelConfig(alias="flaky", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        plan = make_plan(tmp_path, [review_task(tmp_path)], model, [system], retries=ONE_ATTEMPT)
        execute(plan)
    (record,) = read_run(plan.run_dir).records
    return record


@pytest.mark.parametrize("system", ["lotus", "docetl"])
def test_a_scripted_server_answering_500_on_every_operator_call_ends_the_unit_as_infra_error(tmp_path, system):
    record = run_one(tmp_path, system, operators_fail(system))
    assert record.status == "infra_error", (record.status, record.error)
    assert "failed after their retries inside the system" in record.error and "500" in record.error
    assert record.provider_errors >= 1


@pytest.mark.parametrize("system", ["lotus", "docetl"])
def test_operators_over_no_rows_making_no_model_call_leave_a_warning(tmp_path, system):
    record = run_one(tmp_path, system, operators_fail(system, "SELECT id, comment FROM reviews WHERE id > 99"))
    assert record.status == "completed"  # nothing failed: there was nothing to read
    assert [w.code for w in record.warnings] == ["empty_operator"]
    assert "table_1" in record.warnings[0].detail and "0" in record.warnings[0].detail


class SwallowsFailures(System):
    """A test system that catches the gateway's ModelError and answers anyway; `RECOVERS` says so."""

    name = "test_swallows_failures"
    RECOVERS: ClassVar[bool] = False

    def run(self, task: Task, ctx: RunContext) -> Answer:
        try:
            ctx.generate([Message(role="user", content="extract")])
        except ModelError:
            if self.RECOVERS:
                ctx.warn("recovered", "answered from the database alone")
        return Answer(text="2")


@pytest.mark.parametrize(("recovers", "status"), [(False, "infra_error"), (True, "completed")])
def test_a_swallowed_provider_failure_is_infra_error_unless_the_system_says_it_recovered(tmp_path, recovers, status):
    SwallowsFailures.RECOVERS = recovers
    with registered_system(SwallowsFailures):
        record = run_one(tmp_path, "test_swallows_failures", lambda recorded: error_response(500, "down"))
    assert record.status == status
    assert [w.code for w in record.warnings] == (["recovered"] if recovers else [])


def query_engine_fails(recorded: RecordedRequest) -> FakeResponse:
    """The agent searches the documents, then answers; the query engine's synthesis calls get HTTP 500."""
    request = request_from_openai(recorded.body or {})
    tools = {tool.name: tool for tool in request.tools}
    if not tools:  # the query engine's synthesizer
        return error_response(500, "upstream exploded")
    if not any(message.role == "tool" for message in request.messages):
        return tool_call_response([("call_search", "search_documents", json.dumps({"query": "late delivery"}))])
    schema = tools["answer"].parameters["properties"]["answer"]
    return tool_call_response([("call_answer", "answer", json.dumps({"answer": a_value(schema)}))])


def a_value(schema: dict[str, Any]) -> Any:
    """A valid answer for the answer tool's schema: the first option (in a list for multiple choice)."""
    if "items" in schema:
        return [a_value(schema["items"])]
    return (schema.get("enum") or ["2"])[0]


def test_a_scripted_server_answering_500_in_llamaindexs_query_engine_ends_the_unit_as_infra_error(tmp_path):
    from helpers import load_tasks

    task = next(t for t in load_tasks("bundled") if any(s.kind == "documents" for s in t.data))
    with FakeOpenAIServer() as fake:
        fake.responder = query_engine_fails
        model = ModelConfig(alias="flaky", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        plan = make_plan(tmp_path, [task], model, ["llamaindex_rag_sql"], retries=ONE_ATTEMPT)
        execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert "search_documents" in [c.tool for c in record.tool_calls]
    assert record.status == "infra_error", (record.status, record.error)
    assert "failed after their retries inside the system" in record.error
