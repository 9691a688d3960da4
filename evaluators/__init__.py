"""Scorers of (task, answer, trace). `score` applies every metric that fits the task."""

from __future__ import annotations

from compare.task import Answer, Task
from compare.trace import Trace
from evaluators.exact_match import exact_match
from evaluators.lexical import rouge
from evaluators.rubric import RubricJudge, score_rubric


def score(task: Task, answer: Answer, trace: Trace, judge: RubricJudge | None = None) -> dict[str, float | None]:
    scores: dict[str, float | None] = {}
    match = exact_match(task, answer)
    if match is not None:
        scores["exact_match"] = match
    scores.update(rouge(task, answer))
    scores.update(score_rubric(task, answer, judge))
    tool_calls = trace.tool_calls
    if tool_calls:
        scores["tool_success_rate"] = sum(c.success for c in tool_calls) / len(tool_calls)
    return scores


__all__ = ["exact_match", "rouge", "score"]
