"""ROUGE-1 / ROUGE-L F1 of a report against the reference report (lexical overlap only)."""

from __future__ import annotations

from functools import cache

from rouge_score.rouge_scorer import RougeScorer

from ..compare.model import MeteredModel
from ..compare.scorer import Scores, reports
from ..compare.task import Answer, QuestionType, Task
from ..compare.trace import Trace


@cache
def _scorer() -> RougeScorer:
    return RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge(task: Task, answer: Answer) -> dict[str, float]:
    reference = task.gold.report if task.gold else None
    if task.question_type != QuestionType.REPORT or not reference:
        return {}
    scores = _scorer().score(reference, answer.report or answer.text or "")
    return {"rouge1_f": scores["rouge1"].fmeasure, "rougeL_f": scores["rougeL"].fmeasure}


@reports("rouge1_f", "rougeL_f")
def rouge_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores:
    """Scorer `rouge`: ROUGE-1 and ROUGE-L F of a report against the reference report."""
    return dict(rouge(task, answer))
