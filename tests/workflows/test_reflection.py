"""Control flow of the reflection workflow with a scripted test model, through the real runner and bundled tasks."""

import json

import pytest

from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.core.task import ToolCall
from data_agent_compare.core.trace import Budgets
from data_agent_compare.providers.scripted import tool_call_message

# Importing the module registers "reflection" (until workflows/__init__.py imports it).
from data_agent_compare.workflows.reflection import NOT_RUN, VERDICT_SCHEMA, ReflectionWorkflow, revise_reason

from helpers import load_tasks, run_task, steps_taken

MISSPELLED_SQL = "SELECT COUNT(*) AS orders FROM \"Sales Order\" WHERE OrderDate LIKE '%/19'"


def bundled_task(task_id):
    return next(t for t in load_tasks("bundled") if t.id == task_id)


def verdict(decision: str, reason: str) -> Message:
    return Message(role="assistant", content=json.dumps({"verdict": decision, "reason": reason}))


def run_one(tmp_path, scripted_model, respond, task, workflow=None, **config):
    return run_task(tmp_path, scripted_model(respond), task, "reflection", workflow, **config)


def shape(trace):
    """(kind, phase, agent) of each step; tool steps name their tool instead of the kind."""
    return [(s.get("tool", s["kind"]), s["phase"], s["agent"]) for s in trace["steps"]]


def test_scripted_reflection_repairs_a_failing_sql_query_from_its_error(tmp_path, scripted_model):
    task = bundled_task("BND003")  # factoid: orders in 2019, gold 3030
    retry = {}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            review = request.messages[-1].content
            if "Result (failed)" in review:
                return verdict("revise", "error: " + review.split("Result (failed):\n")[1])
            return verdict("accept", "the step worked")
        turn = steps_taken(request)
        if turn == 0:
            return tool_call_message("execute_sql", {"sql": MISSPELLED_SQL})
        if turn == 1:
            retry.update(
                phase=context.phase, tool_result=request.messages[-2].content, critique=request.messages[-1].content
            )
            return tool_call_message("execute_sql", {"sql": task.gold.sql}, "call_1")
        return tool_call_message("answer", {"answer": request.messages[-1].content.splitlines()[1]}, "call_2")

    record, trace, _ = run_one(tmp_path, scripted_model, respond, task)

    assert record["status"] == "completed"
    assert record["answer"]["text"] == "3030"
    assert record["scores"]["exact_match"] == 1.0
    assert retry["phase"] == "retry"
    assert "no such table: Sales Order" in retry["tool_result"]
    assert "no such table: Sales Order" in retry["critique"]  # the critic's reason reaches the actor
    assert shape(trace) == [
        ("model_call", "decision", "actor"),
        ("execute_sql", "execute", "actor"),
        ("model_call", "decision", "critic"),
        ("message", "decision", "critic"),
        ("model_call", "retry", "actor"),
        ("execute_sql", "retry", "actor"),
        ("model_call", "decision", "critic"),
        ("model_call", "generate", "actor"),
        ("answer", "generate", "actor"),
        ("model_call", "decision", "critic"),
    ]
    assert [c["success"] for c in record["tool_calls"]] == [False, True, True]


def test_scripted_critic_calls_are_decision_phase_structured_output_as_critic(tmp_path, scripted_model):
    task = bundled_task("BND001")
    critic_calls = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            critic_calls.append((context.phase, request.response_schema, request.tools))
            return verdict("accept", "fine")
        if steps_taken(request) == 0:
            return tool_call_message("get_schema_info", {})
        return tool_call_message("answer", {"answer": task.gold.answer[0]}, "call_1")

    record, trace, _ = run_one(tmp_path, scripted_model, respond, task)

    assert record["scores"]["exact_match"] == 1.0
    assert critic_calls == [("decision", VERDICT_SCHEMA, [])] * 2  # after the tool result and the draft
    critic_steps = [s for s in trace["steps"] if s["agent"] == "critic"]
    assert [(s["kind"], s["phase"]) for s in critic_steps] == [("model_call", "decision")] * 2
    assert "retry" not in {s["phase"] for s in trace["steps"]}


