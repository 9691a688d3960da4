"""ROUGE-1 / ROUGE-L F1 of a report against the reference report (lexical overlap only).

The scores are `rouge_score`'s (`RougeScorer(["rouge1", "rougeL"], use_stemmer=True)`, tested equal),
computed faster: Porter stems and tokenized texts are memoized (the reference is the same for every
system and epoch), and ROUGE-L's longest common subsequence is computed bit-parallel instead of with
rouge_score's O(n·m) Python table.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, reports, versioned
from ..core.task import Answer, QuestionType, Task
from ..core.trace import Trace

if TYPE_CHECKING:
    from rouge_score.rouge_scorer import RougeScorer

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("nltk.stem", "rouge_score", "rouge_score.rouge_scorer")


class _MemoizedStemTokenizer:
    """rouge_score's `DefaultTokenizer(use_stemmer=True)` with its stems and tokenizations memoized."""

    def __init__(self) -> None:
        from nltk.stem import porter  # rouge_score pulls in nltk (and scipy): imported on first score only
        from rouge_score import tokenize

        self._tokenize = tokenize.tokenize
        self.stem = functools.lru_cache(maxsize=1 << 16)(porter.PorterStemmer().stem)
        self.tokenize = functools.lru_cache(maxsize=256)(self._tokens)

    def _tokens(self, text: str) -> tuple[str, ...]:
        return tuple(self._tokenize(text, self))  # rouge_score calls our `stem` for words of 4+ characters


@functools.cache
def _tokenizer() -> _MemoizedStemTokenizer:
    return _MemoizedStemTokenizer()


@functools.cache
def _rouge1() -> RougeScorer:
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rouge1"], tokenizer=_tokenizer())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence of two token sequences (Hyyrö's bit-parallel algorithm:
    one big-integer step per token of `b`)."""
    positions: dict[str, int] = {}
    for i, token in enumerate(a):
        positions[token] = positions.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        matches = row & positions.get(token, 0)
        row = ((row + matches) | (row - matches)) & full
    return len(a) - row.bit_count()


def _rouge_l_f(target: Sequence[str], prediction: Sequence[str]) -> float:
    """rouge_score's `_score_lcs(...).fmeasure`, operation for operation."""
    if not target or not prediction:
        return 0.0
    common = lcs_length(target, prediction)
    precision, recall = common / len(prediction), common / len(target)
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def rouge(task: Task, answer: Answer) -> dict[str, float]:
    reference = task.gold.report if task.gold else None
    if task.question_type != QuestionType.REPORT or not reference:
        return {}
    text = answer.report or answer.text or ""
    rouge1 = _rouge1().score(reference, text)["rouge1"].fmeasure
    tokenize = _tokenizer().tokenize
    return {"rouge1_f": rouge1, "rougeL_f": _rouge_l_f(tokenize(reference), tokenize(text))}


@versioned("1")
@reports("rouge1_f", "rougeL_f")
def rouge_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `rouge`: ROUGE-1 and ROUGE-L F of a report against the reference report."""
    return ScoreResult(rouge(task, answer))
