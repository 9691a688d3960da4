"""Scorers: functions of (task, answer, trace) that return named metrics (a `ScoreResult`).

A scorer is registered by name (`SCORERS`: `@register_scorer("name")` or an entry point in
`data_agent_compare.scorers`) and a benchmark lists the scorers that apply to its tasks. A
scorer returns only the metrics that fit the task (an empty `ScoreResult()` otherwise): a report scorer
says nothing about a choice question. `judge` is the metered model of the LLM judge, when the
run has one (`--judge`), for scorers that need one.

Every scoring failure is handled one way: a scorer that raises gives no verdict, so the metrics it
declares with `@reports(...)` get no value (None: out of that metric's mean, which shows its n) and the
error is kept (`ScoreSheet.errors`, the record's `scoring_error`), counted beside the mean in the summary.
The metrics a failure leaves without a value are a property of the scorer (what it declares), never of
what ran earlier in the process, so every executor scores alike. A scorer that declares nothing records
its error and no metric. A scorer that gave part of its verdict raises `ScoringError` with the part it has
(RS's judged dimensions); its declared metrics still get no value.

Hedged answers (`evaluators/hedging.py`): a verdict scorer (`@reports(..., verdict=True)`) flags an answer
that lists many candidates with the trace's `hedged` warning, beside its official verdict; only a run with
`strict_answers` scores such an answer 0.0 on the verdict metrics.
"""

from __future__ import annotations

import hashlib
import inspect
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Protocol, TypeVar

from .model import MeteredModel
from .registry import Registry
from .task import Answer, Task
from .trace import Trace

Scores = dict[str, float | None]  # metric -> value, as a record keeps them (`ResultRecord.scores`)


