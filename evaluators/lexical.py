"""ROUGE-1 / ROUGE-L F1 of a report against the reference report (lexical overlap only)."""

from __future__ import annotations

from functools import cache

from rouge_score import rouge_scorer

from compare.task import Answer, QuestionType, Task


@cache
def _scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rouge1", "rougeL"], use_stemmer=True)


def rouge(task: Task, answer: Answer) -> dict[str, float]:
    reference = task.gold.report if task.gold else None
    if task.question_type != QuestionType.REPORT or not reference:
        return {}
    scores = _scorer().score(reference, answer.report or answer.text or "")
    return {"rouge1_f": scores["rouge1"].fmeasure, "rougeL_f": scores["rougeL"].fmeasure}
