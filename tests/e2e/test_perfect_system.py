"""A scripted test model that answers every bundled task correctly must score exact match 1.0:
proof that the pipeline (workflow → tools → answer → scorer → results) can score a perfect system as perfect."""

import json

from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, make_plan, steps_taken


def test_scripted_oracle_scores_exact_match_one_on_every_bundled_task(tmp_path, scripted_model):
    tasks = load_tasks("bundled")
    by_id = {task.id: task for task in tasks}

    def oracle(request: ModelRequest, context: CallContext) -> Message:
        gold = by_id[context.task_id].gold
        if steps_taken(request) == 0:
            return tool_call_message("execute_sql", {"sql": gold.sql}, "call_sql")
        answer = gold.report if gold.answer is None else gold.answer
        return tool_call_message("answer", {"answer": answer}, "call_answer")

    plan = make_plan(tmp_path, tasks, scripted_model(oracle), ["tool_use"])
    manifest = execute(plan)
    records = [json.loads(line) for line in (plan.run_dir / "results.jsonl").read_text().splitlines()]

    assert manifest.status == "completed"
    assert len(records) == len(tasks)
    assert all(r["status"] == "completed" for r in records)
    scored = [r for r in records if r["question_type"] in ("single_choice", "multiple_choice", "factoid")]
    assert len(scored) >= 25
    assert all(r["scores"]["exact_match"] == 1.0 for r in scored), [r["task_id"] for r in scored]
    # the gold SQL really ran through the read-only SQL tool
    assert all(r["tool_calls"][0] == {**r["tool_calls"][0], "tool": "execute_sql", "success": True} for r in records)
    reports = [r for r in records if r["question_type"] == "report"]
    assert reports and all(r["scores"]["rougeL_f"] == 1.0 for r in reports)
