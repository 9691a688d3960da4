"""Scorers: functions of (task, answer, trace) that return named metrics.

A scorer is registered by name (`SCORERS`: `@register_scorer("name")` or an entry point in
`data_agent_compare.scorers`) and a benchmark lists the scorers that apply to its tasks. A
scorer returns only the metrics that fit the task (an empty dict otherwise): a report scorer
says nothing about a choice question. `judge` is the metered model of the LLM judge, when the
run has one (`--judge`), for scorers that need one.

A scorer that raises never makes a task drop out of a mean: the metrics it declares with
`@reports(...)` are scored as failures (0.0) and the error is kept (`ScoreSheet.errors`, the record's
`scoring_error`), so the denominator stays what it was and the summary counts the failure. A scorer
that declares nothing still records its error, and the metrics it returned on earlier tasks in this
process score 0.0 (declare them with `@reports`: a scorer that fails on its first task has no known
metrics). A scorer that gave part of its verdict raises `ScoringError` with the part it has (RS's
judged dimensions); its declared metrics still score 0.0.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from .model import MeteredModel
from .registry import Registry
from .task import Answer, Task
from .trace import Trace

Scores = dict[str, float | None]


class Scorer(Protocol):
    def __call__(self, task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None) -> Scores: ...


SCORERS: Registry[Scorer] = Registry("scorers")
S = TypeVar("S", bound=Callable[..., Scores])


def register_scorer(name: str) -> Callable[[S], S]:
    def decorate(scorer: S) -> S:
        SCORERS.register(name, scorer)
        return scorer

    return decorate


def versioned(version: str) -> Callable[[S], S]:
    """Declare a scorer's version; bump it whenever its verdicts can change. The manifest records the
    version of every scorer a run uses: `--resume` and `--replay` refuse a run scored by another
    version, and `compare rescore` records the versions before and after."""

    def decorate(scorer: S) -> S:
        scorer.version = version  # type: ignore[attr-defined]
        return scorer

    return decorate


def scorer_version(name: str) -> str:
    """The declared version of scorer `name`; a scorer that declares none (a plugin's) is known by a
    hash of its module's source, so an edit to it still counts as a new version."""
    scorer = SCORERS.load(name)
    declared = getattr(scorer, "version", None)
    if declared is not None:
        return str(declared)
    try:
        source = inspect.getsource(inspect.getmodule(scorer) or scorer)
    except (OSError, TypeError):  # no source file (a built-in or a REPL function)
        return "undeclared"
    return "undeclared:" + hashlib.sha256(source.encode()).hexdigest()[:12]


def reports(*metrics: str) -> Callable[[S], S]:
    """Declare the metrics a scorer's verdict lives in: if the scorer raises, they score 0.0."""

    def decorate(scorer: S) -> S:
        scorer.metrics = metrics  # type: ignore[attr-defined]
        return scorer

    return decorate


class ScoringError(Exception):
    """A scorer could not give its full verdict; `scores` keeps what it did score. `undecided`: the check
    itself failed (a DAB validator that crashed or ran out of time), so the declared metrics get no value
    rather than a 0 — the answer was not judged wrong; the summary counts and names such records."""

    def __init__(self, message: str, scores: Scores | None = None, *, undecided: bool = False) -> None:
        super().__init__(message)
        self.scores = dict(scores or {})
        self.undecided = undecided


_returned: dict[str, set[str]] = {}  # scorer name -> metrics it returned (for scorers without @reports)


@dataclass
class ScoreSheet:
    scores: Scores = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # scorer name -> what it raised

    @property
    def error(self) -> str | None:
        """One line for the result record; None when every scorer ran."""
        return "; ".join(f"{name}: {message}" for name, message in self.errors.items()) or None


def score(
    task: Task, answer: Answer, trace: Trace, scorers: Sequence[str], judge: MeteredModel | None = None
) -> ScoreSheet:
    """The metrics of every named scorer, merged in order; a scorer that raises scores its declared
    metrics as failures and its error is kept."""
    sheet = ScoreSheet()
    for name in scorers:
        scorer = SCORERS.load(name)
        try:
            scores = scorer(task, answer, trace, judge)
        except Exception as failure:  # a scorer bug must not drop the task from the denominator
            sheet.errors[name] = f"{type(failure).__name__}: {failure}"
            sheet.scores.update(failure.scores if isinstance(failure, ScoringError) else {})
            if isinstance(failure, ScoringError) and failure.undecided:
                continue
            metrics = getattr(scorer, "metrics", None) or sorted(_returned.get(name, ()))
            sheet.scores.update(dict.fromkeys(metrics, 0.0))
        else:
            _returned.setdefault(name, set()).update(scores)
            sheet.scores.update(scores)
    return sheet
