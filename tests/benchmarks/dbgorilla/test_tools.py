"""The function-calling profile of DBGorilla tasks: the task's own tool, whose first call is the
prediction, through the real runner with a scripted test model."""

from __future__ import annotations

import pytest

from data_agent_compare.core import CallContext, Message, ModelRequest, Task
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.tasks.dbgorilla import load_dbgorilla

from helpers import FIXTURES, environment, run_task

DBGORILLA = FIXTURES / "dbgorilla" / "queries-sample.json"


@pytest.fixture(scope="module")
def gorilla_task() -> Task:
    return load_dbgorilla(DBGORILLA)[0]


def test_function_call_tasks_get_only_their_own_tools(gorilla_task):
    tools = environment(gorilla_task)
    assert [spec.name for spec in tools.specs()] == ["query_database"]
    assert tools.specs()[0].parameters == gorilla_task.tool_specs[0]["parameters"]


def test_dbgorilla_first_tool_call_is_the_prediction(tmp_path, scripted_model, gorilla_task):
    gold = gorilla_task.gold.tool_call

    def respond(request: ModelRequest, context: CallContext) -> Message:
        return tool_call_message("query_database", gold.arguments)

    record, trace, _ = run_task(tmp_path, scripted_model(respond), gorilla_task, "tool_use")
    assert record["status"] == "completed"
    assert record["scores"]["ast_score"] == 1.0 and record["scores"]["exact_match"] == 1.0
    assert record["answer"]["tool_call"]["arguments"] == gold.arguments
    (step,) = [s for s in trace["steps"] if s["kind"] == "tool_call"]
    assert step["tool"] == "query_database" and step["success"]
    assert step["result_summary"] == "recorded as the prediction"


def test_dbgorilla_malformed_call_is_still_the_prediction(tmp_path, scripted_model, gorilla_task):
    def respond(request: ModelRequest, context: CallContext) -> Message:
        return tool_call_message("query_database", {"collection_name": "Restaurants", "integer_property_filter": 4})

    record, _, _ = run_task(tmp_path, scripted_model(respond), gorilla_task, "tool_use")
    assert record["status"] == "completed" and record["scores"]["malformed_call"] == 1.0
    assert record["scores"]["no_tool_call"] == 0.0


def test_dbgorilla_text_answer_without_a_tool_call_scores_no_tool_call(tmp_path, scripted_model, gorilla_task):
    def respond(request: ModelRequest, context: CallContext) -> Message:
        return Message(role="assistant", content="Query the Restaurants collection for romantic places.")

    record, trace, _ = run_task(tmp_path, scripted_model(respond), gorilla_task, "tool_use")
    assert record["scores"]["no_tool_call"] == 1.0 and record["scores"]["ast_score"] == 0.0
    assert not [s for s in trace["steps"] if s["kind"] == "tool_call"]
