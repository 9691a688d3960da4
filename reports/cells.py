"""Table cells with their denominators and a link to the tasks behind them, and the one way a mean gets its
95% bootstrap interval in a report (over tasks, a task's epochs averaged first: `summary.per_task`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable

from pydantic import BaseModel, Field

from ..core.benchmark import ReportMetric
from ..core.runlog import ResultRecord
from ..evaluators.statistics import bootstrap_ci
from .summary import judged, per_task, ran, reader

Metric = Callable[[ResultRecord], float | None]
TEXT_LIMIT = 600  # characters of a model's text, a tool's arguments or result kept per step


def cut(text: str | None, limit: int = TEXT_LIMIT) -> str:
    """The text, or its first `limit` characters saying how many more there were."""
    text = text or ""
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit:,} more characters]"


def answer_text(record: ResultRecord) -> str:
    """A record's answer as one line of text: its tool call, its choices, or its text or report."""
    answer = record.answer
    if answer.get("tool_call"):
        return json.dumps(answer["tool_call"], ensure_ascii=False)
    if answer.get("choices"):
        return ", ".join(answer["choices"])
    return str(answer.get("text") or answer.get("report") or "")


class Cell(BaseModel):
    text: str
    value: float | None = None
    low: float | None = None
    high: float | None = None
    n: int | None = None  # tasks behind the mean
    link: dict[str, str] | None = None  # drill-down filter (system, model, level, status, failure)


class ReportTable(BaseModel):
    key: str  # a stable id (HTML anchor, test handle)
    title: str
    columns: list[str]
    rows: list[list[Cell]] = Field(default_factory=list)
    note: str = ""

    def column(self, name: str) -> list[Cell]:
        index = self.columns.index(name)
        return [row[index] for row in self.rows]

    def texts(self) -> list[list[str]]:
        return [[cell.text for cell in row] for row in self.rows]


def label(text: str, link: dict[str, str] | None = None) -> Cell:
    return Cell(text=text, link=link)


def count(value: int, link: dict[str, str] | None = None) -> Cell:
    return Cell(text=str(value), value=float(value), n=value, link=link if value else None)


def _number(value: float, digits: int) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.{digits}f}"


def mean_cell(
    records: Iterable[ResultRecord],
    metric: Metric,
    *,
    quality: bool,
    infra_errors_as_failures: bool,
    digits: int = 3,
    link: dict[str, str] | None = None,
    with_n: bool = True,
) -> Cell:
    """Mean over tasks [95% bootstrap CI] (n=tasks). Quality metrics leave out infrastructure errors
    unless asked, cost and latency only the unavailable records (README "Who counts in which mean")."""
    counted = judged(records, infra_errors_as_failures) if quality else ran(records)
    values = list(per_task(counted, metric).values())
    if not values:
        return Cell(text="–", n=0, link=link)
    mean, low, high = bootstrap_ci(values)
    text = _number(mean, digits)
    if not math.isnan(low):
        text += f" [{_number(low, digits)}, {_number(high, digits)}]"
    if with_n:
        text += f" (n={len(values)})"
    interval = (None, None) if math.isnan(low) else (low, high)
    return Cell(text=text, value=mean, low=interval[0], high=interval[1], n=len(values), link=link)


def plain(value: float | None, digits: int = 3, link: dict[str, str] | None = None) -> Cell:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Cell(text="–", link=link)
    return Cell(text=_number(value, digits), value=value, link=link)


def score(name: str) -> Metric:
    return lambda record: record.scores.get(name)


def expand(metrics: Iterable[ReportMetric], records: list[ResultRecord]) -> list[ReportMetric]:
    """The metrics with every family (a score name ending in ".") replaced by one metric per score of that
    prefix the records carry, titled by the family's title with the rest of the name in it ("{} EM")."""
    found = []
    for metric in metrics:
        families = [name for name in metric.scores if name.endswith(".")]
        if not families:
            found.append(metric)
            continue
        names = sorted({n for r in records for n in r.scores if any(n.startswith(f) for f in families)})
        for name in names:
            rest = next(name.removeprefix(f) for f in families if name.startswith(f))
            found.append(ReportMetric(metric.title.format(rest), (name,), metric.question_type, metric.digits))
    return found


def present(metric: ReportMetric, records: list[ResultRecord]) -> bool:
    """Some record has a value of the metric."""
    read = reader(metric)
    return any(read(record) is not None for record in records)


def has_score(records: Iterable[ResultRecord], name: str) -> bool:
    return any(record.scores.get(name) is not None for record in records)


def link_of(system: str, model: str, **more: str | None) -> dict[str, str]:
    return {"system": system, "model": model, **{k: v for k, v in more.items() if v is not None}}
