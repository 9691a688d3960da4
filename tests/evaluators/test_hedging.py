"""Hedged answers are visible (issue 25 item 9): on DAB's bookreview/query1 (gold `2020`) an answer listing
every decade from the 1900s to the 2020s passes DAB's containment check; it is now flagged `hedged` beside
that official verdict, and scores as wrong only under `--strict-answers` (strict_answers)."""

from __future__ import annotations

import pytest

from data_agent_compare.compare.scorer import score
from data_agent_compare.compare.task import Answer
from data_agent_compare.compare.trace import Trace
from data_agent_compare.evaluators.hedging import gold_items, hedge_of

from helpers import FIXTURES, load_tasks

EVERY_DECADE = "Average rating by decade: " + ", ".join(f"{year}s" for year in range(1900, 2030, 10))
COMMITTED = "The 2020s have the highest average rating (4.6), ahead of the 2010s (4.4)."


@pytest.fixture(scope="module")
def query1():
    return next(t for t in load_tasks("dab", FIXTURES / "dab") if t.id == "bookreview/query1")


def scored(task, text: str, strict: bool = False):
    trace = Trace(task_id=task.id, system="s", model="m")
    return score(task, Answer(text=text), trace, ["dab"], strict_answers=strict), trace


def test_the_answer_listing_every_decade_passes_the_official_check_and_is_flagged_hedged(query1):
    assert gold_items(query1) == ["2020"]
    sheet, trace = scored(query1, EVERY_DECADE)
    assert sheet.scores == {"correct": 1.0}  # the official verdict stays the headline: published parity
    assert [(w.code, w.detail) for w in trace.warnings] == [
        ("hedged", "the answer lists 13 years where the gold has 1")
    ]


def test_strict_answers_scores_the_hedged_answer_as_wrong_and_leaves_a_committed_one_alone(query1):
    assert scored(query1, EVERY_DECADE, strict=True)[0].scores == {"correct": 0.0}
    sheet, trace = scored(query1, COMMITTED, strict=True)
    assert sheet.scores == {"correct": 1.0} and trace.warnings == []


@pytest.mark.parametrize(
    ("text", "items", "flagged"),
    [
        ("It is 42.", ["42"], None),
        ("Maybe 40, 41, 42, 43 or 44.", ["42"], ("numbers", 5)),
        ("- Ann\n- Bob\n- Cy\n- Dee\n- Eve", ["Ann"], ("names", 5)),
        ("Ann, Bob, Cy, Dee, Eve", ["Ann", "Bob"], None),  # 5 names for a 2-name gold: under 2 × 2 + 3
        ("The 1990s, not the 1980s or 1970s.", ["1990s"], None),
    ],
)
def test_candidates_of_the_golds_kind_are_counted_against_the_gold(text, items, flagged):
    hedge = hedge_of(text, items)
    assert (hedge and (hedge.kind, hedge.candidates)) == flagged
