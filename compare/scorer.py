"""Scorers: functions of (task, answer, trace) that return named metrics.

A scorer is registered by name (`SCORERS`: `@register_scorer("name")` or an entry point in
`data_agent_compare.scorers`) and a benchmark lists the scorers that apply to its tasks. A
scorer returns only the metrics that fit the task (an empty dict otherwise): a report scorer
says nothing about a choice question. `judge` is the metered model of the LLM judge, when the
run has one (`--judge`), for scorers that need one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from .model import MeteredModel
from .registry import Registry
from .task import Answer, Task
from .trace import Trace

Scores = dict[str, float | None]


class Scorer(Protocol):
    def __call__(self, task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores: ...


SCORERS: Registry[Scorer] = Registry("scorers")


def register_scorer(name: str) -> Callable[[Scorer], Scorer]:
    def decorate(scorer: Scorer) -> Scorer:
        SCORERS.register(name, scorer)
        return scorer

    return decorate


def score(
    task: Task, answer: Answer, trace: Trace, scorers: Sequence[str], judge: MeteredModel | None = None
) -> Scores:
    """The metrics of every named scorer, merged in order."""
    scores: Scores = {}
    for name in scorers:
        scores.update(SCORERS.load(name)(task, answer, trace, judge))
    return scores
