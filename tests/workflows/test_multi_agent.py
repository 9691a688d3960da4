"""Control flow of the multi-agent workflow with a scripted test model that answers per agent."""

import json

import data_agent_compare.workflows.multi_agent  # noqa: F401 - registers "multi_agent" (the package import is the lead's to add)
from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.core.trace import Budgets
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.workflows.multi_agent import MultiAgentWorkflow

from helpers import load_tasks, run_task, steps_taken


def bundled(task_id):
    return next(t for t in load_tasks("bundled") if t.id == task_id)


def database_only(task):
    """The task with SQL tools only: fast (no document index) and no researcher or Python analyst."""
    return task.model_copy(update={"tools": ["get_schema_info", "execute_sql"]})


def decide(next_agent, instruction=""):
    return Message(role="assistant", content=json.dumps({"next": next_agent, "instruction": instruction}))


def run_one(tmp_path, scripted_model, respond, task, **config):
    return run_task(tmp_path, scripted_model(respond), task, "multi_agent", **config)[:2]


def of_kind(trace, kind):
    return [s for s in trace["steps"] if s["kind"] == kind]


def document_scenario(task, requests):
    """Coordinator → document_researcher (one search, then a summary) → finish → report_writer answers."""

    def respond(request: ModelRequest, context: CallContext) -> Message:
        requests.setdefault(context.agent, []).append(request)
        if context.agent == "coordinator":
            first = steps_taken(request) == 0
            return decide("document_researcher", "Map warehouse codes to DC names") if first else decide("finish")
        if context.agent == "document_researcher":
            if steps_taken(request) == 0:
                return tool_call_message("search_documents", {"query": "distribution center warehouse codes"})
            return Message(role="assistant", content="WARE-NMK1003 is Columbus DC")
        return tool_call_message("answer", {"answer": task.gold.answer})

    return respond


def test_scripted_multi_agent_routes_a_document_question_to_the_document_researcher(tmp_path, scripted_model):
    task = bundled("BND013")
    assert task.metadata["needs_documents"]
    requests = {}
    record, trace = run_one(tmp_path, scripted_model, document_scenario(task, requests), task)

    assert record["status"] == "completed"
    assert record["scores"]["exact_match"] == 1.0
    decision_enum = requests["coordinator"][0].response_schema["properties"]["next"]["enum"]
    assert decision_enum == ["sql_analyst", "document_researcher", "python_analyst", "finish"]
    assert [t.name for t in requests["document_researcher"][0].tools] == ["search_documents"]
    messages = [(s["agent"], s["recipient"]) for s in of_kind(trace, "message")]
    assert ("coordinator", "document_researcher") in messages
    calls = [(s["agent"], s["tool"], s["phase"], s["success"]) for s in of_kind(trace, "tool_call")]
    assert calls == [
        ("document_researcher", "search_documents", "execute", True),
        ("report_writer", "answer", "generate", True),
    ]
    phases = [(s["agent"], s["phase"]) for s in of_kind(trace, "model_call")]
    assert phases == [
        ("coordinator", "decision"),
        ("document_researcher", "decision"),
        ("document_researcher", "decision"),
        ("coordinator", "decision"),
        ("report_writer", "generate"),
    ]


def test_scripted_multi_agent_records_messages_both_ways_and_agents_keep_their_own_memory(tmp_path, scripted_model):
    task = bundled("BND013")
    requests = {}
    _, trace = run_one(tmp_path, scripted_model, document_scenario(task, requests), task)

    messages = [(s["agent"], s["recipient"], s["phase"], s["content"]) for s in of_kind(trace, "message")]
    assert messages == [
        ("coordinator", "document_researcher", "decision", "Map warehouse codes to DC names"),
        ("document_researcher", "coordinator", "execute", "WARE-NMK1003 is Columbus DC"),
        ("coordinator", "report_writer", "generate", "- document_researcher: WARE-NMK1003 is Columbus DC"),
    ]
    # The coordinator sees the researcher's reply, never its tool results; the writer sees only the findings.
    coordinator_memory = [m.content or "" for m in requests["coordinator"][1].messages]
    assert coordinator_memory[-1] == "Reply from document_researcher: WARE-NMK1003 is Columbus DC"
    assert not any(m.role == "tool" for m in requests["coordinator"][1].messages)
    researcher_memory = requests["document_researcher"][1].messages
    assert [m.role for m in researcher_memory] == ["system", "user", "assistant", "tool"]
    assert "Reno DC" in researcher_memory[-1].content  # the real search result
    writer = requests["report_writer"][0]
    assert [m.role for m in writer.messages] == ["system", "user"]
    assert writer.tool_choice == "required" and [t.name for t in writer.tools] == ["answer"]
    assert "Columbus DC" in writer.messages[-1].content


