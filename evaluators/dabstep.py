"""DABstep answer scoring: the official rule, reproduced quirk for quirk, and a stricter variant.

`question_scorer(prediction, gold)` is the current official DABstep scorer (Adyen / Hugging
Face `dabstep_benchmark/evaluation/scorer.py`). Both sides are trimmed and lower-cased, then:

1. If either side is *numeric with commas* — `^\\$?(\\d{1,3}(,\\d{3})+(\\.\\d+)?|\\d+[.,]\\d+)$`,
   i.e. comma thousands (`1,234.5`) or a plain decimal (`0.99`, `0,99`), optional leading `$`;
   a plain integer such as `64` does not count — the first number of each side is compared
   numerically; False if either side has none.
2. Else if either side contains `,` or `;`: list comparison. One leading `[` and one trailing
   `]` are stripped, items split on `,`/`;`, trimmed, empties dropped, sorted as strings;
   equal lists match, different lengths fail, otherwise every aligned pair must pass
   `question_scorer` recursively.
3. Else if both sides contain a number, they are compared numerically.
4. Else strings: equal once non-word characters are removed → True; if either side is a single
   word, True when one word set contains the other; else True when the difflib ratio > 0.95.

First number: commas and `$` are removed, then the first match of `\\d*\\.\\d+|\\d+\\.?\\d*` is
taken (a trailing `%` is allowed and ignored). Numeric comparison: equal → True; both < 1 →
`isclose(rel_tol=1e-4, abs_tol=1e-4)`; else both are rounded to the smaller count of digits after
the `.` in their Python `str` form, equal → True, else the same `isclose`.

Quirks kept on purpose (they decide published leaderboard numbers):
- the minus sign is never captured: `-5.5` matches `5.5`;
- `0,99` counts as a decimal for rule 1, but the comma is then deleted, so it reads as 99;
- a comma list of three-digit items written without spaces (`741,709`) is read as one number
  by rule 1, so its order suddenly matters;
- rule 3 compares only the first number: `E:13.57` matches `F:13.57` and `13.57`;
- rule 4's containment accepts `B` for gold `B. BE` and `applicable` for `Not Applicable`.

`strict_question_scorer` is a stricter variant, never the official number; see its docstring.
"""

from __future__ import annotations

import math
import re
from difflib import SequenceMatcher

from ..core.model import MeteredModel
from ..core.scorer import ScoreResult, reports, versioned
from ..core.task import Answer, Task
from ..core.trace import Trace
from .hedging import flag_hedged

_NUMERIC_WITH_COMMAS = re.compile(r"^\$?(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+[.,]\d+)$")
_FIRST_NUMBER = re.compile(r"(\d*\.\d+|\d+\.?\d*)%?")
_LIST_SEPARATOR = re.compile(r"[,;]")
_OUTER_BRACKETS = re.compile(r"^\[|\]$")


def _is_numeric_with_commas(value: str) -> bool:
    # re.match + `$` (not fullmatch) as in the official code: `$` also matches before a final "\n".
    return bool(_NUMERIC_WITH_COMMAS.match(value.strip()))


def _first_number(value: str) -> float | None:
    match = _FIRST_NUMBER.search(value.replace(",", "").replace("$", ""))
    return float(match.group(1)) if match else None


def _decimals(number: float) -> int:
    text = str(number)  # str form on purpose: "1e-05" counts 0 decimals, "1.5e-05" counts 5
    return len(text.split(".")[-1]) if "." in text else 0


def _numbers_match(a: float, b: float) -> bool:
    if a == b:
        return True
    if a < 1 and b < 1:
        return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)
    places = min(_decimals(a), _decimals(b))
    if round(a, places) == round(b, places):
        return True
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-4)


def _strings_match(a: str, b: str) -> bool:
    if re.sub(r"[^\w]", "", a) == re.sub(r"[^\w]", "", b):
        return True
    words_a, words_b = re.findall(r"\b\w+\b", a), re.findall(r"\b\w+\b", b)
    if (len(words_a) == 1 or len(words_b) == 1) and words_a and words_b:
        return set(words_a) <= set(words_b) or set(words_b) <= set(words_a)
    return SequenceMatcher(None, a, b).ratio() > 0.95


def _official_items(text: str) -> list[str]:
    text = _OUTER_BRACKETS.sub("", text.strip())
    return sorted(item.strip() for item in _LIST_SEPARATOR.split(text) if item.strip())


def _lists_match(a: str, b: str) -> bool:
    items_a, items_b = _official_items(a), _official_items(b)
    if items_a == items_b:
        return True
    if len(items_a) != len(items_b):
        return False
    return all(question_scorer(x, y) for x, y in zip(items_a, items_b, strict=True))


