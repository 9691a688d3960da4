"""DABstep scoring fidelity: the official rule on the real dev answers, verdicts worked out by hand.

Each case states the official verdict, the strict verdict, and in a comment why the official
rule (evaluators/dabstep.py docstring) decides as it does.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_agent_compare.core.task import Answer, Gold, QuestionType, Task
from data_agent_compare.evaluators.dabstep import question_scorer, score_dabstep, strict_question_scorer

from helpers import FIXTURES

DEV = FIXTURES / "dabstep" / "dev.jsonl"
GOLD = {task["task_id"]: task["answer"] for task in map(json.loads, DEV.read_text().splitlines())}

G1464 = GOLD["1464"]  # 347 fee ids, 1-4 digits, ", " separated
G1681 = GOLD["1681"]  # 10 fee ids, all three digits
G1753 = GOLD["1753"]  # 34 fee ids, some two digits (36, 51, 53, 64)
IDS_1464, IDS_1681, IDS_1753 = G1464.split(", "), G1681.split(", "), G1753.split(", ")

CASES = [
    # task, prediction, official, strict
    ("5", "nl", True, True),  # case-insensitive
    ("5", "  NL \n", True, True),  # trimmed
    ("5", "NL.", True, False),  # rule 4: non-word characters removed → "nl" == "nl"; strict keeps the "."
    ("5", "The answer is NL", True, False),  # rule 4: gold is one word, contained in the answer's words
    ("5", "NL or BE", True, False),  # same containment: a hedge that names the gold word passes
    ("5", "BE", False, False),  # two single words, neither set contains the other
    ("5", "Netherlands", False, False),  # different single word
    ("49", "b. be", True, True),  # case-insensitive
    ("49", "B BE", True, False),  # rule 4: "bbe" == "bbe" once non-word characters are removed
    ("49", "B", True, False),  # rule 4: {"b"} ⊆ {"b", "be"} — the letter alone passes
    ("49", "B. ES", False, False),  # two words each, no containment; difflib ratio 8/10 = 0.8 ≤ 0.95
    ("49", "C. ES", False, False),  # two words each, ratio 4/10 ≤ 0.95
    ("70", "NOT APPLICABLE", True, True),  # case-insensitive
    ("70", "Not  applicable.", True, False),  # rule 4: both clean to "notapplicable"
    ("70", "Applicable", True, False),  # rule 4: single word contained in {"not", "applicable"}
    ("70", "N/A", False, False),  # two words each ("n", "a"), ratio far below 0.95
    ("1273", "0.1201320", True, True),  # rule 1 (plain decimal): 0.120132 == 0.120132
    ("1273", "$0.120132", True, True),  # rule 1 allows a leading "$", removed before extraction
    ("1273", "0.120132 EUR", True, False),  # rule 1 via the gold; first number of the prediction is 0.120132
    ("1273", ".120132", True, True),  # rule 1 via the gold; "\d*\.\d+" reads .120132
    ("1273", "0.1201", True, False),  # both < 1: |Δ| = 3.2e-5 ≤ abs_tol 1e-4; strict: rel 2.7e-4 > 1e-6
    ("1273", "0.12", False, False),  # both < 1: |Δ| = 1.32e-4 > 1e-4
    ("1273", "-0.120132", True, False),  # minus sign never captured: reads 0.120132
    ("1273", "12.0132%", False, False),  # 12.0132 vs 0.120132: rounded to 4 places 12.0132 ≠ 0.1201, not close
    ("1273", "0,120132", False, False),  # rule 1 takes "0,120132" as a decimal, then deletes the comma: 120132
    ("1305", "0.12321700", True, True),  # trailing zeros: same float
    ("1305", "0.1232", True, False),  # both < 1: |Δ| = 1.7e-5 ≤ 1e-4
    ("1305", "0.124217", False, False),  # both < 1: |Δ| = 1e-3 > 1e-4
    ("1464", ", ".join(reversed(IDS_1464)), True, True),  # rule 2: items sorted before comparing
    ("1464", f"[{G1464}]", True, True),  # rule 2: one leading "[" and trailing "]" stripped
    ("1464", "; ".join(IDS_1464), True, True),  # rule 2: ";" splits like ","
    ("1464", ",".join(IDS_1464), True, True),  # no 3-digit groups after "1," → not rule 1; list as before
    ("1464", ", ".join(IDS_1464[:-1]), False, False),  # rule 2: 346 items vs 347
    ("1464", ", ".join([*IDS_1464, "1000"]), False, False),  # rule 2: a duplicate makes 348 items
    ("1464", G1464.replace("1000", "1001"), False, False),  # sorted "1001" pairs with "1000": 1001 ≠ 1000
    ("1681", ", ".join(IDS_1681[::-1]), True, True),  # rule 2: order-free
    ("1681", ",".join(IDS_1681), False, True),  # rule 1: "741,709,…" is one number 7.4e29; gold reads 741
    ("1681", ", ".join([*IDS_1681[:-1], "287"]), False, False),  # sorted "287" pairs with "286": 287 ≠ 286
    ("1753", G1753.replace(" 36,", " 036,"), False, True),  # sorted as strings "036" pairs with "107"
    ("1871", "-0.94000000000005", True, True),  # identical
    ("1871", "0.94000000000005", True, False),  # rule 3 compares unsigned first numbers
    ("1871", "-0.94", True, True),  # rule 3, both < 1: |Δ| = 5e-14; strict: within rel 1e-6 too
    ("1871", "-0.94005", True, False),  # rule 3, both < 1: |Δ| = 5e-5 ≤ 1e-4; strict: > 1e-6
    ("1871", "-0.95", False, False),  # |Δ| = 0.01 > 1e-4
    ("1871", "-0.94000000000005 EUR", True, False),  # rule 3 reads the first number; strict wants the number alone
    ("2697", "e:13.57", True, True),  # case-insensitive
    ("2697", "E: 13.57", True, False),  # rule 3: 13.57 == 13.57; strict: the strings differ
    ("2697", "F:13.57", True, False),  # rule 3 sees only the number, the ACI letter is ignored
    ("2697", "13.57", True, False),  # rule 1 via the prediction; the gold's first number is 13.57
    ("2697", "E:13.5700", True, False),  # rule 3: same float
    ("2697", "E:13.571", True, False),  # rule 3: rounded to min(3, 2) = 2 places, 13.57 == 13.57
    ("2697", "E:13.58", False, False),  # rounded to 2 places 13.58 ≠ 13.57; rel Δ 7e-4 > 1e-4
]


@pytest.mark.parametrize("task_id", sorted(GOLD))
def test_every_dev_gold_matches_itself(task_id):
    assert question_scorer(GOLD[task_id], GOLD[task_id])
    assert strict_question_scorer(GOLD[task_id], GOLD[task_id])


@pytest.mark.parametrize(("task_id", "prediction", "official", "strict"), CASES)
def test_dev_answer_variants(task_id, prediction, official, strict):
    assert question_scorer(prediction, GOLD[task_id]) is official
    assert strict_question_scorer(prediction, GOLD[task_id]) is strict


@pytest.mark.parametrize(
    ("prediction", "gold", "official", "strict"),
    [
        ("1,234.5", "1234.5", True, True),  # rule 1: comma thousands; commas removed before extraction
        ("$1,234.50", "1234.5", True, True),  # rule 1: "$" and trailing zero
        ("64", "64.0", True, True),  # rule 1 via "64.0" (a plain decimal); 64 == 64
        ("64 transactions", "64", True, False),  # plain integers skip rule 1; rule 3 first numbers 64 == 64
        ("-5.5", "5.5", True, False),  # the minus-sign quirk
        ("0,99", "0.99", False, False),  # "0,99" counts as a decimal, then reads 99
        ("", "", True, True),  # an empty-list answer is an empty string
        ("[]", "", True, True),  # rule 4: both clean to ""; strict: "[]" is the empty list
    ],
)
def test_rule_examples_beyond_the_dev_set(prediction, gold, official, strict):
    assert question_scorer(prediction, gold) is official
    assert strict_question_scorer(prediction, gold) is strict


def test_strict_tolerance_is_explicit():
    assert not strict_question_scorer("-0.94005", GOLD["1871"])
    assert strict_question_scorer("-0.94005", GOLD["1871"], rel_tol=1e-4)
    assert strict_question_scorer("0.1201", GOLD["1273"], rel_tol=0, abs_tol=1e-4)


# ---------------------------------------------------------------- properties

ITEMS = st.one_of(
    st.integers(0, 10**6).map(str),
    st.decimals(0, 1000, places=3, allow_nan=False).map(str),
    st.text(st.characters(categories=["L"]), min_size=1, max_size=8),
)
WORDS = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=1, max_size=8)
NUMBERS = st.tuples(st.integers(-(10**9), 10**9), st.integers(0, 6)).map(lambda mk: f"{mk[0] / 10 ** mk[1]:.{mk[1]}f}")


@given(st.lists(ITEMS, max_size=12), st.randoms(), st.sampled_from([", ", "; ", ","]), st.booleans())
def test_list_order_never_matters(items, random, separator, brackets):
    gold = ", ".join(items)
    shuffled = random.sample(items, len(items))
    prediction = separator.join(shuffled)
    if brackets:
        prediction = f"[{prediction}]"
    if separator != "," or len(items) < 2:  # "741,709" without spaces is rule 1's number, not a list
        assert question_scorer(prediction, gold)
    assert strict_question_scorer(prediction, gold)


@given(NUMBERS.filter(lambda s: float(s) > 0))
def test_strict_keeps_the_sign_official_drops_it(number):
    assert question_scorer(f"-{number}", number)
    assert not strict_question_scorer(f"-{number}", number)


@given(NUMBERS, NUMBERS)
def test_strict_numbers_agree_exactly_with_the_stated_tolerance(a, b):
    assert strict_question_scorer(a, b) is (
        abs(float(a) - float(b)) <= max(1e-6 * max(abs(float(a)), abs(float(b))), 1e-9)
    )


@given(WORDS, WORDS)
def test_strict_rejects_extra_words_official_accepts_them(word, extra):
    assert question_scorer(f"{word} {extra}", word)
    assert not strict_question_scorer(f"{word} {extra}", word)


@given(WORDS, WORDS)
def test_strict_keeps_punctuation_official_drops_it(first, second):
    assert question_scorer(f"{first}. {second}", f"{first} {second}")
    assert not strict_question_scorer(f"{first}. {second}", f"{first} {second}")


@given(WORDS, NUMBERS)
def test_strict_never_extracts_a_number_from_text(word, number):
    assert not strict_question_scorer(f"{word}:{number}", number)


@given(st.text(st.characters(codec="ascii"), max_size=30))
def test_strict_ignores_case_and_whitespace(text):
    assert strict_question_scorer(f" \t{text.upper().replace(' ', '  ')}\n", text)


# ---------------------------------------------------------------- per-task scores


def dabstep_task(answer: str | None) -> Task:
    gold = Gold(answer=answer) if answer is not None else None
    return Task(id="dabstep-1871", benchmark="dabstep", question="q", question_type=QuestionType.FACTOID, gold=gold)


def test_score_dabstep_reports_both_verdicts():
    task = dabstep_task(GOLD["1871"])
    assert score_dabstep(task, Answer(text="-0.94000000000005")) == {"correct": 1.0, "correct_strict": 1.0}
    assert score_dabstep(task, Answer(text="0.94000000000005")) == {"correct": 1.0, "correct_strict": 0.0}
    assert score_dabstep(task, Answer(text="-0.95")) == {"correct": 0.0, "correct_strict": 0.0}


def test_score_dabstep_without_gold_is_none():
    assert score_dabstep(dabstep_task(None), Answer(text="x")) == {"correct": None, "correct_strict": None}


def test_a_run_without_an_answer_is_wrong_even_for_an_empty_gold():
    assert question_scorer("", "")  # what the official rule alone would say
    task = dabstep_task("")
    assert score_dabstep(task, Answer(text="", status="error")) == {"correct": 0.0, "correct_strict": 0.0}
    assert score_dabstep(task, Answer(text="")) == {"correct": 1.0, "correct_strict": 1.0}