@pytest.mark.parametrize("bound", [None, 1, 0])
def test_scripted_critic_that_always_revises_stops_at_the_reflection_bound(tmp_path, scripted_model, bound):
    task = bundled_task("BND001")
    workflow = ReflectionWorkflow() if bound is None else ReflectionWorkflow(max_revisions=bound)
    expected = 3 if bound is None else bound

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            return verdict("revise", "check it again")
        return tool_call_message("answer", {"answer": task.gold.answer[0]}, f"call_{steps_taken(request)}")

    record, trace, manifest = run_one(tmp_path, scripted_model, respond, task, workflow)

    assert manifest["systems"]["reflection"]["max_revisions"] == expected
    assert record["status"] == "completed"
    assert record["scores"]["exact_match"] == 1.0
    actor = [s["phase"] for s in trace["steps"] if s["kind"] == "model_call" and s["agent"] == "actor"]
    assert actor == ["generate"] * (1 + expected)  # every one of them writes the answer: GENERATE, redone or not
    assert sum(s["agent"] == "critic" and s["kind"] == "model_call" for s in trace["steps"]) == expected
    assert sum(s["kind"] == "message" for s in trace["steps"]) == expected


def test_scripted_budget_exhaustion_returns_max_steps_with_the_draft_answer(tmp_path, scripted_model):
    task = bundled_task("BND001")

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            return verdict("revise", "check it again")
        return tool_call_message("answer", {"answer": task.gold.answer[0]})

    record, trace, _ = run_one(tmp_path, scripted_model, respond, task, budgets=Budgets(max_steps=2))

    assert record["status"] == "max_steps"
    assert record["model_calls"] == 2  # the draft and the critic; the revision hits the limit
    assert "step limit" in record["error"]
    assert record["scores"]["exact_match"] == 1.0  # the draft is scored as given
    assert trace["status"] == "max_steps"


def test_scripted_budget_exhaustion_without_a_draft_has_no_answer(tmp_path, scripted_model):
    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            return verdict("accept", "fine")
        return tool_call_message("get_schema_info", {}, f"call_{steps_taken(request)}")

    record, _, _ = run_one(tmp_path, scripted_model, respond, bundled_task("BND001"), budgets=Budgets(max_steps=2))

    assert record["status"] == "max_steps"
    assert record["scores"]["exact_match"] == 0.0


@pytest.mark.parametrize("content", ['{"verdict": "accept", "reason": "ok"}', "not json", "[1]", None])
def test_anything_but_a_revise_verdict_accepts(content):
    assert revise_reason(content) is None


def test_revise_verdict_without_reason_still_gives_one():
    assert revise_reason('{"verdict": "revise", "reason": " "}')


def test_scripted_rejected_step_skips_the_rest_of_the_reply_until_redone(tmp_path, scripted_model):
    task = bundled_task("BND001")
    retry_messages = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "critic":
            failed = "Result (failed)" in request.messages[-1].content
            return verdict("revise" if failed else "accept", "fix the table name")
        if steps_taken(request) == 0:
            calls = [
                ToolCall(id="a", name="execute_sql", arguments={"sql": MISSPELLED_SQL}),
                ToolCall(id="b", name="get_schema_info", arguments={}),
            ]
            return Message(role="assistant", tool_calls=calls)
        retry_messages.extend(request.messages[-3:])
        return tool_call_message("answer", {"answer": task.gold.answer[0]}, "call_1")

    record, _, _ = run_one(tmp_path, scripted_model, respond, task)

    assert [c["tool"] for c in record["tool_calls"]] == ["execute_sql", "answer"]  # get_schema_info never ran
    assert [(m.role, m.tool_call_id) for m in retry_messages] == [("tool", "a"), ("tool", "b"), ("user", None)]
    assert retry_messages[1].content == NOT_RUN
    assert record["scores"]["exact_match"] == 1.0
