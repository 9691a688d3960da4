"""ROUGE through the memoized tokenizer and the bit-parallel LCS equals rouge_score's own, and is faster."""

from __future__ import annotations

import random
import time

import pytest
from rouge_score.rouge_scorer import RougeScorer, _lcs_table

from data_agent_compare.core.task import Answer, Gold, QuestionType, Task
from data_agent_compare.evaluators.lexical import lcs_length, rouge

WORDS = ["the", "revenue", "of", "each", "region", "grew", "by", "percent", "while", "customers", "in", "West"]
WORDS += ["ordered", "12", "more", "products", "running", "ran"]


def text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) + rng.choice(["", "s", "ing", "ed", ","]) for _ in range(words))


def report_task(reference: str) -> Task:
    return Task(id="r", benchmark="b", question="?", question_type=QuestionType.REPORT, gold=Gold(report=reference))


@pytest.mark.parametrize("seed", range(12))
def test_lcs_length_equals_the_dynamic_programming_table(seed: int) -> None:
    rng = random.Random(seed)
    a = [rng.choice("abcde") for _ in range(rng.randint(0, 70))]
    b = [rng.choice("abcdef") for _ in range(rng.randint(0, 70))]
    assert lcs_length(a, b) == (_lcs_table(a, b)[-1][-1] if a and b else 0)


def test_scores_equal_rouge_scores_own_scorer() -> None:
    official = RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    rng = random.Random(7)
    pairs = [(text(rng, rng.randint(1, 120)), text(rng, rng.randint(0, 120))) for _ in range(40)]
    pairs += [("Revenue grew.", ""), ("Revenue grew.", "!!!"), ("a b c", "c b a")]
    for reference, prediction in pairs:
        expected = official.score(reference, prediction)
        got = rouge(report_task(reference), Answer(text=prediction))
        assert got == {"rouge1_f": expected["rouge1"].fmeasure, "rougeL_f": expected["rougeL"].fmeasure}


def test_a_long_report_scores_in_a_fraction_of_rouge_scores_time() -> None:
    rng = random.Random(1)
    reference, prediction = text(rng, 400), text(rng, 350)
    official = RougeScorer(["rouge1", "rougeL"], use_stemmer=True)
    start = time.perf_counter()
    official.score(reference, prediction)
    theirs = time.perf_counter() - start
    rouge(report_task(reference), Answer(text=text(rng, 10)))  # warm: the scorer and the reference's tokens
    start = time.perf_counter()
    rouge(report_task(reference), Answer(text=prediction))
    assert time.perf_counter() - start < theirs / 3
