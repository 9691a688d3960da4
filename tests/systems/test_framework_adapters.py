"""The framework adapters (LangGraph/LangChain, AutoGen, LlamaIndex) through the real runner and the real
HTTP gateway: a scripted test model plays a known tool sequence; the trace must show exactly that
sequence under canonical names, every model call must be metered through the endpoint, and the answer
must be read in the benchmark's format. Budget stops end with the budget's status, never `error`."""

from __future__ import annotations

import json
import logging
import re
import time
from collections import deque
from pathlib import Path
from typing import Any

import pytest

from data_agent_compare.core import SYSTEMS, CallContext, Message, ModelRequest, QuestionType
from data_agent_compare.engine.config import load_model_table, load_plugins
from data_agent_compare.providers.scripted import tool_call_message

from helpers import FIXTURES, documentation, load_tasks, no_network, run_task

ADAPTERS = [
    "langgraph_react",
    "langchain_agent",
    "langgraph_plan_execute",
    "autogen_assistant",
    "autogen_team",
    "llamaindex_agent",
    "llamaindex_rag_sql",
]
SCHEMA = ("get_schema_info", {})
SQL = ("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"})
SEARCH = ("search_documents", {"query": "How is a key account defined?"})


def call(name: str, arguments: dict[str, Any], agent: str | None = None) -> tuple[str | None, Message]:
    return agent, tool_call_message(name, arguments, call_id=f"call_{name}")


def text(content: str, agent: str | None = None) -> tuple[str | None, Message]:
    return agent, Message(role="assistant", content=content)


def plan(*steps: tuple[str, dict[str, Any]]) -> tuple[str | None, Message]:
    body = {"steps": [{"purpose": f"run {name}", "tool": name, "arguments": args} for name, args in steps]}
    return text(json.dumps(body))


def script_for(system: str, answer: dict[str, Any]) -> tuple[list[tuple[str | None, Message]], list[str]]:
    """The scripted replies, in order (with the agent expected to ask for each), and the tool calls the
    trace must then show."""
    if system == "langgraph_plan_execute":
        return [plan(SCHEMA, SQL), call("answer", answer)], ["get_schema_info", "execute_sql", "answer"]
    if system == "autogen_team":
        replies = [
            text("sql_analyst", "selector"),
            call(*SCHEMA, "sql_analyst"),
            call(*SQL, "sql_analyst"),
            text("There are 50 customers.", "sql_analyst"),
            text("report_writer", "selector"),
            call("answer", answer, "report_writer"),
        ]
        return replies, ["get_schema_info", "execute_sql", "answer"]
    if system == "llamaindex_rag_sql":
        replies = [call(*SEARCH), text("Key accounts are defined by revenue.", "query_engine"), call(*SQL)]
        return [*replies, call("answer", answer)], ["search_documents", "execute_sql", "answer"]
    agent = "assistant" if system == "autogen_assistant" else None
    replies = [call(*SCHEMA, agent), call(*SQL, agent), call("answer", answer, agent)]
    return replies, ["get_schema_info", "execute_sql", "answer"]


class Script:
    """A scripted test model that plays its replies in order and checks who asks for each."""

    def __init__(self, replies: list[tuple[str | None, Message]]) -> None:
        self.replies = deque(replies)
        self.wrong_agent: list[tuple[str | None, str | None]] = []

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        if not self.replies:
            return Message(role="assistant", content="(the script has ended)")
        agent, reply = self.replies.popleft()
        if agent != context.agent:
            self.wrong_agent.append((agent, context.agent))
        return reply


def bundled_task(question_type: QuestionType):
    return next(t for t in load_tasks("bundled") if t.question_type == question_type)