@dataclass(frozen=True)
class ScoreResult:
    """What one scorer says of one answer: a value per metric it scored (None: no value, out of the mean).
    Only the metrics that fit the task: a report scorer says nothing of a choice question (`ScoreResult()`).
    Values are checked here, so a scorer that returns a string or a list fails as a scorer error naming the
    metric instead of reaching the record; numbers of any kind (int, bool, NumPy) are kept as float, as the
    record writes them."""

    metrics: Mapping[str, float | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        checked: dict[str, float | None] = {}
        for name, value in self.metrics.items():
            if not isinstance(name, str):
                raise TypeError(f"a metric's name must be a string, not {type(name).__name__} {name!r}")
            if value is not None and not isinstance(value, numbers.Real):
                raise TypeError(f"metric {name!r} is {type(value).__name__} {value!r}, not a number or None")
            checked[name] = None if value is None else float(value)
        object.__setattr__(self, "metrics", MappingProxyType(checked))

    @classmethod
    def of(cls, returned: ScoreResult | Mapping[str, float | None]) -> ScoreResult:
        """A scorer's return value as a result: plug-in scorers written before `ScoreResult` return a dict."""
        return returned if isinstance(returned, ScoreResult) else cls(returned)

    def scores(self) -> Scores:
        """The metrics as a record keeps them."""
        return dict(self.metrics)


class Scorer(Protocol):
    def __call__(
        self, task: Task, answer: Answer, trace: Trace, judge: MeteredModel | None
    ) -> ScoreResult | Mapping[str, float | None]: ...


@dataclass(frozen=True)
class ScorerInfo:
    """What a scorer declares of itself (`@versioned`, `@reports`)."""

    version: str | None = None  # None: undeclared (known by a hash of its module's source)
    metrics: tuple[str, ...] = ()  # the metrics its verdict lives in: a failure leaves them without a value
    verdict: bool = False  # those metrics are the answer's verdict (`--strict-answers` zeroes a hedged one)


SCORERS: Registry[Scorer] = Registry("scorers")
S = TypeVar("S", bound=Callable[..., Any])
SCORER_INFO = "__scorer_info__"  # the attribute a scorer's declarations (`ScorerInfo`) are kept in


def scorer_info(scorer: object) -> ScorerInfo:
    """The declarations of a scorer; a scorer that set `version`, `metrics` or `verdict` attributes by hand
    (before `ScorerInfo`) is read from them."""
    info = getattr(scorer, SCORER_INFO, None)
    if isinstance(info, ScorerInfo):
        return info
    version = getattr(scorer, "version", None)
    return ScorerInfo(
        version=None if version is None else str(version),
        metrics=tuple(getattr(scorer, "metrics", None) or ()),
        verdict=bool(getattr(scorer, "verdict", False)),
    )


def _declare(scorer: S, **declared: Any) -> S:
    setattr(scorer, SCORER_INFO, replace(scorer_info(scorer), **declared))  # one typed attribute, any decorator order
    return scorer


def register_scorer(name: str) -> Callable[[S], S]:
    def decorate(scorer: S) -> S:
        SCORERS.register(name, scorer)
        return scorer

    return decorate


def versioned(version: str) -> Callable[[S], S]:
    """Declare a scorer's version; bump it whenever its verdicts can change. The manifest records the
    version of every scorer a run uses: `--resume` and `--replay` refuse a run scored by another
    version, and `compare rescore` records the versions before and after."""
    return lambda scorer: _declare(scorer, version=version)


def scorer_version(name: str) -> str:
    """The declared version of scorer `name`; a scorer that declares none (a plugin's) is known by a
    hash of its module's source, so an edit to it still counts as a new version."""
    scorer = SCORERS.load(name)
    declared = scorer_info(scorer).version
    if declared is not None:
        return declared
    try:
        source = inspect.getsource(inspect.getmodule(scorer) or scorer)
    except (OSError, TypeError):  # no source file (a built-in or a REPL function)
        return "undeclared"
    return "undeclared:" + hashlib.sha256(source.encode()).hexdigest()[:12]


def reports(*metrics: str, verdict: bool = False) -> Callable[[S], S]:
    """Declare the metrics a scorer's verdict lives in: if the scorer raises, they get no value (None).
    `verdict`: they are the answer's verdict (correct or not), which `--strict-answers` sets to 0.0 for an
    answer flagged as hedged."""
    return lambda scorer: _declare(scorer, metrics=metrics, verdict=verdict)


HEDGED = "hedged"  # the warning a verdict scorer puts on the trace for an answer listing many candidates


class ScoringError(Exception):
    """A scorer could not give its full verdict; `scores` keeps what it did score, the declared metrics get
    no value (the answer was not judged wrong). `undecided` is kept for scorers written against the older
    rule (a failure scored 0.0 unless undecided): every failure is undecided now."""

    def __init__(
        self, message: str, scores: ScoreResult | Mapping[str, float | None] | None = None, *, undecided: bool = False
    ) -> None:
        super().__init__(message)
        self.scores = ScoreResult.of(scores or {}).scores()
        self.undecided = undecided


@dataclass
class ScoreSheet:
    scores: Scores = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # scorer name -> what it raised

    @property
    def error(self) -> str | None:
        """One line for the result record; None when every scorer ran."""
        return "; ".join(f"{name}: {message}" for name, message in self.errors.items()) or None


def score(
    task: Task,
    answer: Answer,
    trace: Trace,
    scorers: Sequence[str],
    judge: MeteredModel | None = None,
    *,
    strict_answers: bool = False,
) -> ScoreSheet:
    """The metrics of every named scorer, merged in order; a scorer that raises leaves its declared
    metrics without a value (out of their means) and its error is kept. With `strict_answers`, an answer
    a scorer flagged as hedged (the trace's `hedged` warning) scores 0.0 on every verdict metric."""
    sheet = ScoreSheet()
    for name in scorers:
        scorer = SCORERS.load(name)
        try:
            result = ScoreResult.of(scorer(task, answer, trace, judge))
        except Exception as failure:  # a scorer bug must not pass for a verdict, nor crash the run
            sheet.errors[name] = f"{type(failure).__name__}: {failure}"
            sheet.scores.update(failure.scores if isinstance(failure, ScoringError) else {})
            sheet.scores.update(dict.fromkeys(declared_metrics(name), None))
        else:
            sheet.scores.update(result.metrics)
    if strict_answers and any(warning.code == HEDGED for warning in trace.warnings):
        judging = [name for name in scorers if scorer_info(SCORERS.load(name)).verdict]
        verdicts = [metric for name in judging for metric in declared_metrics(name)]
        sheet.scores.update({metric: 0.0 for metric in verdicts if sheet.scores.get(metric) is not None})
    return sheet


def declared_metrics(name: str) -> tuple[str, ...]:
    """The metrics scorer `name` declares with `@reports` (those a failure of it leaves without a value)."""
    return scorer_info(SCORERS.load(name)).metrics
