"""The task's tools over MCP (systems/mcp_server.py): a real client of the official `mcp` SDK, run by a scripted
test system inside the real runner, sees exactly the unit's tools and calls them as tool steps of the unit's
trace; budgets, other units' tokens and gold-isolation probes are refused over MCP as they are in-process."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx
import pytest

from data_agent_compare.core import (
    Answer,
    Message,
    QuestionType,
    RunContext,
    System,
    Task,
    ToolSettings,
    create_benchmark,
)
from data_agent_compare.engine.runner import execute
from data_agent_compare.systems.bridge import AgentSession
from data_agent_compare.systems.mcp_server import shared_tool_server
from data_agent_compare.tasks.bundled.loader import BUNDLED_ROOT

from helpers import FIXTURES, SCRIPTED, load_tasks, make_plan, mcp_session_calls, registered_system, run_task


def bundled_task(question_type: QuestionType = QuestionType.FACTOID) -> Task:
    return next(t for t in load_tasks("bundled") if t.question_type == question_type)


class ScriptedMcpClient(System):
    """A scripted test system that is an MCP client of its own unit: it runs `calls` over MCP and reports
    what the server listed and answered."""

    name = "test_scripted_mcp_client"
    kind = "test"
    calls: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    model_calls_first: ClassVar[int] = 0  # model calls made (in-process) before the MCP calls
    seen: ClassVar[dict[str, Any]] = {}

    def run(self, task: Task, ctx: RunContext) -> Answer:
        for _ in range(self.model_calls_first):
            try:
                ctx.generate([Message(role="user", content="hello")])
            except Exception:
                break
        session = AgentSession(task, ctx)
        with shared_tool_server().open_unit(session) as mcp:
            listed, results = mcp_session_calls(mcp.url, mcp.token, self.calls)
        ScriptedMcpClient.seen = {
            "listed": listed,
            "results": results,
            "specs": [s.model_dump() for s in ctx.tool_specs()],
        }
        return session.answer(None) if session.answered else Answer(status="no_answer", error="no answer over MCP")


@pytest.fixture
def mcp_client_system():
    with registered_system(ScriptedMcpClient) as cls:
        cls.model_calls_first, cls.seen = 0, {}
        yield cls


def test_scripted_mcp_client_lists_the_units_tools_and_calls_execute_sql_and_answer(
    tmp_path, scripted_model, mcp_client_system
):
    mcp_client_system.calls = [("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"}), ("answer", {"answer": "50"})]
    model = scripted_model(lambda request, context: pytest.fail("this client asks no model"))
    record, trace, _ = run_task(tmp_path, model, bundled_task(), mcp_client_system.name)

    seen = mcp_client_system.seen
    assert [(t["name"], t["inputSchema"]) for t in seen["listed"]] == [
        (s["name"], s["parameters"]) for s in seen["specs"]
    ]
    assert "answer" in [t["name"] for t in seen["listed"]]
    (sql, answered) = seen["results"]
    assert not sql["isError"] and "50" in sql["text"]
    assert not answered["isError"]
    assert record["status"] == "completed" and record["answer"]["text"] == "50"
    tools = [(s["tool"], s["phase"], s["success"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools == [("execute_sql", "execute", True), ("answer", "generate", True)]


def test_scripted_mcp_call_with_bad_arguments_is_a_failed_tool_step_the_agent_can_read(
    tmp_path, scripted_model, mcp_client_system
):
    mcp_client_system.calls = [("execute_sql", {"query": "SELECT 1"}), ("no_such_tool", {})]
    model = scripted_model(lambda request, context: pytest.fail("this client asks no model"))
    record, trace, _ = run_task(tmp_path, model, bundled_task(), mcp_client_system.name)

    invalid, unknown = mcp_client_system.seen["results"]
    assert invalid["isError"] and "invalid arguments for execute_sql" in invalid["text"]
    assert unknown["isError"] and "unknown tool" in unknown["text"]
    assert [(s["tool"], s["success"]) for s in trace["steps"] if s["kind"] == "tool_call"] == [
        ("execute_sql", False),
        ("no_such_tool", False),
    ]
    assert record["status"] == "no_answer"


def test_scripted_mcp_call_after_the_budget_ran_out_is_refused_and_not_run(tmp_path, scripted_model, mcp_client_system):
    mcp_client_system.calls = [("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"})]
    mcp_client_system.model_calls_first = 2  # the second is refused by max_steps=1
    model = scripted_model(lambda request, context: Message(role="assistant", content="thinking"))
    record, trace, _ = run_task(tmp_path, model, bundled_task(), mcp_client_system.name, budgets={"max_steps": 1})

    (refused,) = mcp_client_system.seen["results"]
    assert refused["isError"] and "budget exceeded (max_steps)" in refused["text"]
    assert [s for s in trace["steps"] if s["kind"] == "tool_call"] == []
    assert record["status"] == "max_steps"


def test_scripted_mcp_call_after_the_answer_is_refused(tmp_path, scripted_model, mcp_client_system):
    mcp_client_system.calls = [("answer", {"answer": "50"}), ("execute_sql", {"sql": "SELECT 1"})]
    model = scripted_model(lambda request, context: pytest.fail("this client asks no model"))
    record, _, _ = run_task(tmp_path, model, bundled_task(), mcp_client_system.name)

    _, after = mcp_client_system.seen["results"]
    assert after["isError"] and "already answered" in after["text"]
    assert record["status"] == "completed"


class TwoUnits(System):
    """A scripted test system that opens two units' tools and tries each URL with the other's token."""

    name = "test_scripted_two_units"
    kind = "test"
    statuses: ClassVar[dict[str, int]] = {}

    def run(self, task: Task, ctx: RunContext) -> Answer:
        server = shared_tool_server()
        with server.open_unit(AgentSession(task, ctx)) as first, server.open_unit(AgentSession(task, ctx)) as second:
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
            headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
            for label, url, token in [
                ("other", first.url, second.token),
                ("none", first.url, ""),
                ("own", first.url, first.token),
            ]:
                auth = {"Authorization": f"Bearer {token}"} if token else {}
                TwoUnits.statuses[label] = httpx.post(url, json=body, headers={**headers, **auth}).status_code
            ended_url, ended_token = second.url, second.token
        reply = httpx.post(ended_url, json=body, headers={**headers, "Authorization": f"Bearer {ended_token}"})
        TwoUnits.statuses["ended"] = reply.status_code
        with pytest.raises(Exception):  # noqa: B017 - whatever the SDK raises for a 401, the call must fail
            mcp_session_calls(first.url, second.token, [])
        return Answer(text="done")


def test_scripted_mcp_request_with_another_units_token_is_refused(tmp_path, scripted_model):
    model = scripted_model(lambda request, context: pytest.fail("no model"))
    with registered_system(TwoUnits):
        record, _, _ = run_task(tmp_path, model, bundled_task(), TwoUnits.name)
    assert record["status"] == "completed", record["error"]
    # the own token passes the door (the SDK then wants an initialize first: not 401/404)
    assert TwoUnits.statuses["other"] == 401 and TwoUnits.statuses["none"] == 401
    assert TwoUnits.statuses["own"] not in (401, 404) and TwoUnits.statuses["ended"] == 404


@pytest.mark.parametrize("benchmark", ["bundled", "dabstep"])
def test_scripted_gold_isolation_probes_over_mcp_are_refused(tmp_path, scripted_model, mcp_client_system, benchmark):
    """The probes of tests/e2e/test_gold_out_of_reach.py, over MCP: the task files by absolute and escaping
    paths, the folder listing, and model-written Python opening them."""
    folder = {"bundled": BUNDLED_ROOT, "dabstep": FIXTURES / "dabstep"}[benchmark]
    bench = create_benchmark(benchmark, None if benchmark == "bundled" else folder)
    task = bench.load()[0]
    gold_file = folder / ("tasks.jsonl" if benchmark == "bundled" else "dev.jsonl")
    offered = {spec.name for spec in bench.tools(task, ToolSettings())}
    reads = [str(gold_file), f"../{gold_file.name}", f"../../{gold_file.name}", "/etc/passwd"]
    calls = [("read_file", {"path": path}) for path in reads if "read_file" in offered]
    calls += [("list_files", {})] if "list_files" in offered else []
    calls += [("execute_python", {"code": f"print(open({str(gold_file)!r}).read()[:2000])"})]
    mcp_client_system.calls = calls
    scripted_model(lambda request, context: pytest.fail("no model"))
    plan = make_plan(tmp_path, [task], SCRIPTED, [mcp_client_system.name], benchmark=bench)
    execute(plan)

    results = mcp_client_system.seen["results"]
    assert len(results) == len(calls) and (benchmark == "bundled" or len(calls) == 6)
    for (name, _), result in zip(calls, results, strict=True):
        if name == "list_files":
            assert gold_file.name not in result["text"]
        else:
            assert result["isError"], (name, result["text"][:300])
        assert '"correct_answer"' not in result["text"] and '"answer":' not in result["text"]
        assert "root:" not in result["text"]
