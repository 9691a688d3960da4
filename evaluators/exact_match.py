"""Exact match for single-choice (letter), multiple-choice (set equality) and factoid answers.

Answer extraction rules (applied only when the system gave no structured `choices`):

1. The text is stripped of a leading "answer:" / "final answer:" / "the answer is" label.
2. If what remains consists *only* of option letters separated by commas, semicolons,
   spaces, "and", brackets or quotes (e.g. "B", "A, C", "['A', 'D']", "B and C"),
   those letters are the answer.
3. Otherwise the last "answer(s) is/are/:" phrase in the text is read with rule 2.
4. Otherwise nothing is extracted and the answer scores 0. We never pick letters out of
   prose ("A large share..." is not option A).

Letters are upper-cased; letters that are not options of the task make the answer wrong.
Single choice is correct iff exactly the gold letter was chosen; multiple choice iff the
chosen set equals the gold set.

Multiple-choice partial credit is a separate metric, `jaccard` = |chosen ∩ gold| / |chosen ∪ gold|.

Factoids: both sides are trimmed, case-folded, stripped of surrounding quotes and a
trailing period. If both parse as numbers (after removing `$`, `%`, spaces and thousands
commas), the prediction is rounded to the gold's number of decimals and compared;
otherwise the whitespace-collapsed strings must be equal.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, reports, versioned
from ..core.task import Answer, QuestionType, Task
from ..core.trace import Trace
from .hedging import flag_hedged

_LABEL = re.compile(r"^\s*(?:final\s+)?(?:answer|answers)\s*(?:is|are)?\s*[:=]?\s*|^\s*the\s+answer\s+is\s*:?\s*", re.I)
_SEPARATORS = r"[\s\[\](){}'\"`,;/&.]"
_LETTERS_ONLY = re.compile(rf"^{_SEPARATORS}*([A-Za-z](?:(?:{_SEPARATORS}|\band\b)+[A-Za-z])*){_SEPARATORS}*$", re.I)
_ANSWER_PHRASE = re.compile(r"answers?\s*(?:is|are)?\s*[:=]?\s*(.+?)(?:$|\n)", re.I)


def _letters_only(text: str) -> list[str] | None:
    match = _LETTERS_ONLY.match(text.strip())
    if not match:
        return None
    return re.findall(r"\b([A-Za-z])\b", re.sub(r"\band\b", " ", match.group(1), flags=re.I))


def extract_choices(text: str) -> list[str]:
    """Option letters stated in free text, by the rules in the module docstring."""
    letters = _letters_only(_LABEL.sub("", text, count=1))
    if letters is None:
        phrases = _ANSWER_PHRASE.findall(text)
        letters = _letters_only(phrases[-1]) if phrases else None
    return sorted({letter.upper() for letter in letters or []})


def chosen_letters(answer: Answer) -> list[str]:
    if answer.choices is not None:
        return sorted({c.strip().upper() for c in answer.choices if c.strip()})
    return extract_choices(answer.text)


def gold_letters(task: Task) -> list[str]:
    gold = task.gold.answer if task.gold else None
    values = gold if isinstance(gold, list) else [gold] if gold else []
    return sorted({str(v).strip().upper() for v in values})


def choice_match(task: Task, answer: Answer) -> float:
    chosen, gold = chosen_letters(answer), gold_letters(task)
    if any(letter not in (task.options or {}) for letter in chosen):
        return 0.0
    if task.question_type == QuestionType.SINGLE_CHOICE and len(chosen) != 1:
        return 0.0
    return float(bool(chosen) and chosen == gold)


def _normalize(text: str) -> str:
    text = " ".join(text.strip().casefold().split())
    text = text.strip("\"'`")
    return text[:-1] if text.endswith(".") else text


def _as_number(text: str) -> Decimal | None:
    cleaned = re.sub(r"[\s$%]", "", text).replace(",", "")
    if not re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", cleaned, re.I):
        return None
    try:
        return Decimal(cleaned)
    except InvalidOperation:
        return None


def factoid_match(prediction: str, gold: str) -> float:
    predicted, expected = _normalize(prediction), _normalize(gold)
    predicted_number, gold_number = _as_number(predicted), _as_number(expected)
    if predicted_number is not None and gold_number is not None:
        exponent = gold_number.as_tuple().exponent
        quantum = Decimal(1).scaleb(exponent if isinstance(exponent, int) else 0)
        return float(predicted_number.quantize(quantum, rounding=ROUND_HALF_UP) == gold_number)
    return float(predicted == expected)


def exact_match(task: Task, answer: Answer) -> float | None:
    """1.0 / 0.0, or None when the task has no gold answer or is not a choice/factoid task."""
    if task.gold is None or task.gold.answer is None:
        return None
    if task.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE):
        return choice_match(task, answer)
    if task.question_type == QuestionType.FACTOID:
        return factoid_match(answer.text, str(task.gold.answer))
    return None


def jaccard(task: Task, answer: Answer) -> float:
    """Partial credit for multiple choice: |chosen ∩ gold| / |chosen ∪ gold| (a separate metric,
    never part of exact match; letters that are not options count against the answer)."""
    chosen, gold = set(chosen_letters(answer)), set(gold_letters(task))
    union = chosen | gold
    return len(chosen & gold) / len(union) if union else 0.0


@versioned("1")
@reports("exact_match", verdict=True)
def exact_match_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `exact_match`: exact_match of choice and factoid tasks with a gold answer, and
    jaccard for multiple choice; a factoid answer listing many candidates is flagged `hedged` (`hedging.py`)."""
    flag_hedged(task, answer, trace)
    match = exact_match(task, answer)
    if match is None:
        return ScoreResult()
    if task.question_type == QuestionType.MULTIPLE_CHOICE:
        return ScoreResult({"exact_match": match, "jaccard": jaccard(task, answer)})
    return ScoreResult({"exact_match": match})
