"""Control flow of the planning workflows (planning, planning_static) with a scripted test model.

The tasks are the real bundled ones, so the tools are real: the read-only SQL tool refuses
the write in the first plan, and the re-planned query runs against the SQLite database.
"""

import json
import re

import jsonschema

import data_agent_compare.workflows.planning  # noqa: F401 - registers planning and planning_static
from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.core.system import create_system
from data_agent_compare.core.trace import Budgets, Phase
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, run_task

WRITE = 'DELETE FROM "Sales Orders"'  # refused by the read-only SQL tool


def count_task():
    """BND003: how many orders in 2019 — one SQL query answers it."""
    return next(t for t in load_tasks("bundled") if t.id == "BND003")


def plan(*sqls: str) -> Message:
    steps = [{"purpose": "count the orders", "tool": "execute_sql", "arguments": {"sql": sql}} for sql in sqls]
    return Message(role="assistant", content=json.dumps({"steps": steps}))


def planner(task, first_plan: list[str]):
    """A scripted model that plans `first_plan`, replans with the gold SQL, and answers from the results."""

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.phase == Phase.DECISION:
            return plan(*first_plan)
        if context.phase == Phase.RETRY:
            return plan(task.gold.sql)
        # The count is only in the prompt if the gold query ran: "orders\n3030".
        found = re.findall(r"^orders\n(\d+)$", "\n".join(m.content or "" for m in request.messages), re.M)
        return tool_call_message("answer", {"answer": found[-1] if found else "unknown"})

    return respond


def run_one(tmp_path, scripted_model, respond, task, system, **config):
    return run_task(tmp_path, scripted_model(respond), task, system, **config)[:2]


def calls(trace, kind):
    return [s for s in trace["steps"] if s["kind"] == kind]


def test_scripted_model_replans_once_after_a_refused_write_and_answers_correctly(tmp_path, scripted_model):
    task = count_task()
    record, trace = run_one(tmp_path, scripted_model, planner(task, [WRITE, "SELECT 1"]), task, "planning")

    models, tools = calls(trace, "model_call"), calls(trace, "tool_call")
    assert [m["phase"] for m in models] == ["decision", "retry", "generate"]
    # The failing step stops the first plan: "SELECT 1" never runs; the re-planned query runs in RETRY.
    assert [(t["phase"], t["success"]) for t in tools] == [
        ("execute", False),
        ("retry", True),
        ("generate", True),
    ]
    assert tools[0]["arguments"] == {"sql": WRITE} and tools[1]["arguments"] == {"sql": task.gold.sql}
    assert tools[2]["tool"] == "answer"
    note = calls(trace, "message")
    assert len(note) == 1 and note[0]["phase"] == "retry" and note[0]["content"].startswith("replanning after step 1")
    assert record["status"] == "completed"
    assert record["scores"]["exact_match"] == 1.0


def test_scripted_model_replans_when_a_query_returns_zero_rows(tmp_path, scripted_model):
    task = count_task()
    nothing = "SELECT OrderNumber FROM \"Sales Orders\" WHERE OrderDate = 'never'"
    record, trace = run_one(tmp_path, scripted_model, planner(task, [nothing]), task, "planning")
    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision", "retry", "generate"]
    assert "no data" in calls(trace, "message")[0]["content"]
    assert record["scores"]["exact_match"] == 1.0


def test_scripted_model_static_plan_does_not_replan_and_runs_every_step(tmp_path, scripted_model):
    task = count_task()
    record, trace = run_one(tmp_path, scripted_model, planner(task, [WRITE, "SELECT 1"]), task, "planning_static")

    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision", "generate"]
    tools = calls(trace, "tool_call")
    assert [(t["phase"], t["success"]) for t in tools] == [("execute", False), ("execute", True), ("generate", True)]
    assert "static plan" in calls(trace, "message")[0]["content"]
    assert record["status"] == "completed"
    assert record["scores"]["exact_match"] == 0.0  # the count was never queried: "unknown" is scored as given


