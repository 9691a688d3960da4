"""The run directory: records survive failures, and an interrupted run resumes without redoing work."""

import json
import time
from dataclasses import replace

import pytest

from data_agent_compare.core import SCORERS, Answer, CallContext, Message, ModelRequest, RunContext, System, Task
from data_agent_compare.core.runlog import read_records
from data_agent_compare.core.scorer import register_scorer, reports
from data_agent_compare.engine.config import ConfigError
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.reports import summarize
from data_agent_compare.tasks.bundled import BundledBenchmark

from helpers import load_tasks, make_plan, registered_system


class ExplodingSystem(System):
    """A test system that crashes on the second task."""

    name = "test_exploding"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        if task.id.endswith("2"):
            raise RuntimeError("boom")
        ctx.generate([Message(role="user", content=task.question)])
        return Answer(text="A")


@pytest.fixture
def exploding_system():
    with registered_system(ExplodingSystem) as cls:
        yield cls


def answer_a(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("answer", {"answer": "A"})


def records_of(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_a_crashing_system_loses_one_task_not_the_run(tmp_path, scripted_model, exploding_system):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:3]
    tasks = [t.model_copy(update={"id": f"T{i}"}) for i, t in enumerate(tasks, start=1)]
    plan = make_plan(tmp_path, tasks, scripted_model(answer_a), ["test_exploding"])
    execute(plan)
    statuses = {r["task_id"]: r["status"] for r in records_of(plan.run_dir)}
    assert statuses == {"T1": "completed", "T2": "error", "T3": "completed"}
    error = next(r for r in records_of(plan.run_dir) if r["task_id"] == "T2")["error"]
    assert error == "RuntimeError: boom"
    trace = json.loads((plan.run_dir / "traces/test_exploding/scripted/T2.json").read_text())
    assert "Traceback" in trace["error"]  # the stack is kept in the trace, not the summary


def test_resume_runs_only_missing_units_and_reports_a_partial_line(tmp_path, scripted_model):
    tasks = load_tasks("bundled")[:4]
    plan = make_plan(tmp_path, tasks, scripted_model(answer_a), ["tool_use"])
    execute(plan)
    results = plan.run_dir / "results.jsonl"
    lines = results.read_text().splitlines()
    # simulate a crash: the last record was half written, the one before never written
    results.write_text("\n".join(lines[:2]) + "\n" + lines[3][:40])
    records, warnings = read_records(plan.run_dir)
    assert len(records) == 2 and len(warnings) == 1 and "results.jsonl:3" in warnings[0]

    with pytest.raises(ConfigError, match="--resume"):
        execute(plan)  # refusing to mix two runs in one directory
    manifest = execute(plan, resume=True)
    assert manifest.status == "completed"
    records, warnings = read_records(plan.run_dir)
    assert sorted(r.task_id for r in records) == sorted(t.id for t in tasks)
    assert warnings == []  # the fragment of the cut record is gone


def judged_report_run(tmp_path, scripted_model, system_s: float = 0.0) -> tuple[dict, dict, dict]:
    """One bundled report task run by a scripted system (taking `system_s` to answer) and scored by a scripted
    judge: its record, its system trace and its judge trace."""
    report_task = next(t for t in load_tasks("bundled") if t.question_type == "report")

    def system_or_judge(request: ModelRequest, context: CallContext) -> Message:
        if context.system == "judge":
            return Message(role="assistant", content=json.dumps({"score": 1, "justification": "fine"}))
        time.sleep(system_s)
        return tool_call_message("answer", {"answer": report_task.gold.report})

    model = scripted_model(system_or_judge)
    plan = make_plan(tmp_path, [report_task], model, ["tool_use"])
    plan.judge = model
    execute(plan)
    record = records_of(plan.run_dir)[0]
    system_trace = json.loads((plan.run_dir / record["trace_file"]).read_text())
    judge_trace = json.loads((plan.run_dir / record["judge_trace_file"]).read_text())
    return record, system_trace, judge_trace


def test_report_tasks_are_judged_by_the_judge_model_in_its_own_trace(tmp_path, scripted_model):
    """Scripted system and scripted judge: judge calls are metered apart and land in their own trace."""
    record, system_trace, judge_trace = judged_report_run(tmp_path, scripted_model)
    assert record["scores"]["rs"] is not None and record["scores"]["sql_acc"] is not None
    assert judge_trace["steps"] and all(s["kind"] == "model_call" for s in judge_trace["steps"])
    assert record["judge_usage"]["input_tokens"] > 0
    assert record["model_calls"] == len([s for s in system_trace["steps"] if s["kind"] == "model_call"]) == 1


def test_the_judges_clock_starts_when_it_scores_not_while_the_system_runs(tmp_path, scripted_model):
    """Scripted system that takes 0.5 s and a scripted judge: the judge's trace (built with the unit's
    models) counts neither the system's run as its setup nor in its wall time."""
    _, system_trace, judge_trace = judged_report_run(tmp_path, scripted_model, system_s=0.5)
    assert system_trace["wall_time_s"] >= 0.5
    assert judge_trace["setup_s"] == 0.0
    assert judge_trace["wall_time_s"] < 0.4
    assert judge_trace["started_at"] >= system_trace["started_at"]


class ExplodingScorerBench(BundledBenchmark):
    """The bundled benchmark scored by a test scorer that fails on one task."""

    scoring = replace(BundledBenchmark.scoring, scorers=("test_exploding_on_t2", "tool_success"))


@reports("exact_match")
def exploding_on_t2(task, answer, trace, judge):
    if task.id == "T2":
        raise ZeroDivisionError("scorer bug")
    return {"exact_match": 1.0}


@pytest.fixture
def exploding_scorer():
    register_scorer("test_exploding_on_t2")(exploding_on_t2)
    yield
    SCORERS.unregister("test_exploding_on_t2")


def test_a_failing_scorer_gives_no_verdict_and_the_task_is_counted_beside_the_mean(
    tmp_path, scripted_model, exploding_scorer
):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:3]
    tasks = [t.model_copy(update={"id": f"T{i}"}) for i, t in enumerate(tasks, start=1)]
    plan = make_plan(tmp_path, tasks, scripted_model(answer_a), ["tool_use"], benchmark=ExplodingScorerBench())
    execute(plan)
    records = {r.task_id: r for r in read_records(plan.run_dir)[0]}
    failed = records["T2"]
    assert failed.answer["choices"] == ["A"] and failed.status == "completed"  # the answer paid for is kept
    assert failed.scores["exact_match"] is None and failed.scores["sr"] == 1.0  # no verdict, not a failure
    assert failed.scoring_error == "test_exploding_on_t2: ZeroDivisionError: scorer bug"
    (row,) = summarize(list(records.values()))
    assert row.accuracy_n == 2 and row.accuracy == pytest.approx(1.0) and row.scoring_errors == 1


