"""Control flow of the tool-use workflow with a scripted test model."""

import json

from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.core.trace import Budgets
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, make_plan, run_task, steps_taken


def first_choice_task():
    return next(t for t in load_tasks("bundled") if t.question_type == "single_choice")


def run_one(tmp_path, scripted_model, respond, task, **config):
    return run_task(tmp_path, scripted_model(respond), task, "tool_use", **config)[:2]


def test_scripted_model_that_never_answers_stops_at_the_step_budget(tmp_path, scripted_model):
    def keeps_looking(request: ModelRequest, context: CallContext) -> Message:
        return tool_call_message("get_schema_info", {}, f"call_{steps_taken(request)}")

    record, trace = run_one(tmp_path, scripted_model, keeps_looking, first_choice_task(), budgets=Budgets(max_steps=3))
    assert record["status"] == "max_steps"
    assert record["model_calls"] == 3
    assert [c["tool"] for c in record["tool_calls"]] == ["get_schema_info"] * 3
    assert record["scores"]["exact_match"] == 0.0  # no answer is scored as given: wrong
    assert trace["status"] == "max_steps"


def test_plain_text_reply_is_the_final_answer_in_the_generate_phase(tmp_path, scripted_model):
    task = first_choice_task()

    def answers_in_text(request: ModelRequest, context: CallContext) -> Message:
        return Message(role="assistant", content=f"The answer is {task.gold.answer[0]}")

    record, trace = run_one(tmp_path, scripted_model, answers_in_text, task)
    assert record["status"] == "completed"
    assert record["scores"]["exact_match"] == 1.0
    assert [s["phase"] for s in trace["steps"]] == ["generate"]


def test_invalid_answer_is_refused_and_the_model_can_correct_it(tmp_path, scripted_model):
    task = first_choice_task()

    def corrects_itself(request: ModelRequest, context: CallContext) -> Message:
        letter = "Z" if steps_taken(request) == 0 else task.gold.answer[0]
        return tool_call_message("answer", {"answer": letter}, f"call_{steps_taken(request)}")

    record, trace = run_one(tmp_path, scripted_model, corrects_itself, task)
    answer_steps = [s for s in trace["steps"] if s["kind"] == "tool_call"]
    assert [s["success"] for s in answer_steps] == [False, True]
    assert "answer" in answer_steps[0]["error"]
    assert record["scores"]["exact_match"] == 1.0


def test_tool_errors_reach_the_model_and_are_traced(tmp_path, scripted_model):
    task = first_choice_task()
    seen = []

    def writes_then_answers(request: ModelRequest, context: CallContext) -> Message:
        if steps_taken(request) == 0:
            return tool_call_message("execute_sql", {"sql": "DROP TABLE Customers"})
        seen.append(request.messages[-1].content)
        return tool_call_message("answer", {"answer": task.gold.answer[0]}, "call_1")

    record, _ = run_one(tmp_path, scripted_model, writes_then_answers, task)
    assert record["tool_calls"][0]["success"] is False
    assert seen and "error" in seen[0].lower()


def test_a_model_call_cut_by_the_wall_time_budget_ends_with_time_limit(tmp_path):
    from data_agent_compare.core.model import ModelConfig

    from helpers import FakeOpenAIServer, text_response

    with FakeOpenAIServer(latency_s=3.0, default=text_response("A")) as fake:
        model = ModelConfig(alias="slow", provider="openai-compatible", model_id="slow", base_url=fake.base_url)
        plan = make_plan(tmp_path, [first_choice_task()], model, ["tool_use"], budgets=Budgets(wall_time_s=1.0))
        execute(plan)
    record = json.loads((plan.run_dir / "results.jsonl").read_text())
    assert record["status"] == "time_limit"
    assert 1.0 <= record["latency_s"] < 2.5


def test_the_call_after_a_failed_tool_call_is_a_retry(tmp_path, scripted_model):
    """The shared phase rules: after a failed tool call, the next model call (and the tools it runs)
    redo a step: RETRY; the call that answers is GENERATE."""
    task = first_choice_task()

    def fails_then_fixes(request: ModelRequest, context: CallContext) -> Message:
        step = steps_taken(request)
        if step == 0:
            return tool_call_message("execute_sql", {"sql": "SELECT nothing FROM nowhere"}, "call_0")
        if step == 1:
            return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"}, "call_1")
        return tool_call_message("answer", {"answer": task.gold.answer[0]}, "call_2")

    record, trace = run_one(tmp_path, scripted_model, fails_then_fixes, task)
    steps = [(s["kind"], s["phase"], s.get("success")) for s in trace["steps"]]
    assert steps == [
        ("model_call", "decision", True),
        ("tool_call", "execute", False),
        ("model_call", "retry", True),
        ("tool_call", "retry", True),
        ("model_call", "generate", True),
        ("tool_call", "generate", True),
    ]
    assert record["latency_by_phase"]["retry"]["model_calls"] == 1