def test_scripted_model_phases_plan_is_decision_and_answer_is_generate(tmp_path, scripted_model):
    task = count_task()
    seen = {}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        seen[context.phase] = request
        return planner(task, [task.gold.sql])(request, context)

    record, trace = run_one(tmp_path, scripted_model, respond, task, "planning")

    assert {s["phase"] for s in trace["steps"]} <= {"decision", "execute", "retry", "generate"}
    models = calls(trace, "model_call")
    assert [m["phase"] for m in models] == ["decision", "generate"]  # nothing failed: no replan
    assert [(t["tool"], t["phase"]) for t in calls(trace, "tool_call")] == [
        ("execute_sql", "execute"),
        ("answer", "generate"),
    ]
    plan_request, answer_request = seen[Phase.DECISION], seen[Phase.GENERATE]
    assert plan_request.response_schema and not plan_request.tools
    branches = plan_request.response_schema["properties"]["steps"]["items"]["anyOf"]
    step_tools = {branch["properties"]["tool"]["const"] for branch in branches}
    assert "execute_sql" in step_tools and "answer" not in step_tools
    jsonschema.Draft202012Validator.check_schema(plan_request.response_schema)
    jsonschema.validate(json.loads(plan(task.gold.sql).content), plan_request.response_schema)
    assert [t.name for t in answer_request.tools] == ["answer"] and answer_request.tool_choice == "required"
    # Only the call that writes the answer is told the answer format.
    assert "Finish by calling" not in plan_request.messages[1].content
    assert "Finish by calling" in answer_request.messages[1].content
    assert record["scores"]["exact_match"] == 1.0
    assert record["latency_by_phase"]["decision"]["model_calls"] == 1


def test_scripted_model_unreadable_plan_is_replanned(tmp_path, scripted_model):
    task = count_task()
    respond = planner(task, [])

    def rambles(request: ModelRequest, context: CallContext) -> Message:
        if context.phase == Phase.DECISION:
            return Message(role="assistant", content="First I will look at the schema.")
        return respond(request, context)

    record, trace = run_one(tmp_path, scripted_model, rambles, task, "planning")
    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision", "retry", "generate"]
    assert "not a valid plan" in calls(trace, "message")[0]["content"]
    assert record["scores"]["exact_match"] == 1.0


def test_scripted_model_may_correct_an_answer_the_answer_tool_refused(tmp_path, scripted_model):
    task = next(t for t in load_tasks("bundled") if t.question_type == "single_choice")
    answers = iter(["Z", task.gold.answer])

    def corrects_itself(request: ModelRequest, context: CallContext) -> Message:
        if context.phase == Phase.DECISION:
            return plan("SELECT 1")
        return tool_call_message("answer", {"answer": next(answers)})

    record, trace = run_one(tmp_path, scripted_model, corrects_itself, task, "planning")
    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision", "generate", "generate"]
    answer_calls = [t for t in calls(trace, "tool_call") if t["tool"] == "answer"]
    assert [(t["phase"], t["success"]) for t in answer_calls] == [("generate", False), ("generate", True)]
    assert record["scores"]["exact_match"] == 1.0


def test_scripted_model_text_reply_becomes_the_answer(tmp_path, scripted_model):
    task = count_task()

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.phase == Phase.DECISION:
            return Message(role="assistant", content=json.dumps({"steps": []}))
        return Message(role="assistant", content=task.gold.answer)

    record, trace = run_one(tmp_path, scripted_model, respond, task, "planning")
    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision", "generate"]
    assert record["scores"]["exact_match"] == 1.0


def test_scripted_model_step_budget_ends_the_task_with_max_steps(tmp_path, scripted_model):
    task = count_task()
    record, trace = run_one(
        tmp_path, scripted_model, planner(task, [task.gold.sql]), task, "planning", budgets=Budgets(max_steps=1)
    )
    assert record["status"] == "max_steps" and trace["status"] == "max_steps"
    assert [m["phase"] for m in calls(trace, "model_call")] == ["decision"]
    assert calls(trace, "tool_call") == []  # with the budget spent, no step runs for an answer never written
    assert record["scores"]["exact_match"] == 0.0


def test_describe_records_prompts_and_whether_the_variant_replans():
    dynamic, static = create_system("planning").describe(), create_system("planning_static").describe()
    assert dynamic["replan"] is True and static["replan"] is False
    assert dynamic["max_replans"] == 1 and static["max_replans"] == 0
    assert dynamic["prompt_hash"] == static["prompt_hash"] and dynamic["prompt_version"]
