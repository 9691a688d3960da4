"""The gold side of a bundled task, derived from its SQL's result: query results, the formats answers are
written in, and how each kind of question derives its answer, options and explanation (`derive` in
questions.yaml names one). Reference reports are written by `report_writers.py`."""

from __future__ import annotations

import csv
import io
import random
import sqlite3
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ...core.task import Rubric, RubricDimension

# ---------------------------------------------------------------- query results


@dataclass(frozen=True)
class Result:
    columns: list[str]
    rows: list[tuple[Any, ...]]

    def values(self, column: str) -> list[Any]:
        index = self.columns.index(column)
        return [row[index] for row in self.rows]

    def first(self, column: str) -> Any:
        return self.values(column)[0]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def to_csv(self) -> str:
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(self.columns)
        writer.writerows(["" if v is None else v for v in row] for row in self.rows)
        return buffer.getvalue()


def run_sql(connection: sqlite3.Connection, sql: str) -> Result:
    cursor = connection.execute(sql)
    return Result([d[0] for d in cursor.description], [tuple(row) for row in cursor.fetchall()])


# ---------------------------------------------------------------- formatting


def integer(value: Any) -> str:
    return f"{round(value):d}"


def two_decimals(value: Any) -> str:
    return f"{value:.2f}"


def usd(value: Any) -> str:
    return f"${value:,.2f}"


def pct(value: Any) -> str:
    return f"{value:.2f} %"


def text(value: Any) -> str:
    return str(value)


# ---------------------------------------------------------------- answer derivation


@dataclass(frozen=True)
class Derived:
    """The gold side computed from a query result."""

    answer: str | list[str] | None = None  # one letter (single choice), letters (multiple choice) or text
    options: dict[str, str] | None = None
    report: str | None = None
    rubric: Rubric | None = None
    explanation: str | None = None


def lettered(
    correct: Sequence[str], distractors: Sequence[str], rng: random.Random
) -> tuple[dict[str, str], list[str]]:
    """Shuffle the option texts and letter them A, B, ...; returns options and the correct letters."""
    texts = [*correct, *distractors]
    if len(set(texts)) != len(texts):
        raise ValueError(f"option texts are not distinct: {texts}")
    rng.shuffle(texts)
    options = dict(zip(string.ascii_uppercase, texts, strict=False))
    letters = sorted(letter for letter, option in options.items() if option in correct)
    return options, letters


@dataclass(frozen=True)
class TopChoice:
    """Single choice: the first row (or first row whose `qualifies` column is true) is the answer;
    the next rows of the same ranking are the distractors — near misses by construction."""

    label: str
    score: str
    qualifies: str | None = None
    fmt: Callable[[Any], str] = text

    def derive(self, result: Result, rng: random.Random, _extra: Result | None) -> Derived:
        rows = result.records()
        winner = next(row for row in rows if self.qualifies is None or row[self.qualifies])
        others = [row for row in rows if row is not winner][:3]
        if any(row[self.score] == winner[self.score] for row in others):
            raise ValueError(f"tie for the answer {winner[self.label]!r}: the question would be ambiguous")
        options, letters = lettered([self.fmt(winner[self.label])], [self.fmt(r[self.label]) for r in others], rng)
        why = f"{winner[self.label]} ({self.score} = {winner[self.score]}); next: " + ", ".join(
            f"{r[self.label]} ({r[self.score]})" for r in others
        )
        return Derived(answer=letters[0], options=options, explanation=why)


@dataclass(frozen=True)
class ValueChoice:
    """Single choice on a number: distractors are the values of the distractor query (the same
    figure under a plausible misreading of the rules)."""

    column: str
    fmt: Callable[[Any], str] = integer

    def derive(self, result: Result, rng: random.Random, extra: Result | None) -> Derived:
        if extra is None or len(extra.columns) != 3:
            raise ValueError("ValueChoice needs a distractor query returning three values")
        correct = self.fmt(result.first(self.column))
        wrong = [self.fmt(value) for value in extra.rows[0]]
        options, letters = lettered([correct], wrong, rng)
        misreadings = ", ".join(f"{name} = {value}" for name, value in zip(extra.columns, extra.rows[0], strict=True))
        return Derived(answer=letters[0], options=options, explanation=f"{correct}; misreadings give {misreadings}")


