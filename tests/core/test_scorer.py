"""A scorer that raises (core/scorer.py `score`): its error is recorded and the metrics it declares with
@reports get no value (out of their means); what it returned on earlier tasks of the process changes
nothing, so the thread and process executors score alike."""

from __future__ import annotations

import pytest

from data_agent_compare.core.scorer import (
    SCORERS,
    ScoreResult,
    ScorerInfo,
    ScoringError,
    register_scorer,
    reports,
    score,
    scorer_info,
    versioned,
)
from data_agent_compare.core.task import Answer, QuestionType, Task
from data_agent_compare.core.trace import Trace


def task(task_id: str) -> Task:
    return Task(id=task_id, benchmark="test", question="q", question_type=QuestionType.FACTOID)


def undeclared_fragile(task, answer, trace, judge):
    """A test scorer without @reports that fails on task "bad"."""
    if task.id == "bad":
        raise ValueError("scorer bug")
    return {"hits": 1.0}


def partial(task, answer, trace, judge):
    """A test scorer that gives part of its verdict."""
    raise ScoringError("one part unscored", {"part": 0.5})


partial.metrics = ("whole",)  # set by hand, as a plug-in written before `ScorerInfo` may (@reports("whole"))


@pytest.fixture
def registered():
    register_scorer("test_undeclared_fragile")(undeclared_fragile)
    register_scorer("test_partial")(partial)
    yield
    SCORERS.unregister("test_undeclared_fragile")
    SCORERS.unregister("test_partial")


def run(task_id: str, scorers: list[str]):
    return score(task(task_id), Answer(text="x"), Trace(task_id=task_id, system="s", model="m"), scorers)


def test_a_raising_scorer_without_reports_records_a_scoring_error_and_no_metric(registered):
    first_failure = run("bad", ["test_undeclared_fragile"])
    assert first_failure.error == "test_undeclared_fragile: ValueError: scorer bug"
    assert first_failure.scores == {}
    assert run("good", ["test_undeclared_fragile"]).scores == {"hits": 1.0}
    failed = run("bad", ["test_undeclared_fragile"])  # after a task it scored: the same as before it
    assert (failed.error, failed.scores) == (first_failure.error, {})


def test_a_partial_verdict_keeps_what_was_scored_and_leaves_the_declared_metric_without_a_value(registered):
    sheet = run("t", ["test_partial"])
    assert sheet.scores == {"part": 0.5, "whole": None}
    assert sheet.error == "test_partial: ScoringError: one part unscored"


PLUGIN = '''
"""A test plugin: the scripted test model answers at once; scorer "test_fragile" fails on the last task."""

import json

from data_agent_compare import Benchmark, Gold, QuestionType, ScoringRules, Task, register_benchmark
from data_agent_compare.core import register_provider, register_scorer, reports
from data_agent_compare.providers.scripted import ScriptedProvider, tool_call_message
from data_agent_compare.tools import default_tools


def respond(request, context):
    return tool_call_message("answer", {"answer": context.task_id})


register_provider("scripted")(lambda: ScriptedProvider(respond))


@register_scorer("test_fragile")
def fragile(task, answer, trace, judge):  # declares nothing: a failure leaves no metric
    if task.id == "Q3":
        raise ValueError("scorer bug")
    return {"hits": 1.0}


@register_scorer("test_fragile_declared")
@reports("checked")
def fragile_declared(task, answer, trace, judge):
    if task.id == "Q3":
        raise ValueError("scorer bug")
    return {"checked": 1.0}


@register_benchmark
class Quiz(Benchmark):
    name = "test_scorer_quiz"
    scoring = ScoringRules(scorers=("exact_match", "test_fragile", "test_fragile_declared"))

    def load(self):
        return [
            Task(id=f"Q{i}", benchmark=self.name, question="Say your id.", question_type=QuestionType.FACTOID,
                 gold=Gold(answer=f"Q{i}"))
            for i in range(4)
        ]

    def tools(self, task, settings):
        return default_tools(task, settings)
'''


@pytest.mark.slow  # two `compare` processes, one with worker processes: ~20 s
def test_a_scorer_failing_on_one_task_scores_alike_under_the_thread_and_process_executors_scripted(tmp_path):
    """Issue 28 item 4: which metrics a failure zeroed depended on what the process had scored before."""
    import os
    import subprocess

    from data_agent_compare.core.runlog import read_run

    from helpers import ROOT, compare_command

    plugin, models, config = tmp_path / "plugin.py", tmp_path / "models.yaml", tmp_path / "run.yaml"
    plugin.write_text(PLUGIN.lstrip())
    models.write_text("models:\n  scripted: {provider: scripted, model_id: v1}\n")
    config.write_text(
        f"plugins: [{plugin}]\nmodels_file: {models}\nmodels: [scripted]\nworkflows: [tool_use]\n"
        f"benchmark: test_scorer_quiz\ntasks_path: {tmp_path}\nconcurrency: 1\n"
    )
    outcomes = {}
    for executor in ("thread", "process"):
        out = tmp_path / executor
        flags = ("--config", str(config), "--out", str(out), "--executor", executor)
        done = subprocess.run(compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ))  # fmt: skip
        assert done.returncode == 0, done.stderr
        outcomes[executor] = {r.task_id: (r.scores, r.scoring_error) for r in read_run(out).records}
    assert outcomes["thread"] == outcomes["process"]
    scores, error = outcomes["thread"]["Q3"]
    assert "hits" not in scores and scores["checked"] is None and scores["exact_match"] == 1.0
    assert error == "test_fragile: ValueError: scorer bug; test_fragile_declared: ValueError: scorer bug"
    assert outcomes["thread"]["Q0"][0] == {"checked": 1.0, "exact_match": 1.0, "hits": 1.0}


def test_a_scorer_returning_something_other_than_numbers_is_a_scoring_error_naming_the_metric() -> None:
    @reports("verdict")
    def wordy(task, answer, trace, judge):
        return ScoreResult({"verdict": "yes"})

    register_scorer("test_wordy")(wordy)
    try:
        sheet = run("t", ["test_wordy"])
    finally:
        SCORERS.unregister("test_wordy")

    assert sheet.scores == {"verdict": None}
    assert sheet.error == "test_wordy: TypeError: metric 'verdict' is str 'yes', not a number or None"


def test_a_score_result_keeps_numbers_as_the_record_writes_them_and_cannot_be_changed() -> None:
    result = ScoreResult({"exact_match": True, "count": 3, "rs": None})

    assert result.scores() == {"exact_match": 1.0, "count": 3.0, "rs": None}
    assert all(type(value) is float for value in result.metrics.values() if value is not None)
    with pytest.raises(TypeError):
        result.metrics["exact_match"] = 0.0  # type: ignore[index]
    assert ScoreResult.of({"x": 0.5}) == ScoreResult({"x": 0.5})


def test_declarations_hold_in_any_decorator_order_and_hand_set_attributes_still_read() -> None:
    @versioned("2")
    @reports("correct", verdict=True)
    def above(task, answer, trace, judge):
        return ScoreResult()

    @reports("correct", verdict=True)
    @versioned("2")
    def below(task, answer, trace, judge):
        return ScoreResult()

    expected = ScorerInfo(version="2", metrics=("correct",), verdict=True)
    assert scorer_info(above) == scorer_info(below) == expected
    assert scorer_info(partial) == ScorerInfo(metrics=("whole",))  # a plug-in's attributes set by hand
