"""Exact match for choice letters, multiple-choice sets and factoids, with the documented extraction rules."""

import pytest

from data_agent_compare.core.task import Answer, Gold, QuestionType, Task
from data_agent_compare.evaluators.exact_match import exact_match, extract_choices, factoid_match

OPTIONS = {letter: f"option {letter}" for letter in "ABCDEF"}


def choice_task(kind: QuestionType, gold: list[str]) -> Task:
    return Task(id="t", benchmark="b", question="q", question_type=kind, options=OPTIONS, gold=Gold(answer=gold))


@pytest.mark.parametrize(
    ("text", "letters"),
    [
        ("B", ["B"]),
        ("b", ["B"]),
        ("A, C", ["A", "C"]),
        ("['A', 'D']", ["A", "D"]),
        ("B and C", ["B", "C"]),
        ("Answer: C", ["C"]),
        ("The answer is B.", ["B"]),
        ("Looking at the data... so the answers are: A, D", ["A", "D"]),
        ("A large share of revenue comes from the West", []),  # prose is never read as letters
        ("", []),
    ],
)
def test_extraction_rules(text, letters):
    assert extract_choices(text) == letters


def test_single_choice_needs_exactly_the_gold_letter():
    task = choice_task(QuestionType.SINGLE_CHOICE, ["B"])
    assert exact_match(task, Answer(choices=["B"])) == 1.0
    assert exact_match(task, Answer(text="The answer is B")) == 1.0
    assert exact_match(task, Answer(choices=["A"])) == 0.0
    assert exact_match(task, Answer(choices=["A", "B"])) == 0.0  # hedging is wrong
    assert exact_match(task, Answer(text="")) == 0.0


def test_multiple_choice_is_set_equality():
    task = choice_task(QuestionType.MULTIPLE_CHOICE, ["B", "C", "E"])
    assert exact_match(task, Answer(choices=["E", "B", "C"])) == 1.0  # order does not matter
    assert exact_match(task, Answer(choices=["B", "C"])) == 0.0  # a subset is not a match
    assert exact_match(task, Answer(choices=["B", "C", "E", "F"])) == 0.0
    assert exact_match(task, Answer(choices=["B", "C", "E", "Z"])) == 0.0  # not an option


def test_factoid_numbers_and_strings():
    assert factoid_match("1,234.567", "1234.57") == 1.0  # rounded to the gold's decimals
    assert factoid_match("$12.50", "12.5") == 1.0
    assert factoid_match("12", "12.4") == 0.0
    assert factoid_match("West", "west.") == 1.0
    assert factoid_match("  North East ", "north east") == 1.0
    assert factoid_match("Northeast", "West") == 0.0


def test_tasks_without_gold_are_not_scored():
    task = Task(id="t", benchmark="b", question="q", question_type=QuestionType.FACTOID)
    assert exact_match(task, Answer(text="5")) is None


def test_multiple_choice_jaccard_is_partial_credit():
    from data_agent_compare.evaluators.exact_match import jaccard

    task = choice_task(QuestionType.MULTIPLE_CHOICE, ["B", "C", "E"])
    assert jaccard(task, Answer(choices=["B", "C", "E"])) == 1.0
    assert jaccard(task, Answer(choices=["B", "C"])) == 2 / 3
    assert jaccard(task, Answer(choices=["B", "F"])) == 1 / 4
    assert jaccard(task, Answer(text="no letters here")) == 0.0
