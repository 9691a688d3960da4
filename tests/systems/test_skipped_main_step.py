"""A system that skipped its main step says so: with a scripted model that answers every call in prose (its plan
is unreadable), the semantic-operator systems run no operator, the RAG systems retrieve nothing and the planner
falls back; each record carries a warning and the summary counts them per system and model."""

from __future__ import annotations

import pytest

from data_agent_compare.core import CallContext, Message, ModelRequest
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.task import QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.reports.summary import markdown, summarize

from helpers import load_tasks, make_plan

PROSE = "Looking at the data, I believe the answer is 42."


def prose(request: ModelRequest, context: CallContext) -> Message:
    return Message(role="assistant", content=PROSE)


def two_factoid_tasks():
    return [t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID][:2]


@pytest.mark.parametrize(
    ("system", "code", "phrase"),
    [
        ("lotus", "no_operator", "answered without running an operator"),
        ("docetl", "no_operator", "answered without running an operator"),
        ("planning", "planner_fallback", "fell back from an unusable plan"),
    ],
)
def test_a_prose_answering_scripted_model_leaves_a_warning_the_summary_counts(
    tmp_path, scripted_model, system, code, phrase
):
    tasks = two_factoid_tasks()
    plan = make_plan(tmp_path, tasks, scripted_model(prose), [system])
    execute(plan)
    run = read_run(plan.run_dir)
    assert [r.status for r in run.records] == ["completed", "completed"]  # it went on and answered
    assert [[w.code for w in r.warnings] for r in run.records] == [[code], [code]]
    assert all(run.trace(r).warnings == r.warnings for r in run.records)
    (row,) = summarize(run.records)
    assert row.warnings == {code: 2}
    assert f"- {system}/scripted: 2 of 2 units {phrase}" in markdown([row], run.manifest)


@pytest.mark.parametrize(
    ("system", "detail"),
    [("rag_naive", "the plan could not be read"), ("rag_hippo", "the plan named no entities")],
)
def test_a_rag_system_that_retrieved_nothing_says_so(tmp_path, scripted_model, system, detail):
    tasks = [t for t in load_tasks("bundled") if any(s.kind == "documents" for s in t.data)][:1]
    plan = make_plan(tmp_path, tasks, scripted_model(prose), [system])
    execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert record.status == "completed"
    assert [(w.code, w.detail) for w in record.warnings] == [("no_retrieval", detail)]


def test_a_system_whose_main_step_ran_carries_no_warning(tmp_path, scripted_model):
    tasks = two_factoid_tasks()
    plan = make_plan(tmp_path, tasks, scripted_model(prose), ["tool_use"])  # prose is tool_use's answer
    execute(plan)
    run = read_run(plan.run_dir)
    assert all(r.warnings == [] for r in run.records)
    assert "Main step skipped" not in markdown(summarize(run.records), run.manifest)


def test_a_coordinator_whose_decision_is_unreadable_says_its_routing_fell_back(tmp_path, scripted_model):
    plan = make_plan(tmp_path, two_factoid_tasks()[:1], scripted_model(prose), ["multi_agent"])
    execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert [(w.code, w.detail) for w in record.warnings] == [
        ("planner_fallback", "the coordinator's decision could not be read; routing ended")
    ]
