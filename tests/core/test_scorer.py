"""A scorer that raises (compare.scorer.score): its error is recorded and its metrics count as failures,
whether or not it declared them with @reports."""

from __future__ import annotations

import pytest

from data_agent_compare.compare.scorer import SCORERS, ScoringError, register_scorer, score
from data_agent_compare.compare.task import Answer, QuestionType, Task
from data_agent_compare.compare.trace import Trace


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


partial.metrics = ("whole",)  # as @reports("whole") sets it


@pytest.fixture
def registered():
    register_scorer("test_undeclared_fragile")(undeclared_fragile)
    register_scorer("test_partial")(partial)
    yield
    SCORERS.unregister("test_undeclared_fragile")
    SCORERS.unregister("test_partial")


def run(task_id: str, scorers: list[str]):
    return score(task(task_id), Answer(text="x"), Trace(task_id=task_id, system="s", model="m"), scorers)


def test_a_raising_scorer_without_reports_records_a_scoring_error_and_scores_its_metrics_zero(registered):
    first_failure = run("bad", ["test_undeclared_fragile"])  # nothing known of its metrics yet
    assert first_failure.error == "test_undeclared_fragile: ValueError: scorer bug"
    assert run("good", ["test_undeclared_fragile"]).scores == {"hits": 1.0}
    failed = run("bad", ["test_undeclared_fragile"])
    assert failed.error == "test_undeclared_fragile: ValueError: scorer bug"
    assert failed.scores == {"hits": 0.0}  # the task stays in the mean of `hits`, as a failure


def test_a_partial_verdict_keeps_what_was_scored_and_fails_the_declared_metric(registered):
    sheet = run("t", ["test_partial"])
    assert sheet.scores == {"part": 0.5, "whole": 0.0}
    assert sheet.error == "test_partial: ScoringError: one part unscored"