@dataclass(frozen=True)
class MemberChoice:
    """Multiple choice: rows whose `member` column is true are correct. Up to 4 of them become
    options (a seeded sample when there are more), padded with the first non-members in query
    order, which the queries sort so that near misses come first."""

    label: str
    member: str
    n_options: int

    def derive(self, result: Result, rng: random.Random, _extra: Result | None) -> Derived:
        rows = result.records()
        members = [str(r[self.label]) for r in rows if r[self.member]]
        others = [str(r[self.label]) for r in rows if not r[self.member]]
        k = len(members) if len(members) <= 4 else rng.randint(2, 4)
        if not 2 <= k <= 4 or len(others) < self.n_options - k:
            raise ValueError(
                f"cannot build {self.n_options} options with 2-4 correct from {len(members)}/{len(others)}"
            )
        correct = sorted(rng.sample(members, k)) if k < len(members) else members
        options, letters = lettered(correct, others[: self.n_options - k], rng)
        return Derived(answer=letters, options=options, explanation="correct: " + "; ".join(correct))


@dataclass(frozen=True)
class Factoid:
    """A single value; `score` (optional) guards against ties when the value is a row label."""

    column: str
    fmt: Callable[[Any], str]
    score: str | None = None

    def derive(self, result: Result, _rng: random.Random, _extra: Result | None) -> Derived:
        if self.score and len(result.rows) > 1 and result.values(self.score)[:2] == [result.first(self.score)] * 2:
            raise ValueError(f"tie for the top {self.column}: the question would be ambiguous")
        answer = self.fmt(result.first(self.column))
        return Derived(answer=answer, explanation=f"{self.column} = {result.first(self.column)}")


@dataclass(frozen=True)
class ReportParts:
    summary: str
    analysis: str
    context: str
    connections: str
    conclusions: str
    criteria: dict[str, list[str]]  # rubric dimension -> criteria
    chain: list[str]


@dataclass(frozen=True)
class Report:
    """A reference report and rubric rendered from the result by `render`."""

    render: Callable[[Result], ReportParts]

    def derive(self, result: Result, _rng: random.Random, _extra: Result | None) -> Derived:
        parts = self.render(result)
        report = "\n\n".join(
            f"## {title}\n\n{body}"
            for title, body in (
                ("Executive Summary", parts.summary),
                ("Data Analysis Results", parts.analysis),
                ("External Context & Insights", parts.context),
                ("Key Connections", parts.connections),
                ("Conclusions", parts.conclusions),
            )
        )
        dimensions = [RubricDimension(name=name, weight=0.25, criteria=c) for name, c in parts.criteria.items()]
        return Derived(report=report + "\n", rubric=Rubric(dimensions=dimensions, chain_validation=parts.chain))


Deriver = TopChoice | ValueChoice | MemberChoice | Factoid | Report


FORMATS: dict[str, Callable[[Any], str]] = {
    "integer": integer,
    "two_decimals": two_decimals,
    "usd": usd,
    "pct": pct,
    "text": text,
}


# ---------------------------------------------------------------- reference reports


def md_table(result: Result, formats: dict[str, Callable[[Any], str]]) -> str:
    head = "| " + " | ".join(result.columns) + " |\n|" + "---|" * len(result.columns)
    body = [
        "| " + " | ".join(formats.get(col, text)(value) for col, value in zip(result.columns, row, strict=True)) + " |"
        for row in result.rows
    ]
    return "\n".join([head, *body])


def dimensions(sql: list[str], external: list[str], logic: list[str], complete: list[str]) -> dict[str, list[str]]:
    return {"SQL_ACCURACY": sql, "EXTERNAL_INTEGRATION": external, "LOGICAL_REASONING": logic, "COMPLETENESS": complete}


SECTIONS_CRITERION = (
    "Has all five sections: Executive Summary, Data Analysis Results, External Context & Insights, "
    "Key Connections, Conclusions"
)


def listing(items: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