@pytest.mark.parametrize("system", ADAPTERS)
def test_scripted_tool_sequence_is_traced_exactly_and_the_answer_is_read(tmp_path, scripted_model, system):
    task = bundled_task(QuestionType.MULTIPLE_CHOICE)
    replies, expected_tools = script_for(system, {"answer": ["C", "A"]})
    script = Script(replies)
    with no_network() as attempts:
        record, trace, manifest = run_task(tmp_path, scripted_model(script), task, system)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["choices"] == ["C", "A"]
    assert [s["tool"] for s in trace["steps"] if s["kind"] == "tool_call"] == expected_tools
    model_calls = [s for s in trace["steps"] if s["kind"] == "model_call"]
    assert len(model_calls) == len(replies) and not script.replies and script.wrong_agent == []
    assert all(s["via_http"] and s["success"] and s["usage"]["input_tokens"] > 0 for s in model_calls)
    phases = {s["tool"]: s["phase"] for s in trace["steps"] if s["kind"] == "tool_call"}
    assert phases["answer"] == "generate" and phases[expected_tools[1]] == "execute"
    assert manifest["systems"][system]["kind"] == "framework" and manifest["systems"][system]["framework"]
    if system == "llamaindex_rag_sql":  # its vector index is built before the task's clock, and listed
        (index,) = manifest["systems"][system]["indexing"]
        assert index["documents"] > 0 and index["model_calls"] == 0
    assert attempts == []