def question_scorer(prediction: str, gold: str) -> bool:
    """The official DABstep verdict (rules in the module docstring); argument order as upstream."""
    prediction, gold = prediction.strip().lower(), gold.strip().lower()
    if _is_numeric_with_commas(prediction) or _is_numeric_with_commas(gold):
        a, b = _first_number(prediction), _first_number(gold)
        return a is not None and b is not None and _numbers_match(a, b)
    if _LIST_SEPARATOR.search(prediction) or _LIST_SEPARATOR.search(gold):
        return _lists_match(prediction, gold)
    a, b = _first_number(prediction), _first_number(gold)
    if a is not None and b is not None:
        return _numbers_match(a, b)
    return _strings_match(prediction, gold)


# ---------------------------------------------------------------- strict variant

_STRICT_NUMBER = re.compile(r"([-+]?)\$?(\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d*)?|\.\d+)%?")


def _normalize(text: str) -> str:
    return " ".join(text.casefold().split())


def _strict_number(text: str) -> float | None:
    match = _STRICT_NUMBER.fullmatch(text)
    if not match:
        return None
    value = float(match.group(2).replace(",", ""))
    return -value if match.group(1) == "-" else value


def _is_strict_list(text: str) -> bool:
    return bool(_LIST_SEPARATOR.search(text)) or (text.startswith("[") and text.endswith("]"))


def _strict_items(text: str) -> list[str]:
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [item.strip() for item in _LIST_SEPARATOR.split(text) if item.strip()]


def _sort_key(item: str) -> tuple[int, float, str]:
    number = _strict_number(item)
    return (0, number, "") if number is not None else (1, 0.0, item)


def _strict_atoms_match(a: str, b: str, rel_tol: float, abs_tol: float) -> bool:
    x, y = _strict_number(a), _strict_number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
    return a == b


def strict_question_scorer(prediction: str, gold: str, *, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    """A stricter DABstep verdict. Not the official metric; report it under its own name.

    Both sides are trimmed, case-folded and have runs of whitespace collapsed. Then:
    - both sides whole numbers (optional sign, optional `$`, digits with well-formed comma
      thousands groups, optional decimals, optional `%`) → `isclose(rel_tol, abs_tol)`;
    - else, if either side contains `,`/`;` or is wrapped in `[ ]` → lists: the brackets are
      removed, items split on `,`/`;`, trimmed, empties dropped; equal length and, after sorting
      numbers by value and strings by text, every aligned pair matches by these same two rules;
    - else the normalized strings must be equal.

    Differences from `question_scorer`: the sign counts (`-5.5` ≠ `5.5`); a number must be the
    whole answer, never the first number found in text (`E:13.57` ≠ `13.57`, `F:13.57` ≠
    `E:13.57`); `0,99` is a two-item list, not 99; there is no rounding to the shorter form and
    the tolerance is explicit; strings get no punctuation stripping, no word containment
    (`B` ≠ `B. BE`) and no difflib similarity; list order never matters, however written.
    """
    prediction, gold = _normalize(prediction), _normalize(gold)
    if _strict_number(prediction) is not None and _strict_number(gold) is not None:
        return _strict_atoms_match(prediction, gold, rel_tol, abs_tol)
    if _is_strict_list(prediction) or _is_strict_list(gold):
        items_a = sorted(_strict_items(prediction), key=_sort_key)
        items_b = sorted(_strict_items(gold), key=_sort_key)
        return len(items_a) == len(items_b) and all(
            _strict_atoms_match(a, b, rel_tol, abs_tol) for a, b in zip(items_a, items_b, strict=True)
        )
    return prediction == gold


def score_dabstep(task: Task, answer: Answer) -> dict[str, float | None]:
    """`correct` (official rule) and `correct_strict` as 1.0 / 0.0; None for both without a gold answer.

    A run that ended without any answer text (status other than "completed") scores 0.0 even
    where the official rule would match the empty string against an empty-list gold answer.
    """
    gold = task.gold.answer if task.gold else None
    if gold is None:
        return {"correct": None, "correct_strict": None}
    gold_text = gold if isinstance(gold, str) else ", ".join(gold)
    if answer.status != "completed" and not answer.text.strip():
        return {"correct": 0.0, "correct_strict": 0.0}
    return {
        "correct": float(question_scorer(answer.text, gold_text)),
        "correct_strict": float(strict_question_scorer(answer.text, gold_text)),
    }


@versioned("1")
@reports("correct", "correct_strict", verdict=True)
def dabstep_scorer(task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> ScoreResult:
    """Scorer `dabstep`: the official question_scorer (`correct`) and the strict variant; an answer listing
    many candidates is flagged `hedged` beside them (`hedging.py`)."""
    flag_hedged(task, answer, trace)
    return ScoreResult(score_dabstep(task, answer))
