"""Scorers of (task, answer, trace). `score` applies every metric that fits the task.

Which official rule scores a task's answer follows from what the task is:

| task                                   | metric keys                                   | module         |
|----------------------------------------|-----------------------------------------------|----------------|
| function call (DBGorilla)              | ast_score, exact_match, collection_routing, … | dbgorilla.py   |
| DAB query (validate.py / ground truth) | correct                                       | dab.py         |
| DABstep factoid                        | correct, correct_strict                       | dabstep.py     |
| single / multiple choice, factoid      | exact_match (+ jaccard for multiple choice)   | exact_match.py |
| report                                 | rouge1_f, rougeL_f; rs, sql_acc, … (rubric)   | lexical.py, rubric.py |
| any task with a gold DAG               | tos, gc, tq, tf, ss                           | dag.py         |
| any task with tool calls               | sr (successful / all tool calls)              | here           |
"""

from __future__ import annotations

from compare.task import Answer, QuestionType, Task
from compare.trace import Trace
from evaluators.dab import score_dab
from evaluators.dabstep import score_dabstep
from evaluators.dag import score_dag
from evaluators.exact_match import exact_match, jaccard
from evaluators.lexical import rouge
from evaluators.rubric import RubricJudge, score_rubric

Scores = dict[str, float | None]


def answer_scores(task: Task, answer: Answer) -> Scores:
    """The benchmark's own correctness metric(s) for the answer."""
    gold = task.gold
    if task.question_type == QuestionType.FUNCTION_CALL:
        from evaluators.dbgorilla import score_dbgorilla

        return score_dbgorilla(task, answer)
    if gold is not None and (gold.validator or gold.ground_truth_file):
        return dict(score_dab(task, answer)[0])
    if task.benchmark == "dabstep":
        return score_dabstep(task, answer)
    scores: Scores = {}
    match = exact_match(task, answer)
    if match is not None:
        scores["exact_match"] = match
    if task.question_type == QuestionType.MULTIPLE_CHOICE and match is not None:
        scores["jaccard"] = jaccard(task, answer)
    return scores


def score(task: Task, answer: Answer, trace: Trace, judge: RubricJudge | None = None) -> Scores:
    scores = answer_scores(task, answer)
    scores.update(rouge(task, answer))
    scores.update(score_rubric(task, answer, judge))
    scores.update(score_dag(task, trace))
    if trace.tool_calls:
        scores["sr"] = sum(c.success for c in trace.tool_calls) / len(trace.tool_calls)
    return scores


__all__ = ["Scores", "answer_scores", "score"]
