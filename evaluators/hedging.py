"""Hedged answers: an answer that lists many candidates of the gold's kind (years or decades, numbers,
names) passes containment checks — DAB's validators among them — without committing to one. The check
flags such answers beside the official verdict; it never changes that verdict unless the run asks for
`--strict-answers` (then a flagged answer scores as wrong; `core.scorer.score`).

The gold's kind, from its items (DAB: the cells of ground_truth.csv; other benchmarks: the gold answer, a
list's items):
- years: every item is a year or a decade (`2020`, `2020s`, `1980's`): candidates are the distinct years
  and decades in the answer (`1990s` and `1990` are one).
- numbers: every item is a number: candidates are the distinct numbers in the answer (thousands commas,
  `$`, `%` ignored).
- names: any other item: candidates are the distinct entries of the answer's lists — its lines (bullets and
  numbering stripped), and the comma- or semicolon-separated parts of a line that has at least two.

An answer is flagged when it has at least `2 × items + 3` candidates: a one-item gold (bookreview/query1's
`2020`) flags at 5, a 28-name gold at 59. Choice questions are left to their exact match. The flag is the
record's warning `hedged` (its detail says how many candidates of which kind), counted by the reports like
every warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.scorer import HEDGED
from ..core.task import Answer, QuestionType, Task
from ..core.trace import RunWarning, Trace

_YEAR_ITEM = re.compile(r"[12]\d{3}(?:'?s)?")
_YEAR = re.compile(r"(?<![\w.])([12]\d{3})(?:'?s)?(?!\w)")
_NUMBER_ITEM = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
MAX_ENTRY_WORDS = 15  # a longer line is prose, not a listed candidate


@dataclass(frozen=True)
class Hedge:
    kind: str  # "years", "numbers", "names"
    candidates: int
    gold_items: int

    @property
    def detail(self) -> str:
        return f"the answer lists {self.candidates} {self.kind} where the gold has {self.gold_items}"


def hedge_of(text: str, items: list[str]) -> Hedge | None:
    """The hedge of an answer against gold `items`, or None when it lists few enough candidates."""
    items = [item.strip() for item in items if item and item.strip()]
    if not items or not text.strip():
        return None
    kind, candidates = _candidates(text, items)
    if len(candidates) < 2 * len(items) + 3:
        return None
    return Hedge(kind, len(candidates), len(items))


def _candidates(text: str, items: list[str]) -> tuple[str, set[str]]:
    if all(_YEAR_ITEM.fullmatch(item) for item in items):
        return "years", set(_YEAR.findall(text))
    if all(_NUMBER_ITEM.fullmatch(re.sub(r"[\s$%,]", "", item)) for item in items):
        return "numbers", {_canonical(match) for match in _NUMBER.findall(text)}
    return "names", set(_list_entries(text))


def _canonical(number: str) -> str:
    value = float(number.replace(",", ""))
    return str(int(value)) if value.is_integer() else repr(value)


def _list_entries(text: str) -> list[str]:
    entries = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip().strip("|").strip()
        parts = re.split(r"\s*[;,]\s*", line)
        for part in parts if len(parts) >= 3 else [line]:
            words = part.split()
            if words and len(words) <= MAX_ENTRY_WORDS:
                entries.append(" ".join(words).casefold())
    return entries


def gold_items(task: Task) -> list[str]:
    """The gold answer's items (a list's items); [] for choice questions and tasks without a gold answer. A
    benchmark whose gold lives in its own files reads them itself and hands `flag_hedged` the items."""
    gold = task.gold
    if gold is None or task.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE):
        return []
    if isinstance(gold.answer, list):
        return [str(item) for item in gold.answer]
    return [str(gold.answer)] if gold.answer is not None else []


def flag_hedged(task: Task, answer: Answer, trace: Trace, items: list[str] | None = None) -> Hedge | None:
    """Put the `hedged` warning on the trace (hence the record) when the answer hedges; the hedge or None.
    `items`: the gold's items as the benchmark reads them (default: `gold_items`)."""
    hedge = hedge_of(answer.text or answer.report or "", gold_items(task) if items is None else items)
    if hedge is not None and all(warning.code != HEDGED for warning in trace.warnings):
        trace.warnings.append(RunWarning(code=HEDGED, detail=hedge.detail))
    return hedge