def test_a_provider_failure_is_an_infrastructure_error_not_the_systems(tmp_path, scripted_model):
    from data_agent_compare.core import ModelError

    def provider_down(request: ModelRequest, context: CallContext) -> Message:
        raise ModelError("HTTP 503: upstream unavailable (gave up after 3 attempt(s))", status_code=503, attempts=3)

    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:1]
    plan = make_plan(tmp_path, tasks, scripted_model(provider_down), ["tool_use"])
    execute(plan)
    (record,) = read_records(plan.run_dir)[0]
    assert record.status == "infra_error" and "HTTP 503" in record.error
    (row,) = summarize([record])
    assert row.infra_errors == 1 and row.errors == 0 and row.accuracy is None and row.accuracy_n == 0


class _PrepareCrashes(System):
    """A system whose shared preparation (an index build) fails after the run has started."""

    name = "tool_use"

    def prepare(self, tasks, setup):
        raise RuntimeError("index build crashed")

    def run(self, task: Task, ctx: RunContext) -> Answer:
        raise AssertionError("never reached")


def test_a_run_that_fails_after_it_started_is_recorded_failed_not_left_running(tmp_path, scripted_model):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:1]
    plan = make_plan(tmp_path, tasks, scripted_model(answer_a), ["tool_use"])
    plan.systems["tool_use"] = _PrepareCrashes()
    with pytest.raises(RuntimeError, match="index build crashed"):
        execute(plan)
    assert json.loads((plan.run_dir / "manifest.json").read_text())["status"] == "failed"