@pytest.mark.parametrize("system", ["langgraph_react", "autogen_assistant", "llamaindex_agent", "langchain_agent"])
def test_scripted_factoid_answer_and_a_failed_tool_call_is_followed_by_a_retry(tmp_path, scripted_model, system):
    task = bundled_task(QuestionType.FACTOID)
    agent = "assistant" if system == "autogen_assistant" else None
    bad_sql = ("execute_sql", {"sql": "SELECT * FROM no_such_table"})
    script = Script([call(*bad_sql, agent), call(*SQL, agent), call("answer", {"answer": "50"}, agent)])
    record, trace, _ = run_task(tmp_path, scripted_model(script), task, system)

    assert record["status"] == "completed" and record["answer"]["text"] == "50"
    tools = [(s["tool"], s["success"], s["phase"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools == [("execute_sql", False, "execute"), ("execute_sql", True, "retry"), ("answer", True, "generate")]
    assert [s["phase"] for s in trace["steps"] if s["kind"] == "model_call"] == ["decision", "retry", "generate"]


@pytest.mark.parametrize("system", ["langgraph_react", "langchain_agent", "autogen_assistant", "llamaindex_agent"])
def test_scripted_function_calling_task_takes_the_first_call_as_the_prediction(tmp_path, scripted_model, system):
    task = load_tasks("dbgorilla", FIXTURES / "dbgorilla" / "queries-sample.json")[0]
    function = task.tool_specs[0]["name"]
    agent = "assistant" if system == "autogen_assistant" else None
    script = Script([call(function, {"query": "predicted"}, agent)])
    record, trace, _ = run_task(tmp_path, scripted_model(script), task, system)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["tool_call"] == {"id": "", "name": function, "arguments": {"query": "predicted"}}
    assert [s["tool"] for s in trace["steps"] if s["kind"] == "tool_call"] == [function]
    assert len([s for s in trace["steps"] if s["kind"] == "model_call"]) == 1


def never_answers(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model that keeps working and never answers."""
    if context.agent == "selector":
        return Message(role="assistant", content="sql_analyst")
    if context.agent == "query_engine":
        return Message(role="assistant", content="nothing relevant")
    if request.response_schema is not None:  # a plan whose step fails, so that the planner replans
        steps = [{"purpose": "look", "tool": "execute_sql", "arguments": {"sql": "SELECT nope"}}]
        return Message(role="assistant", content=json.dumps({"steps": steps}))
    return tool_call_message("get_schema_info", {}, call_id="call_schema")


@pytest.mark.parametrize("system", ADAPTERS)
def test_scripted_model_that_never_answers_is_stopped_by_the_step_budget(tmp_path, scripted_model, system, caplog):
    # The plan-and-execute graph makes at most three calls by its shape (plan, replan, writer): two stop it.
    steps = 2 if system == "langgraph_plan_execute" else 3
    task = bundled_task(QuestionType.SINGLE_CHOICE)
    record, trace, _ = run_task(tmp_path, scripted_model(never_answers), task, system, budgets={"max_steps": steps})

    assert record["status"] == "max_steps", record["error"]
    assert record["model_calls"] == steps
    assert len([s for s in trace["steps"] if s["kind"] == "model_call"]) == steps
    failures_logged = [r for r in caplog.records if r.levelno >= logging.ERROR and r.exc_info]
    assert failures_logged == []  # the stop is in the record, not as tracebacks on the console


@pytest.mark.parametrize("system", ["langgraph_react", "autogen_team", "llamaindex_agent"])
def test_scripted_model_that_never_answers_is_stopped_by_the_token_budget(tmp_path, scripted_model, system):
    task = bundled_task(QuestionType.SINGLE_CHOICE)
    record, _, _ = run_task(tmp_path, scripted_model(never_answers), task, system, budgets={"max_tokens": 1500})

    assert record["status"] == "max_tokens", record["error"]


@pytest.mark.parametrize("system", ["langgraph_react", "autogen_assistant", "llamaindex_agent"])
def test_scripted_slow_model_that_never_answers_is_stopped_by_the_wall_time_budget(tmp_path, scripted_model, system):
    def slow(request: ModelRequest, context: CallContext) -> Message:
        time.sleep(0.3)  # test-only latency of the scripted model
        return never_answers(request, context)

    task = bundled_task(QuestionType.SINGLE_CHOICE)
    budgets = {"wall_time_s": 1.0, "max_steps": 50}
    record, _, _ = run_task(tmp_path, scripted_model(slow), task, system, budgets=budgets)

    assert record["status"] == "time_limit", record["error"]
    assert 2 <= record["model_calls"] <= 6 and record["latency_s"] < 5


@pytest.mark.slow
@pytest.mark.parametrize("system", ADAPTERS)
def test_each_adapter_runs_a_bundled_task_with_the_embedded_model_offline(tmp_path, system):
    task = bundled_task(QuestionType.SINGLE_CHOICE)
    local = load_model_table()["local"]
    with no_network() as attempts:
        record, trace, _ = run_task(tmp_path, local, task, system, budgets={"max_steps": 4, "wall_time_s": 600})

    assert record["status"] in {"completed", "max_steps", "max_tokens", "no_answer"}, record["error"]
    model_calls = [s for s in trace["steps"] if s["kind"] == "model_call"]
    assert model_calls and all(s["via_http"] and s["provider"] == "local" for s in model_calls)
    assert record["usage"]["input_tokens"] > 0 and record["usage"]["output_tokens"] > 0
    assert set(record["latency_by_phase"]) & {"decision", "generate", "retry"}
    assert attempts == []


def test_scripted_run_of_one_adapter_has_no_framework_state_left_between_tasks(tmp_path, scripted_model):
    """One instance runs many tasks: a second task starts from scratch (no memory of the first)."""
    first, second = load_tasks("bundled")[:2]
    seen: list[int] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        seen.append(len(request.messages))
        return tool_call_message("answer", {"answer": "A"}, call_id="call_answer")

    for task in (first, second):
        run_task(Path(tmp_path) / task.id, scripted_model(respond), task, "langgraph_react")
    assert seen[0] == seen[1]


def readme_example(name: str) -> str:
    readme = documentation()  # README.md and docs/*.md
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", readme, flags=re.S)
    assert match, f"README has no example {name!r}"
    return match.group(1)


def test_readme_framework_example_runs_its_own_graph_with_a_scripted_model(tmp_path, scripted_model):
    plugin = tmp_path / "schema_first_agent.py"
    plugin.write_text(readme_example("add-a-framework-system"), encoding="utf-8")
    load_plugins([str(plugin)])
    asked: list[str] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        asked.append(request.messages[-1].content or "")
        return tool_call_message("answer", {"answer": "B"}, call_id="call_answer")

    try:
        record, trace, manifest = run_task(tmp_path, scripted_model(respond), bundled_task(QuestionType.SINGLE_CHOICE),
                                           "schema_first_agent")  # fmt: skip
    finally:
        SYSTEMS.unregister("schema_first_agent")
    assert record["status"] == "completed" and record["answer"]["choices"] == ["B"]
    assert [(s["kind"], s.get("tool"), s["phase"]) for s in trace["steps"]] == [
        ("tool_call", "get_schema_info", "execute"),
        ("model_call", None, "generate"),
        ("tool_call", "answer", "generate"),
    ]
    assert asked[0].startswith("The database schema:") and "table Customers" in asked[0]
    assert manifest["systems"]["schema_first_agent"]["kind"] == "framework"