def test_scripted_multi_agent_round_bound_stops_a_coordinator_that_never_finishes(tmp_path, scripted_model):
    task = database_only(bundled("BND001"))
    requests = {}

    def never_finishes(request: ModelRequest, context: CallContext) -> Message:
        requests.setdefault(context.agent, []).append(request)
        if context.agent == "coordinator":
            return decide("sql_analyst", "Look at the schema")
        if context.agent == "sql_analyst":
            return tool_call_message("get_schema_info", {}, f"call_{steps_taken(request)}")
        return tool_call_message("answer", {"answer": task.gold.answer[0]})

    record, trace = run_one(tmp_path, scripted_model, never_finishes, task)

    rounds = MultiAgentWorkflow.max_rounds
    assert len(requests["coordinator"]) == rounds
    assert len(requests["sql_analyst"]) == rounds * MultiAgentWorkflow.specialist_steps
    assert record["status"] == "completed" and record["scores"]["exact_match"] == 1.0
    # Only the specialists with tools in this environment are offered.
    assert requests["coordinator"][0].response_schema["properties"]["next"]["enum"] == ["sql_analyst", "finish"]
    replies = [s["content"] for s in of_kind(trace, "message") if s["agent"] == "sql_analyst"]
    assert len(replies) == rounds and all(r.startswith("(step limit reached") for r in replies)


def test_scripted_multi_agent_specialist_retry_after_a_tool_error_is_labelled_retry(tmp_path, scripted_model):
    task = database_only(bundled("BND001"))

    def writes_then_reads(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "coordinator":
            return decide("sql_analyst", "Count orders per channel") if steps_taken(request) == 0 else decide("finish")
        if context.agent == "sql_analyst":
            sql = "DROP TABLE Customers" if steps_taken(request) == 0 else 'SELECT COUNT(*) FROM "Sales Orders"'
            return tool_call_message("execute_sql", {"sql": sql}, f"call_{steps_taken(request)}")
        return tool_call_message("answer", {"answer": task.gold.answer[0]})

    _, trace = run_one(tmp_path, scripted_model, writes_then_reads, task)

    analyst = [s for s in trace["steps"] if s.get("agent") == "sql_analyst" and s["kind"] != "message"]
    steps = [(s["kind"], s["phase"]) for s in analyst]
    assert steps == [
        ("model_call", "decision"),
        ("tool_call", "execute"),
        ("model_call", "retry"),
        ("tool_call", "retry"),
    ]
    assert [s["success"] for s in of_kind(trace, "tool_call")][:2] == [False, True]


def test_scripted_multi_agent_invalid_coordinator_decision_goes_straight_to_the_writer(tmp_path, scripted_model):
    task = database_only(bundled("BND001"))

    def rambles(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "coordinator":
            return Message(role="assistant", content='{"next": "the_intern"}')
        return tool_call_message("answer", {"answer": task.gold.answer[0]})

    record, trace = run_one(tmp_path, scripted_model, rambles, task)
    assert [s["agent"] for s in of_kind(trace, "model_call")] == ["coordinator", "report_writer"]
    assert record["status"] == "completed"


def test_scripted_multi_agent_budget_exceeded_ends_with_max_steps(tmp_path, scripted_model):
    task = database_only(bundled("BND001"))

    def keeps_working(request: ModelRequest, context: CallContext) -> Message:
        if context.agent == "coordinator":
            return decide("sql_analyst", "Look at the schema")
        return tool_call_message("get_schema_info", {}, f"call_{steps_taken(request)}")

    record, trace = run_one(tmp_path, scripted_model, keeps_working, task, budgets=Budgets(max_steps=2))
    assert record["status"] == "max_steps"
    assert record["model_calls"] == 2
    assert record["scores"]["exact_match"] == 0.0
    assert trace["status"] == "max_steps" and "step limit" in trace["error"]
