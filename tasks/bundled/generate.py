"""Generate the bundled benchmark: analyst questions over the BIRD `regional_sales` database and
the documents of its fictional owner, Larkspur Home Goods (docs/).

Every gold answer is computed here by executing the gold SQL against data/regional_sales.sqlite;
nothing is hand-typed. Choice options are the real answer plus distractors drawn from other rows
of the same result (or from a stated distractor query), shuffled with a seed derived from the
question text, so adding a task never reshuffles the others.

    python -m data_agent_compare.tasks.bundled.generate          # rewrite tasks.jsonl
    python -m data_agent_compare.tasks.bundled.generate --check  # exit 1 if tasks.jsonl is out of date
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import random
import sqlite3
import string
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...compare.task import (
    AltGroup,
    DagEdge,
    DagNode,
    DataSource,
    DataSourceKind,
    EdgeType,
    Gold,
    GoldDag,
    QuestionType,
    Rubric,
    RubricDimension,
    Task,
)

ROOT = Path(__file__).resolve().parent
DB_PATH = ROOT / "data" / "regional_sales.sqlite"
DOCS_DIR = ROOT / "docs"
OUTPUT = ROOT / "tasks.jsonl"
BENCHMARK = "bundled"
DATABASE = "regional_sales"

Level = Literal["easy", "medium", "hard"]

# ---------------------------------------------------------------- company facts (mirrored in docs/)
# Each constant restates a rule from one document; the DocFact strings of the specs below are
# checked by the tests to appear verbatim in that document, so the two cannot drift apart.

CATEGORIES: dict[str, tuple[str, ...]] = {
    "Furniture": (
        "Bathroom Furniture",
        "Bedroom Furniture",
        "Dining Furniture",
        "Outdoor Furniture",
        "Wardrobes",
        "Vanities",
        "Bean Bags",
    ),
    "Lighting": ("Table Lamps", "Floor Lamps", "Pendants"),
    "Kitchen & Dining": (
        "Cookware",
        "Bakeware",
        "Serveware",
        "Dinnerware",
        "Platters",
        "Stemware",
        "Cocktail Glasses",
        "Bar Tools",
        "Wine Storage",
    ),
    "Soft Furnishings": ("Blankets", "Pillows", "Rugs", "Table Linens", "Furniture Cushions"),
    "Home Decor": (
        "Photo Frames",
        "Wall Frames",
        "Mirrors",
        "Floral",
        "Vases",
        "Candles",
        "Candleholders",
        "Home Fragrances",
        "Wall Coverings",
        "Outdoor Decor",
        "Clocks",
        "Sculptures",
        "Collectibles",
    ),
    "Seasonal": ("Ornaments", "Wreaths", "Festive"),
    "Electronics": ("Computers", "TV and video", "Phones", "Audio", "Accessories"),
    "Sports": ("Baseball", "Basketball"),
}
DISTRIBUTION_CENTERS = {
    "WARE-XYS1001": "Reno DC",
    "WARE-NBV1002": "Memphis DC",
    "WARE-NMK1003": "Columbus DC",
    "WARE-UHY1004": "Allentown DC",
    "WARE-PUJ1005": "Dallas DC",
    "WARE-MKL1006": "Ontario DC",
}
CHANNEL_CAPS = {"In-Store": 0.40, "Distributor": 0.30, "Online": 0.20, "Wholesale": 0.20}
REGION_TARGETS = {
    ("Midwest", 2019): 6_000_000,
    ("Northeast", 2019): 3_200_000,
    ("South", 2019): 9_200_000,
    ("West", 2019): 10_000_000,
    ("Midwest", 2020): 6_200_000,
    ("Northeast", 2020): 3_300_000,
    ("South", 2020): 9_000_000,
    ("West", 2020): 9_500_000,
}


@dataclass(frozen=True)
class DocFact:
    """A fact a task relies on: `text` must appear verbatim in docs/`doc`."""

    doc: str
    text: str
    shapes_query: bool = True  # False: needed to interpret or narrate the result, not to write the SQL


NET_REVENUE = DocFact("metric_definitions.md", "unit price × order quantity × (1 − discount applied)")
GROSS_MARGIN = DocFact("metric_definitions.md", "total gross margin ÷ total net revenue")
FISCAL_YEAR = DocFact("fiscal_calendar.md", "FY2020 therefore runs from 1 July 2019 to 30 June 2020")
FISCAL_QUARTERS = DocFact("fiscal_calendar.md", "| Q1 | July, August, September |")
STORE_REGION = DocFact("regional_targets.md", "the **region of the store that took it**")
COMPANY_MARGIN_TARGET = DocFact("regional_targets.md", "**Gross margin % target: 29.50 %**")
QUARTER_TARGET = DocFact("regional_targets.md", "**Quarterly net revenue target: $7,250,000**")
HIGH_VALUE = DocFact("order_classification.md", "net revenue is **at least $20,000**")
DEEP_DISCOUNT = DocFact("discount_policy.md", "A **deep discount** is any discount of 0.30 or more")
DEEP_SHARE_CEILING = DocFact("discount_policy.md", "at or below 8.00 %", shapes_query=False)
QUOTA = DocFact("sales_team_compensation.md", "**$1,000,000 of net revenue per fiscal year**")
PRESIDENTS_CLUB = DocFact("sales_team_compensation.md", "quota attainment is **at least 110 %**")
CALENDAR_REVIEW = DocFact("store_performance.md", "store reviews use the **calendar year**")
METRO_TIER = DocFact("store_performance.md", "| Metro | 1,000,000 or more |")
METRO_FLOOR = DocFact("store_performance.md", "**Metro** stores: below **$60,000**")
STANDARD_FLOOR = DocFact("store_performance.md", "**Large** and **Mid** stores: below **$40,000**")
STAR_STORE = DocFact("store_performance.md", "**$150,000 or more**")
PRIORITY = DocFact("customer_programs.md", "net revenue in the **previous** fiscal year was **at least $650,000**")
REBATE = DocFact("customer_programs.md", "**rebate of 2 %**")
WATCH_LIST = DocFact("customer_programs.md", "**more than 15 % lower**")
TRIMMED_NAMES = DocFact("customer_programs.md", "with surrounding spaces removed")
SHIP_SLA = DocFact("fulfillment_sla.md", "ship time is **at most 21 days**")
DELIVERY_LIMITS = DocFact("fulfillment_sla.md", "| Online | 25 days |")
DELIVERY_TARGET = DocFact("fulfillment_sla.md", "**delivery SLA compliance target is 80 %**")
CATEGORY_FLOOR = DocFact("product_categories.md", "gross margin % of **at least 30.0 %**")
STRATEGIC = DocFact("product_categories.md", "**Furniture** and **Lighting**", shapes_query=False)
CATEGORY_MEMBERS = tuple(
    DocFact("product_categories.md", f"**{name}** ({len(lines)} lines): {', '.join(lines)}.")
    for name, lines in CATEGORIES.items()
)
DC_NAMES = tuple(DocFact("fulfillment_sla.md", f"| {code} | {name} |") for code, name in DISTRIBUTION_CENTERS.items())
CAP_ROWS = tuple(DocFact("discount_policy.md", f"| {channel} | {cap:.2f} |") for channel, cap in CHANNEL_CAPS.items())
TARGET_ROWS = tuple(
    DocFact(
        "regional_targets.md", f"| {region} | ${REGION_TARGETS[region, 2019]:,} | ${REGION_TARGETS[region, 2020]:,} |"
    )
    for region in ("Midwest", "Northeast", "South", "West")
)

DOC_TOPICS = {
    "metric_definitions.md": "net revenue and gross margin definitions",
    "fiscal_calendar.md": "fiscal year and fiscal quarter calendar",
    "order_classification.md": "high-value order definition",
    "discount_policy.md": "discount tiers, approval and channel discount caps",
    "regional_targets.md": "regional and company targets, region attribution",
    "sales_team_compensation.md": "sales team quota and President's Club",
    "store_performance.md": "store review: market tiers, underperforming and star stores",
    "customer_programs.md": "Priority customer program, rebate and watch list",
    "fulfillment_sla.md": "distribution center names and delivery/ship SLAs",
    "product_categories.md": "product category membership and margin floor",
}

# ---------------------------------------------------------------- SQL building blocks
# Prices are TEXT with thousands commas and dates are M/D/YY text, so every query goes through
# the same parsing CTE; composing it here keeps the gold SQL of all tasks consistent.

ORDERS = """WITH orders AS (
    SELECT so.*,
           CAST(REPLACE(so."Unit Price", ',', '') AS REAL) * so."Order Quantity" AS gross_revenue,
           CAST(REPLACE(so."Unit Price", ',', '') AS REAL) * so."Order Quantity"
               * (1 - so."Discount Applied") AS net_revenue,
           CAST(REPLACE(so."Unit Cost", ',', '') AS REAL) * so."Order Quantity" AS cogs,
           2000 + CAST(substr(so.OrderDate, -2) AS INTEGER) AS cal_year,
           CAST(substr(so.OrderDate, 1, instr(so.OrderDate, '/') - 1) AS INTEGER) AS month,
           2000 + CAST(substr(so.OrderDate, -2) AS INTEGER)
               + (CAST(substr(so.OrderDate, 1, instr(so.OrderDate, '/') - 1) AS INTEGER) >= 7) AS fiscal_year
    FROM "Sales Orders" AS so
)"""

STORE_REGION_JOIN = """JOIN "Store Locations" AS sl ON sl.StoreID = o._StoreID
JOIN Regions AS r ON r.StateCode = sl.StateCode"""


def with_orders(select: str, *ctes: str) -> str:
    """The orders CTE, any further CTEs, then the final SELECT."""
    return ",\n".join([ORDERS, *ctes]) + "\n" + select


def iso_date(column: str) -> str:
    # CAST of '31/18' AS INTEGER keeps the leading number (SQLite casts the longest numeric prefix).
    return (
        f"printf('20%s-%02d-%02d', substr({column}, -2), "
        f"CAST(substr({column}, 1, instr({column}, '/') - 1) AS INTEGER), "
        f"CAST(substr({column}, instr({column}, '/') + 1) AS INTEGER))"
    )


TIMED = f"""timed AS (
    SELECT o.*,
           julianday({iso_date("o.ShipDate")}) - julianday({iso_date("o.OrderDate")}) AS ship_days,
           julianday({iso_date("o.DeliveryDate")}) - julianday({iso_date("o.OrderDate")}) AS delivery_days
    FROM orders AS o
)"""

ON_TIME = "t.delivery_days <= CASE WHEN t.\"Sales Channel\" = 'Online' THEN 25 ELSE 30 END"


def _case(expression: str, mapping: dict[str, str], indent: str = "    ") -> str:
    whens = "\n".join(f"{indent}    WHEN {key} THEN {value}" for key, value in mapping.items())
    return f"CASE {expression}\n{whens}\n{indent}END"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


DC_NAME = _case("t.WarehouseCode", {_quote(k): _quote(v) for k, v in DISTRIBUTION_CENTERS.items()})
CHANNEL_CAP = _case('o."Sales Channel"', {_quote(k): f"{v:.2f}" for k, v in CHANNEL_CAPS.items()})
CATEGORIZED = (
    "categorized AS (\n    SELECT o.*,\n           CASE\n"
    + "\n".join(
        f'               WHEN p."Product Name" IN ({", ".join(_quote(line) for line in lines)}) THEN {_quote(name)}'
        for name, lines in CATEGORIES.items()
    )
    + "\n           END AS category\n    FROM orders AS o\n    JOIN Products AS p ON p.ProductID = o._ProductID\n)"
)
TARGETS = (
    "targets(region, fiscal_year, target) AS (\n    VALUES "
    + ",\n           ".join(
        f"({_quote(region)}, {year}, {amount})" for (region, year), amount in REGION_TARGETS.items()
    )
    + "\n)"
)
REGION_ACTUALS = f"""actuals AS (
    SELECT r.Region AS region, o.fiscal_year, SUM(o.net_revenue) AS net_revenue
    FROM orders AS o
    {STORE_REGION_JOIN.replace(chr(10), chr(10) + "    ")}
    GROUP BY r.Region, o.fiscal_year
)"""
CUSTOMER_YEARS = """customer_years AS (
    SELECT TRIM(c."Customer Names") AS customer,
           SUM(CASE WHEN o.fiscal_year = 2019 THEN o.net_revenue ELSE 0 END) AS fy2019,
           SUM(CASE WHEN o.fiscal_year = 2020 THEN o.net_revenue ELSE 0 END) AS fy2020
    FROM orders AS o
    JOIN Customers AS c ON c.CustomerID = o._CustomerID
    GROUP BY c.CustomerID
)"""


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


def open_database(path: Path = DB_PATH) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


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


# ---------------------------------------------------------------- task specs


@dataclass(frozen=True)
class Spec:
    question: str
    qtype: QuestionType
    level: Level
    sql: str
    derive: Deriver
    concepts: tuple[str, ...]
    facts: tuple[DocFact, ...] = ()
    guidelines: str | None = None
    ratio: bool = False  # the final figure is a rate an agent may compute in SQL or in Python
    distractor_sql: str | None = None

    def seed(self) -> int:
        return int.from_bytes(hashlib.sha256(self.question.encode()).digest()[:8], "big")


SC = QuestionType.SINGLE_CHOICE
MC = QuestionType.MULTIPLE_CHOICE
FACTOID = QuestionType.FACTOID
REPORT = QuestionType.REPORT

SINGLE_GUIDELINE = "Choose exactly one option; answer with its letter (e.g. B)."
MULTI_GUIDELINE = "Choose every correct option (two to four are correct); answer with their letters, e.g. A, C, F."
REPORT_GUIDELINE = (
    "Write a Markdown report with exactly these sections: Executive Summary, Data Analysis Results, "
    "External Context & Insights, Key Connections, Conclusions. Quote the figures you computed."
)
INTEGER_GUIDELINE = "Answer with a single integer, without thousands separators or units."
DECIMAL_GUIDELINE = "Answer with a single number rounded to 2 decimal places, without units or % sign."
DOLLAR_GUIDELINE = "Answer with a single number rounded to the nearest dollar, without thousands separators or $."
NAME_GUIDELINE = "Answer with the name only, exactly as stored but without leading or trailing spaces."


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


# Single choice ------------------------------------------------------------------------------

SINGLE_CHOICE: list[Spec] = [
    Spec(
        question="Across the whole order history, which sales channel brought in the largest number of orders?",
        qtype=SC,
        level="easy",
        sql='SELECT "Sales Channel" AS sales_channel, COUNT(*) AS orders\n'
        'FROM "Sales Orders"\nGROUP BY "Sales Channel"\nORDER BY orders DESC, sales_channel',
        derive=TopChoice("sales_channel", "orders"),
        concepts=("GROUP BY", "COUNT", "ORDER BY"),
    ),
    Spec(
        question="Which product line has sold the most units (total order quantity) over all orders on record?",
        qtype=SC,
        level="easy",
        sql='SELECT p."Product Name" AS product, SUM(so."Order Quantity") AS units\n'
        'FROM "Sales Orders" AS so\nJOIN Products AS p ON p.ProductID = so._ProductID\n'
        "GROUP BY p.ProductID\nORDER BY units DESC, product\nLIMIT 10",
        derive=TopChoice("product", "units"),
        concepts=("JOIN", "GROUP BY", "SUM", "quoted identifiers"),
    ),
    Spec(
        question="Which state has the most Larkspur store locations?",
        qtype=SC,
        level="easy",
        sql='SELECT State AS state, COUNT(*) AS stores\nFROM "Store Locations"\n'
        "GROUP BY State\nORDER BY stores DESC, state\nLIMIT 10",
        derive=TopChoice("state", "stores"),
        concepts=("GROUP BY", "COUNT"),
    ),
    Spec(
        question="Which distribution center shipped the most orders placed in calendar year 2019?",
        qtype=SC,
        level="easy",
        sql=f"SELECT {DC_NAME} AS distribution_center,\n       COUNT(*) AS orders\n"
        "FROM \"Sales Orders\" AS t\nWHERE t.OrderDate LIKE '%/19'\n"
        "GROUP BY t.WarehouseCode\nORDER BY orders DESC",
        derive=TopChoice("distribution_center", "orders"),
        concepts=("CASE mapping from a document", "text date filter", "GROUP BY"),
        facts=DC_NAMES,
    ),
    Spec(
        question="Across the whole order history, which sales channel has the most orders that break "
        "its channel discount cap?",
        qtype=SC,
        level="easy",
        sql=f'SELECT o."Sales Channel" AS sales_channel,\n'
        f'       SUM(o."Discount Applied" > {CHANNEL_CAP}) AS cap_violations\n'
        'FROM "Sales Orders" AS o\nGROUP BY o."Sales Channel"\nORDER BY cap_violations DESC',
        derive=TopChoice("sales_channel", "cap_violations"),
        concepts=("CASE thresholds from a document", "conditional SUM"),
        facts=CAP_ROWS,
    ),
    Spec(
        question="Which region generated the highest net revenue in FY2020?",
        qtype=SC,
        level="medium",
        sql=with_orders(
            "SELECT r.Region AS region, ROUND(SUM(o.net_revenue), 2) AS net_revenue\n"
            f"FROM orders AS o\n{STORE_REGION_JOIN}\nWHERE o.fiscal_year = 2020\n"
            "GROUP BY r.Region\nORDER BY net_revenue DESC"
        ),
        derive=TopChoice("region", "net_revenue"),
        concepts=("CTE", "text-to-number cast", "fiscal year from M/D/YY text", "multi-table JOIN"),
        facts=(NET_REVENUE, FISCAL_YEAR, STORE_REGION),
    ),
    Spec(
        question="Which region beat its FY2020 net revenue target by the widest margin in percentage terms?",
        qtype=SC,
        level="medium",
        sql=with_orders(
            "SELECT a.region, ROUND(a.net_revenue, 2) AS net_revenue, t.target,\n"
            "       ROUND(100.0 * a.net_revenue / t.target, 2) AS attainment_pct\n"
            "FROM actuals AS a\nJOIN targets AS t ON t.region = a.region AND t.fiscal_year = a.fiscal_year\n"
            "WHERE a.fiscal_year = 2020\nORDER BY attainment_pct DESC",
            TARGETS,
            REGION_ACTUALS,
        ),
        derive=TopChoice("region", "attainment_pct"),
        concepts=("VALUES table of document targets", "ratio", "fiscal year", "multi-table JOIN"),
        facts=(NET_REVENUE, FISCAL_YEAR, STORE_REGION, *TARGET_ROWS),
        ratio=True,
    ),
    Spec(
        question="Which product category earned the highest gross margin % in FY2020?",
        qtype=SC,
        level="medium",
        sql=with_orders(
            "SELECT category,\n"
            "       ROUND(100.0 * SUM(net_revenue - cogs) / SUM(net_revenue), 2) AS gross_margin_pct\n"
            "FROM categorized\nWHERE fiscal_year = 2020\nGROUP BY category\nORDER BY gross_margin_pct DESC",
            CATEGORIZED,
        ),
        derive=TopChoice("category", "gross_margin_pct"),
        concepts=("CASE mapping from a document", "ratio of sums", "fiscal year"),
        facts=(NET_REVENUE, GROSS_MARGIN, FISCAL_YEAR, *CATEGORY_MEMBERS),
        ratio=True,
    ),
    Spec(
        question="Which sales team fell furthest short of its FY2020 quota?",
        qtype=SC,
        level="medium",
        sql=with_orders(
            'SELECT st."Sales Team" AS sales_team, ROUND(1000000 - SUM(o.net_revenue), 2) AS quota_gap\n'
            'FROM orders AS o\nJOIN "Sales Team" AS st ON st.SalesTeamID = o._SalesTeamID\n'
            "WHERE o.fiscal_year = 2020\nGROUP BY st.SalesTeamID\nHAVING SUM(o.net_revenue) < 1000000\n"
            "ORDER BY quota_gap DESC"
        ),
        derive=TopChoice("sales_team", "quota_gap"),
        concepts=("HAVING", "threshold from a document", "fiscal year"),
        facts=(NET_REVENUE, FISCAL_YEAR, QUOTA),
    ),
    Spec(
        question="How many stores were classed as underperforming in the store review for calendar year 2020?",
        qtype=SC,
        level="hard",
        sql=with_orders(
            "SELECT COUNT(*) AS underperforming_stores\nFROM store_revenue\n"
            "WHERE net_revenue < CASE WHEN population >= 1000000 THEN 60000 ELSE 40000 END",
            """store_revenue AS (
    SELECT sl.StoreID, sl.Population AS population, COALESCE(SUM(o.net_revenue), 0) AS net_revenue
    FROM "Store Locations" AS sl
    LEFT JOIN orders AS o ON o._StoreID = sl.StoreID AND o.cal_year = 2020
    GROUP BY sl.StoreID, sl.Population
)""",
        ),
        derive=ValueChoice("underperforming_stores"),
        concepts=("LEFT JOIN with filter in ON", "tiered thresholds from a document", "calendar year"),
        facts=(NET_REVENUE, CALENDAR_REVIEW, METRO_TIER, METRO_FLOOR, STANDARD_FLOOR),
        distractor_sql=with_orders(
            "SELECT SUM(cal_net < 40000) AS ignoring_metro_floor,\n"
            "       SUM(fy_net < CASE WHEN population >= 1000000 THEN 60000 ELSE 40000 END) AS using_fy2020,\n"
            "       SUM(cal_gross < CASE WHEN population >= 1000000 THEN 60000 ELSE 40000 END) AS using_gross_revenue\n"
            "FROM store_revenue",
            """store_revenue AS (
    SELECT sl.StoreID, sl.Population AS population,
           SUM(CASE WHEN o.cal_year = 2020 THEN o.net_revenue ELSE 0 END) AS cal_net,
           SUM(CASE WHEN o.fiscal_year = 2020 THEN o.net_revenue ELSE 0 END) AS fy_net,
           SUM(CASE WHEN o.cal_year = 2020 THEN o.gross_revenue ELSE 0 END) AS cal_gross
    FROM "Store Locations" AS sl
    LEFT JOIN orders AS o ON o._StoreID = sl.StoreID
    GROUP BY sl.StoreID, sl.Population
)""",
        ),
    ),
    Spec(
        question="Which distribution center had the lowest ship-SLA compliance rate in FY2020?",
        qtype=SC,
        level="hard",
        sql=with_orders(
            f"SELECT {DC_NAME} AS distribution_center,\n"
            "       ROUND(100.0 * AVG(t.ship_days <= 21), 2) AS ship_sla_pct\n"
            "FROM timed AS t\nWHERE t.fiscal_year = 2020\nGROUP BY t.WarehouseCode\nORDER BY ship_sla_pct",
            TIMED,
        ),
        derive=TopChoice("distribution_center", "ship_sla_pct"),
        concepts=("date arithmetic on M/D/YY text", "julianday", "rate", "CASE mapping from a document"),
        facts=(FISCAL_YEAR, SHIP_SLA, *DC_NAMES),
        ratio=True,
    ),
    Spec(
        question="Among customers holding Priority status in FY2020, which one saw the steepest year-over-year "
        "drop in net revenue?",
        qtype=SC,
        level="hard",
        sql=with_orders(
            "SELECT customer, ROUND(fy2019, 2) AS fy2019_net_revenue, ROUND(fy2020, 2) AS fy2020_net_revenue,\n"
            "       ROUND(100.0 * (fy2020 - fy2019) / fy2019, 2) AS yoy_change_pct,\n"
            "       fy2019 >= 650000 AS priority_fy2020\n"
            "FROM customer_years\nORDER BY yoy_change_pct",
            CUSTOMER_YEARS,
        ),
        derive=TopChoice("customer", "yoy_change_pct", qualifies="priority_fy2020"),
        concepts=("conditional aggregation by fiscal year", "year-over-year change", "TRIM", "previous-year rule"),
        facts=(NET_REVENUE, FISCAL_YEAR, PRIORITY, TRIMMED_NAMES),
    ),
]

# Multiple choice ----------------------------------------------------------------------------

FISCAL_QUARTER = "CASE WHEN month BETWEEN 7 AND 9 THEN 1 WHEN month >= 10 THEN 2 WHEN month <= 3 THEN 3 ELSE 4 END"

MULTIPLE_CHOICE: list[Spec] = [
    Spec(
        question="Which of the following product lines rank among the five product lines with the most orders "
        "over the whole order history?",
        qtype=MC,
        level="easy",
        sql='SELECT p."Product Name" AS product, COUNT(*) AS orders,\n'
        "       RANK() OVER (ORDER BY COUNT(*) DESC) <= 5 AS top_five\n"
        'FROM "Sales Orders" AS so\nJOIN Products AS p ON p.ProductID = so._ProductID\n'
        "GROUP BY p.ProductID\nORDER BY orders DESC, product",
        derive=MemberChoice("product", "top_five", 8),
        concepts=("window function RANK", "GROUP BY", "JOIN"),
    ),
    Spec(
        question="Which of the following states have at least 25 Larkspur store locations?",
        qtype=MC,
        level="easy",
        sql="SELECT State AS state, COUNT(*) AS stores, COUNT(*) >= 25 AS at_least_25\n"
        'FROM "Store Locations"\nGROUP BY State\nORDER BY stores DESC, state',
        derive=MemberChoice("state", "at_least_25", 8),
        concepts=("GROUP BY", "COUNT", "boolean expression"),
    ),
    Spec(
        question="Which of the following warehouse codes handled more than 1,300 orders over the whole order history?",
        qtype=MC,
        level="easy",
        sql="SELECT WarehouseCode AS warehouse_code, COUNT(*) AS orders, COUNT(*) > 1300 AS over_1300\n"
        'FROM "Sales Orders"\nGROUP BY WarehouseCode\nORDER BY orders DESC',
        derive=MemberChoice("warehouse_code", "over_1300", 6),
        concepts=("GROUP BY", "COUNT"),
    ),
    Spec(
        question="Which of the following region and fiscal-year combinations met their net revenue target?",
        qtype=MC,
        level="medium",
        sql=with_orders(
            "SELECT a.region || ' FY' || a.fiscal_year AS region_year, ROUND(a.net_revenue, 2) AS net_revenue,\n"
            "       t.target, a.net_revenue >= t.target AS met_target\n"
            "FROM actuals AS a\nJOIN targets AS t ON t.region = a.region AND t.fiscal_year = a.fiscal_year\n"
            "ORDER BY a.fiscal_year, a.region",
            TARGETS,
            REGION_ACTUALS,
        ),
        derive=MemberChoice("region_year", "met_target", 8),
        concepts=("VALUES table of document targets", "fiscal year", "multi-table JOIN"),
        facts=(NET_REVENUE, FISCAL_YEAR, STORE_REGION, *TARGET_ROWS),
    ),
    Spec(
        question="Which of the following sales teams qualified for the President's Club in FY2020?",
        qtype=MC,
        level="medium",
        sql=with_orders(
            'SELECT st."Sales Team" AS sales_team, ROUND(SUM(o.net_revenue), 2) AS net_revenue,\n'
            "       SUM(o.net_revenue) >= 1.10 * 1000000 AS presidents_club\n"
            'FROM orders AS o\nJOIN "Sales Team" AS st ON st.SalesTeamID = o._SalesTeamID\n'
            "WHERE o.fiscal_year = 2020\nGROUP BY st.SalesTeamID\nORDER BY net_revenue DESC"
        ),
        derive=MemberChoice("sales_team", "presidents_club", 8),
        concepts=("threshold from a document", "fiscal year", "JOIN"),
        facts=(NET_REVENUE, FISCAL_YEAR, QUOTA, PRESIDENTS_CLUB),
    ),
    Spec(
        question="Which product categories met the category margin floor in FY2020?",
        qtype=MC,
        level="medium",
        sql=with_orders(
            "SELECT category,\n"
            "       ROUND(100.0 * SUM(net_revenue - cogs) / SUM(net_revenue), 2) AS gross_margin_pct,\n"
            "       100.0 * SUM(net_revenue - cogs) / SUM(net_revenue) >= 30.0 AS meets_floor\n"
            "FROM categorized\nWHERE fiscal_year = 2020\nGROUP BY category\nORDER BY gross_margin_pct DESC",
            CATEGORIZED,
        ),
        derive=MemberChoice("category", "meets_floor", 8),
        concepts=("CASE mapping from a document", "ratio of sums", "threshold from a document"),
        facts=(NET_REVENUE, GROSS_MARGIN, FISCAL_YEAR, CATEGORY_FLOOR, *CATEGORY_MEMBERS),
        ratio=True,
    ),
    Spec(
        question="Which of the following fiscal quarters met the company's quarterly net revenue target?",
        qtype=MC,
        level="medium",
        sql=with_orders(
            "SELECT 'Q' || fiscal_quarter || ' FY' || fiscal_year AS quarter,\n"
            "       ROUND(SUM(net_revenue), 2) AS net_revenue,\n"
            "       SUM(net_revenue) >= 7250000 AS met_target\n"
            f"FROM (SELECT *, {FISCAL_QUARTER} AS fiscal_quarter FROM orders)\n"
            "WHERE fiscal_year IN (2019, 2020)\nGROUP BY fiscal_year, fiscal_quarter\n"
            "ORDER BY fiscal_year, fiscal_quarter"
        ),
        derive=MemberChoice("quarter", "met_target", 8),
        concepts=("fiscal quarter from month", "threshold from a document", "subquery"),
        facts=(NET_REVENUE, FISCAL_YEAR, FISCAL_QUARTERS, QUARTER_TARGET),
    ),
    Spec(
        question="Which of the following Metro-tier stores were underperforming in the calendar year 2020 "
        "store review?",
        qtype=MC,
        level="hard",
        sql=with_orders(
            "SELECT sl.\"City Name\" || ', ' || sl.State AS store, sl.Population AS population,\n"
            "       ROUND(COALESCE(SUM(o.net_revenue), 0), 2) AS net_revenue_2020,\n"
            "       COALESCE(SUM(o.net_revenue), 0) < 60000 AS underperforming\n"
            'FROM "Store Locations" AS sl\nLEFT JOIN orders AS o ON o._StoreID = sl.StoreID AND o.cal_year = 2020\n'
            "WHERE sl.Population >= 1000000\nGROUP BY sl.StoreID\nORDER BY net_revenue_2020"
        ),
        derive=MemberChoice("store", "underperforming", 8),
        concepts=("LEFT JOIN", "tier thresholds from a document", "calendar year", "string concatenation"),
        facts=(NET_REVENUE, CALENDAR_REVIEW, METRO_TIER, METRO_FLOOR),
    ),
    Spec(
        question="Which distribution centers fell below the delivery SLA compliance target in FY2020?",
        qtype=MC,
        level="hard",
        sql=with_orders(
            f"SELECT {DC_NAME} AS distribution_center,\n"
            f"       ROUND(100.0 * AVG({ON_TIME}), 2) AS delivery_sla_pct,\n"
            f"       100.0 * AVG({ON_TIME}) < 80 AS below_target\n"
            "FROM timed AS t\nWHERE t.fiscal_year = 2020\nGROUP BY t.WarehouseCode\nORDER BY delivery_sla_pct",
            TIMED,
        ),
        derive=MemberChoice("distribution_center", "below_target", 6),
        concepts=("date arithmetic on M/D/YY text", "channel-specific limits from a document", "rate"),
        facts=(FISCAL_YEAR, DELIVERY_LIMITS, DELIVERY_TARGET, *DC_NAMES),
        ratio=True,
    ),
    Spec(
        question="Which of the following customers hold Priority status for FY2021?",
        qtype=MC,
        level="hard",
        sql=with_orders(
            "SELECT customer, ROUND(fy2020, 2) AS fy2020_net_revenue, fy2020 >= 650000 AS priority_fy2021\n"
            "FROM customer_years\nORDER BY fy2020_net_revenue DESC",
            CUSTOMER_YEARS,
        ),
        derive=MemberChoice("customer", "priority_fy2021", 8),
        concepts=("conditional aggregation by fiscal year", "previous-year rule", "TRIM"),
        facts=(NET_REVENUE, FISCAL_YEAR, PRIORITY, TRIMMED_NAMES),
    ),
]

# Factoid ------------------------------------------------------------------------------------

FACTOIDS: list[Spec] = [
    Spec(
        question="How many orders were placed in calendar year 2019?",
        qtype=FACTOID,
        level="easy",
        sql="SELECT COUNT(*) AS orders\nFROM \"Sales Orders\"\nWHERE OrderDate LIKE '%/19'",
        derive=Factoid("orders", integer),
        concepts=("text date filter", "COUNT"),
        guidelines=INTEGER_GUIDELINE,
    ),
    Spec(
        question="What is the average unit price of Cookware orders, in US dollars?",
        qtype=FACTOID,
        level="easy",
        sql="SELECT ROUND(AVG(CAST(REPLACE(so.\"Unit Price\", ',', '') AS REAL)), 2) AS avg_unit_price\n"
        'FROM "Sales Orders" AS so\nJOIN Products AS p ON p.ProductID = so._ProductID\n'
        "WHERE p.\"Product Name\" = 'Cookware'",
        derive=Factoid("avg_unit_price", two_decimals),
        concepts=("text-to-number cast", "thousands separators", "JOIN"),
        guidelines=DECIMAL_GUIDELINE,
    ),
    Spec(
        question="Which customer has placed the most orders over the whole order history?",
        qtype=FACTOID,
        level="easy",
        sql='SELECT TRIM(c."Customer Names") AS customer, COUNT(*) AS orders\n'
        'FROM "Sales Orders" AS so\nJOIN Customers AS c ON c.CustomerID = so._CustomerID\n'
        "GROUP BY c.CustomerID\nORDER BY orders DESC\nLIMIT 5",
        derive=Factoid("customer", text, score="orders"),
        concepts=("TRIM", "GROUP BY", "JOIN"),
        guidelines=NAME_GUIDELINE,
    ),
    Spec(
        question="How many star stores did Larkspur have in calendar year 2020?",
        qtype=FACTOID,
        level="easy",
        sql=with_orders(
            "SELECT COUNT(*) AS star_stores\nFROM (\n    SELECT o._StoreID\n    FROM orders AS o\n"
            "    WHERE o.cal_year = 2020\n    GROUP BY o._StoreID\n    HAVING SUM(o.net_revenue) >= 150000\n)"
        ),
        derive=Factoid("star_stores", integer),
        concepts=("HAVING", "threshold from a document", "calendar year"),
        facts=(NET_REVENUE, CALENDAR_REVIEW, STAR_STORE),
        guidelines=INTEGER_GUIDELINE,
    ),
    Spec(
        question="What was Larkspur's total net revenue in FY2020, in US dollars?",
        qtype=FACTOID,
        level="medium",
        sql=with_orders("SELECT ROUND(SUM(net_revenue)) AS net_revenue\nFROM orders\nWHERE fiscal_year = 2020"),
        derive=Factoid("net_revenue", integer),
        concepts=("text-to-number cast", "fiscal year from M/D/YY text", "SUM"),
        facts=(NET_REVENUE, FISCAL_YEAR),
        guidelines=DOLLAR_GUIDELINE,
    ),
    Spec(
        question="How many high-value orders were placed in FY2020?",
        qtype=FACTOID,
        level="medium",
        sql=with_orders(
            "SELECT COUNT(*) AS high_value_orders\nFROM orders\nWHERE fiscal_year = 2020 AND net_revenue >= 20000"
        ),
        derive=Factoid("high_value_orders", integer),
        concepts=("threshold from a document", "fiscal year", "COUNT"),
        facts=(NET_REVENUE, FISCAL_YEAR, HIGH_VALUE),
        guidelines=INTEGER_GUIDELINE,
    ),
    Spec(
        question="What percentage of FY2020 orders needed written discount approval from a regional director?",
        qtype=FACTOID,
        level="medium",
        sql=with_orders(
            'SELECT ROUND(100.0 * AVG("Discount Applied" >= 0.30), 2) AS approval_share_pct\n'
            "FROM orders\nWHERE fiscal_year = 2020"
        ),
        derive=Factoid("approval_share_pct", two_decimals),
        concepts=("threshold from a document", "rate", "fiscal year"),
        facts=(FISCAL_YEAR, DEEP_DISCOUNT),
        guidelines=DECIMAL_GUIDELINE + " Give a percentage (e.g. 12.34 for 12.34 %).",
        ratio=True,
    ),
    Spec(
        question="What was the delivery SLA compliance rate of Online orders in FY2020?",
        qtype=FACTOID,
        level="hard",
        sql=with_orders(
            "SELECT ROUND(100.0 * AVG(t.delivery_days <= 25), 2) AS online_delivery_sla_pct\n"
            "FROM timed AS t\nWHERE t.fiscal_year = 2020 AND t.\"Sales Channel\" = 'Online'",
            TIMED,
        ),
        derive=Factoid("online_delivery_sla_pct", two_decimals),
        concepts=("date arithmetic on M/D/YY text", "julianday", "channel-specific limit from a document", "rate"),
        facts=(FISCAL_YEAR, DELIVERY_LIMITS),
        guidelines=DECIMAL_GUIDELINE + " Give a percentage (e.g. 12.34 for 12.34 %).",
        ratio=True,
    ),
    Spec(
        question="How much rebate does Larkspur owe its Priority customers for FY2020, in US dollars?",
        qtype=FACTOID,
        level="hard",
        sql=with_orders(
            "SELECT ROUND(0.02 * SUM(fy2020)) AS fy2020_rebate\nFROM customer_years\nWHERE fy2019 >= 650000",
            CUSTOMER_YEARS,
        ),
        derive=Factoid("fy2020_rebate", integer),
        concepts=("conditional aggregation by fiscal year", "previous-year qualification", "rates from a document"),
        facts=(NET_REVENUE, FISCAL_YEAR, PRIORITY, REBATE),
        guidelines=DOLLAR_GUIDELINE,
    ),
    Spec(
        question="By how many percentage points did the company's FY2020 gross margin % beat (or miss) "
        "the company target?",
        qtype=FACTOID,
        level="hard",
        sql=with_orders(
            "SELECT ROUND(100.0 * SUM(net_revenue - cogs) / SUM(net_revenue) - 29.50, 2) AS points_vs_target\n"
            "FROM orders\nWHERE fiscal_year = 2020"
        ),
        derive=Factoid("points_vs_target", two_decimals),
        concepts=("ratio of sums", "target from a document", "fiscal year"),
        facts=(NET_REVENUE, GROSS_MARGIN, FISCAL_YEAR, COMPANY_MARGIN_TARGET),
        guidelines=DECIMAL_GUIDELINE + " Use a negative number if the target was missed.",
        ratio=True,
    ),
]

# Reports ------------------------------------------------------------------------------------

REGION_REPORT_SQL = with_orders(
    "SELECT a.region, ROUND(a.net_revenue, 2) AS net_revenue, t.target,\n"
    "       ROUND(100.0 * a.net_revenue / t.target, 2) AS attainment_pct,\n"
    "       ROUND(a.net_revenue - t.target, 2) AS gap\n"
    "FROM actuals AS a\nJOIN targets AS t ON t.region = a.region AND t.fiscal_year = a.fiscal_year\n"
    "WHERE a.fiscal_year = 2020\nORDER BY attainment_pct DESC",
    TARGETS,
    REGION_ACTUALS,
)
DISCOUNT_REPORT_SQL = with_orders(
    'SELECT o."Sales Channel" AS sales_channel, COUNT(*) AS orders,\n'
    '       SUM(o."Discount Applied" >= 0.30) AS deep_discount_orders,\n'
    '       ROUND(100.0 * AVG(o."Discount Applied" >= 0.30), 2) AS deep_discount_pct,\n'
    f'       SUM(o."Discount Applied" > {CHANNEL_CAP}) AS cap_violations,\n'
    f'       ROUND(SUM(CASE WHEN o."Discount Applied" > {CHANNEL_CAP}\n'
    "                 THEN o.gross_revenue - o.net_revenue ELSE 0 END), 2) AS violation_discount_usd\n"
    'FROM orders AS o\nWHERE o.fiscal_year = 2020\nGROUP BY o."Sales Channel"\nORDER BY cap_violations DESC'
)
FULFILLMENT_REPORT_SQL = with_orders(
    f"SELECT {DC_NAME} AS distribution_center,\n"
    "       COUNT(*) AS orders,\n"
    "       ROUND(AVG(t.delivery_days), 2) AS avg_delivery_days,\n"
    f"       ROUND(100.0 * AVG({ON_TIME}), 2) AS delivery_sla_pct,\n"
    "       ROUND(100.0 * AVG(t.ship_days <= 21), 2) AS ship_sla_pct\n"
    "FROM timed AS t\nWHERE t.fiscal_year = 2020\nGROUP BY t.WarehouseCode\nORDER BY delivery_sla_pct",
    TIMED,
)
CATEGORY_REPORT_SQL = with_orders(
    "SELECT category,\n"
    "       ROUND(SUM(CASE WHEN fiscal_year = 2019 THEN net_revenue ELSE 0 END), 2) AS fy2019_net_revenue,\n"
    "       ROUND(SUM(CASE WHEN fiscal_year = 2020 THEN net_revenue ELSE 0 END), 2) AS fy2020_net_revenue,\n"
    "       ROUND(100.0 * (SUM(CASE WHEN fiscal_year = 2020 THEN net_revenue ELSE 0 END)\n"
    "             / SUM(CASE WHEN fiscal_year = 2019 THEN net_revenue ELSE 0 END) - 1), 2) AS growth_pct,\n"
    "       ROUND(100.0 * SUM(CASE WHEN fiscal_year = 2019 THEN net_revenue - cogs ELSE 0 END)\n"
    "             / SUM(CASE WHEN fiscal_year = 2019 THEN net_revenue ELSE 0 END), 2) AS fy2019_margin_pct,\n"
    "       ROUND(100.0 * SUM(CASE WHEN fiscal_year = 2020 THEN net_revenue - cogs ELSE 0 END)\n"
    "             / SUM(CASE WHEN fiscal_year = 2020 THEN net_revenue ELSE 0 END), 2) AS fy2020_margin_pct\n"
    "FROM categorized\nGROUP BY category\nORDER BY fy2020_net_revenue DESC",
    CATEGORIZED,
)
PRIORITY_REPORT_SQL = with_orders(
    "SELECT customer, ROUND(fy2019, 2) AS fy2019_net_revenue, ROUND(fy2020, 2) AS fy2020_net_revenue,\n"
    "       ROUND(100.0 * (fy2020 - fy2019) / fy2019, 2) AS yoy_change_pct,\n"
    "       ROUND(0.02 * fy2020, 2) AS rebate,\n"
    "       100.0 * (fy2020 - fy2019) / fy2019 < -15 AS watch_list\n"
    "FROM customer_years\nWHERE fy2019 >= 650000\nORDER BY fy2019 DESC",
    CUSTOMER_YEARS,
)


def listing(items: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B and C'."""
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def render_region_report(result: Result) -> ReportParts:
    rows = result.records()
    met = [r["region"] for r in rows if r["gap"] >= 0]
    missed = [r["region"] for r in rows if r["gap"] < 0]
    total, plan = sum(r["net_revenue"] for r in rows), sum(r["target"] for r in rows)
    top, bottom = rows[0], rows[-1]
    surplus = max(rows, key=lambda r: r["gap"])
    shortfall = min(rows, key=lambda r: r["gap"])
    figures = "; ".join(f"{r['region']} {usd(r['net_revenue'])}" for r in rows)
    targets = "; ".join(f"{r['region']} {usd(r['target'])}" for r in rows)
    formats = {"net_revenue": usd, "target": usd, "attainment_pct": pct, "gap": usd}
    return ReportParts(
        summary=f"In FY2020 (1 July 2019 to 30 June 2020) the four regions booked {usd(total)} of net revenue "
        f"against a combined plan of {usd(plan)} ({pct(100 * total / plan)} attainment). {listing(met)} met "
        f"their targets; {listing(missed)} missed. {top['region']} led on attainment at {pct(top['attainment_pct'])}, "
        f"{bottom['region']} trailed at {pct(bottom['attainment_pct'])}.",
        analysis=md_table(result, formats)
        + f"\n\nThe largest dollar surplus was {surplus['region']} ({usd(surplus['gap'])}), the largest shortfall "
        f"{shortfall['region']} ({usd(shortfall['gap'])}).",
        context="The annual plan sets FY2020 net revenue targets per region and attributes each order to the "
        "region of the store that took it (store state → Regions), not to the sales team's home region. Net "
        "revenue is unit price × order quantity × (1 − discount); prices are stored as text with thousands "
        "separators and must be converted before summing. FY2020 runs from 1 July 2019 to 30 June 2020.",
        connections=f"Attainment and dollar gap rank the regions differently: {top['region']} has the highest "
        f"attainment while {surplus['region']} contributes the most surplus dollars because its target is larger. "
        f"The shortfalls of {listing(missed)} add up to {usd(-sum(r['gap'] for r in rows if r['gap'] < 0))}.",
        conclusions=f"FY2020 plan attainment was mixed: {listing(met)} exceeded plan, {listing(missed)} fell short. "
        f"Recovery plans should focus on {shortfall['region']}, the largest gap in dollars.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 net revenue per region: {figures}",
                "Attributes orders to the store's region (Store Locations → Regions), not the Sales Team region",
            ],
            external=[
                f"Uses the FY2020 targets of the annual plan: {targets}",
                "Defines FY2020 as 1 July 2019 to 30 June 2020",
            ],
            logic=[
                f"Identifies {listing(met)} as meeting plan and {listing(missed)} as missing it",
                f"Ranks {top['region']} first on attainment ({pct(top['attainment_pct'])})",
                f"Notes {surplus['region']} has the largest dollar surplus ({usd(surplus['gap'])})",
            ],
            complete=["Gives net revenue, target, attainment and gap for all four regions", SECTIONS_CRITERION],
        ),
        chain=[
            "fiscal_calendar.md: FY2020 date range → filter orders by OrderDate",
            "regional_targets.md: order region = store's region → join Store Locations and Regions",
            "metric_definitions.md: net revenue formula → aggregate per region",
            "regional_targets.md: FY2020 targets → attainment and gap",
        ],
    )


def render_discount_report(result: Result) -> ReportParts:
    rows = result.records()
    orders = sum(r["orders"] for r in rows)
    deep = sum(r["deep_discount_orders"] for r in rows)
    violations = sum(r["cap_violations"] for r in rows)
    leakage = sum(r["violation_discount_usd"] for r in rows)
    worst = rows[0]
    clean = [r["sales_channel"] for r in rows if r["cap_violations"] == 0]
    above = [r["sales_channel"] for r in rows if r["deep_discount_pct"] > 8.0]
    per_channel = "; ".join(f"{r['sales_channel']} {r['cap_violations']}" for r in rows)
    formats = {"deep_discount_pct": pct, "violation_discount_usd": usd}
    return ReportParts(
        summary=f"Of {orders} FY2020 orders, {deep} ({pct(100 * deep / orders)}) carried a deep discount and "
        f"{violations} broke their channel's discount cap, giving away {usd(leakage)} of discount beyond policy. "
        f"{worst['sales_channel']} accounts for most violations ({worst['cap_violations']}); "
        f"{listing(clean)} had none.",
        analysis=md_table(result, formats)
        + f"\n\nCap violations by channel: {per_channel}. Channels above the 8.00 % deep-discount ceiling: "
        f"{listing(above) if above else 'none'}.",
        context="The discount policy defines a deep discount as 0.30 or more (regional-director approval "
        "required) and caps discounts per channel: In-Store 0.40, Distributor 0.30, Online 0.20, Wholesale 0.20. "
        "An order is a cap violation when its discount is strictly above its channel's cap, even if approved. "
        "The Pricing Committee wants the deep-discount share at or below 8.00 % per fiscal year.",
        connections="Because the Online and Wholesale caps sit below the deep tier, every deep discount on those "
        "channels is also a cap violation, while Distributor violates only at 0.40 and In-Store cannot violate. "
        "Approval of a deep discount therefore does not make it compliant on the low-cap channels.",
        conclusions=f"Enforce the caps in the order system for {worst['sales_channel']} first; the "
        f"{usd(leakage)} of discount above caps is the measurable leakage. Deep-discount share of "
        f"{pct(100 * deep / orders)} is {'above' if deep / orders > 0.08 else 'within'} the 8.00 % ceiling.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 cap violations per channel: {per_channel}",
                f"Reports {deep} deep-discount orders out of {orders} and {usd(leakage)} of discount on violations",
            ],
            external=[
                "Applies the channel caps In-Store 0.40, Distributor 0.30, Online 0.20, Wholesale 0.20",
                "Uses deep discount = 0.30 or more and the 8.00 % deep-discount ceiling",
            ],
            logic=[
                "Explains that on Online and Wholesale every deep discount is a cap violation",
                f"Identifies {worst['sales_channel']} as the channel with most violations and "
                f"{listing(clean)} as compliant",
            ],
            complete=[
                "Covers all four channels with orders, deep discounts, violations and discount amount",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "fiscal_calendar.md: FY2020 date range → filter orders",
            "discount_policy.md: channel caps and deep tier → per-order flags",
            "metric_definitions.md: discount amount = gross − net revenue → leakage",
        ],
    )


def render_fulfillment_report(result: Result) -> ReportParts:
    rows = result.records()
    below = [r for r in rows if r["delivery_sla_pct"] < 80]
    best = rows[-1]
    worst_ship = min(rows, key=lambda r: r["ship_sla_pct"])
    figures = "; ".join(f"{r['distribution_center']} {pct(r['delivery_sla_pct'])}" for r in rows)
    formats = {"delivery_sla_pct": pct, "ship_sla_pct": pct}
    return ReportParts(
        summary=f"In FY2020, {len(below)} of {len(rows)} distribution centers missed the 80 % delivery SLA "
        f"compliance target: {listing([r['distribution_center'] for r in below])}. {best['distribution_center']} "
        f"was best at {pct(best['delivery_sla_pct'])}. Ship-SLA compliance was weakest at "
        f"{worst_ship['distribution_center']} ({pct(worst_ship['ship_sla_pct'])}).",
        analysis=md_table(result, formats)
        + f"\n\nDelivery SLA compliance: {figures}. Average delivery times are close together across DCs, so the "
        "differences come from the tail of late orders rather than from the typical order.",
        context="Supply Chain names the warehouses (WARE-NBV1002 is Memphis DC, WARE-NMK1003 Columbus DC, and so "
        "on). An order is delivered on time when DeliveryDate − OrderDate is at most 25 days for Online orders and "
        "30 days for the other channels; it meets the ship SLA when ShipDate − OrderDate is at most 21 days. The "
        "compliance target is 80 % per DC and fiscal year. Dates are M/D/YY text and must be converted first.",
        connections=f"Ship-SLA compliance ({pct(min(r['ship_sla_pct'] for r in rows))} to "
        f"{pct(max(r['ship_sla_pct'] for r in rows))}) trails delivery compliance at every DC, so late shipping "
        "uses up most of the delivery window; Online orders face the tighter 25-day limit, so a DC's Online share "
        "weighs on its delivery compliance.",
        conclusions=f"{listing([r['distribution_center'] for r in below])} must submit corrective action plans. "
        "Improving ship times is the lever with the most room, ahead of transit.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 delivery SLA compliance per DC: {figures}",
                "Computes elapsed days from converted dates, not from text comparison",
            ],
            external=[
                "Maps warehouse codes to DC names from the fulfillment document",
                "Applies the 25-day Online / 30-day other-channel limits, the 21-day ship SLA and the 80 % target",
            ],
            logic=[
                f"Identifies {listing([r['distribution_center'] for r in below])} as below target",
                "Connects low ship-SLA compliance and the tighter Online limit to the delivery results",
            ],
            complete=[
                "Covers all six DCs with orders, delivery time, delivery and ship compliance",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "fulfillment_sla.md: DC names, SLA limits and target",
            "fiscal_calendar.md: FY2020 range and date format → convert dates",
            "execute_sql: per-DC compliance → compare with 80 %",
        ],
    )


def render_category_report(result: Result) -> ReportParts:
    rows = result.records()
    floor_met = [r["category"] for r in rows if r["fy2020_margin_pct"] >= 30.0]
    growing = [r["category"] for r in rows if r["growth_pct"] > 0]
    lighting = next(r for r in rows if r["category"] == "Lighting")
    furniture = next(r for r in rows if r["category"] == "Furniture")
    steepest = min(rows, key=lambda r: r["growth_pct"])
    largest = rows[0]
    margins = "; ".join(f"{r['category']} {pct(r['fy2020_margin_pct'])}" for r in rows)
    formats = {k: usd for k in ("fy2019_net_revenue", "fy2020_net_revenue")} | {
        k: pct for k in ("growth_pct", "fy2019_margin_pct", "fy2020_margin_pct")
    }
    return ReportParts(
        summary=f"{largest['category']} remained the largest category in FY2020 "
        f"({usd(largest['fy2020_net_revenue'])}). "
        f"Only {listing(floor_met)} met the 30.0 % category margin floor. Of the strategic categories, Furniture "
        f"grew {pct(furniture['growth_pct'])} while Lighting shrank {pct(lighting['growth_pct'])} and its margin "
        f"fell from {pct(lighting['fy2019_margin_pct'])} to {pct(lighting['fy2020_margin_pct'])}.",
        analysis=md_table(result, formats)
        + f"\n\nGrowing categories: {listing(growing)}. Steepest decline: {steepest['category']} "
        f"({pct(steepest['growth_pct'])}).",
        context="Categories exist only in Category Management's hierarchy, which assigns each of the 47 product "
        "lines to one of eight categories (e.g. Furniture Cushions belong to Soft Furnishings). Every category "
        "should earn at least 30.0 % gross margin per fiscal year; Furniture and Lighting are the strategic "
        "growth categories for FY2020 and FY2021. Gross margin % is total gross margin ÷ total net revenue.",
        connections=f"The strategic-category picture is split: Furniture delivers growth but not the margin floor "
        f"({pct(furniture['fy2020_margin_pct'])}), and Lighting misses on both growth and margin. "
        f"{listing(floor_met)} clear the floor, so pricing reviews are due for the other categories.",
        conclusions="Pricing reviews are required for every category below the floor, with Lighting first given "
        "its margin drop; the strategic focus on Furniture is paying off in revenue but not yet in margin.",
        criteria=dimensions(
            sql=[
                f"Reports FY2020 gross margin % per category: {margins}",
                f"Reports Lighting's margin change from {pct(lighting['fy2019_margin_pct'])} to "
                f"{pct(lighting['fy2020_margin_pct'])}",
            ],
            external=[
                "Uses the category hierarchy of the product categories document to group product lines",
                "Applies the 30.0 % margin floor and names Furniture and Lighting as strategic",
            ],
            logic=[
                f"Identifies {listing(floor_met)} as the only categories meeting the floor",
                "Contrasts Furniture's growth with Lighting's decline in revenue and margin",
            ],
            complete=["Covers all eight categories for FY2019 and FY2020 revenue and margin", SECTIONS_CRITERION],
        ),
        chain=[
            "product_categories.md: category membership → CASE mapping of product lines",
            "metric_definitions.md: net revenue and gross margin % definitions",
            "fiscal_calendar.md: FY2019 and FY2020 ranges",
            "product_categories.md: margin floor and strategic categories → assessment",
        ],
    )


def render_priority_report(result: Result) -> ReportParts:
    rows = result.records()
    watch = [r["customer"] for r in rows if r["watch_list"]]
    rebate = sum(r["rebate"] for r in rows)
    grew = [r["customer"] for r in rows if r["yoy_change_pct"] > 0]
    lapsing = [r["customer"] for r in rows if r["fy2020_net_revenue"] < 650000]
    steepest = min(rows, key=lambda r: r["yoy_change_pct"])
    formats = {
        "fy2019_net_revenue": usd,
        "fy2020_net_revenue": usd,
        "yoy_change_pct": pct,
        "rebate": usd,
        "watch_list": lambda v: "yes" if v else "no",
    }
    return ReportParts(
        summary=f"{len(rows)} customers held Priority status in FY2020 (qualified on FY2019 net revenue). Their "
        f"FY2020 rebate totals {usd(rebate)}. {len(watch)} of them fell more than 15 % year over year and go on the "
        f"retention watch list; {steepest['customer']} fell the most ({pct(steepest['yoy_change_pct'])}).",
        analysis=md_table(result, formats)
        + f"\n\nOnly {listing(grew) if grew else 'none'} grew year over year among the Priority customers.",
        context="Under the Priority Customer Program a customer holds Priority status for a fiscal year when its "
        "net revenue in the previous fiscal year was at least $650,000; Priority customers earn a 2 % rebate on "
        "their net revenue in the status year, and those more than 15 % below their qualifying year join the "
        "retention watch list. Customer names are reported without trailing spaces.",
        connections=f"The program's largest accounts are shrinking: {len(watch)} of {len(rows)} Priority customers "
        "are on the watch list, so the rebate is paid mostly to declining accounts. Because status lags one year, "
        f"the {len(lapsing)} whose FY2020 net revenue fell below $650,000 lose Priority status for FY2021.",
        conclusions=f"Accrue {usd(rebate)} of FY2020 rebates, assign executive sponsors to the {len(watch)} "
        "watch-list customers, and review whether a rebate on declining revenue still serves retention.",
        criteria=dimensions(
            sql=[
                f"Lists the {len(rows)} FY2020 Priority customers with FY2019 and FY2020 net revenue",
                f"Reports the total FY2020 rebate of {usd(rebate)}",
            ],
            external=[
                "Applies the previous-year $650,000 qualification, the 2 % rebate and the 15 % watch-list rule",
                "Reports customer names without trailing spaces",
            ],
            logic=[
                f"Identifies the watch list: {listing(watch)}",
                f"Names {steepest['customer']} as the steepest decline ({pct(steepest['yoy_change_pct'])})",
            ],
            complete=[
                "Gives revenue, change, rebate and watch-list flag for every Priority customer",
                SECTIONS_CRITERION,
            ],
        ),
        chain=[
            "customer_programs.md: qualification on previous-year revenue → FY2019 filter",
            "fiscal_calendar.md: FY2019 and FY2020 ranges",
            "metric_definitions.md: net revenue formula",
            "customer_programs.md: 2 % rebate and −15 % watch list → per-customer flags",
        ],
    )


REPORT_SECTIONS = (
    "Use the sections Executive Summary, Data Analysis Results, External Context & Insights, "
    "Key Connections and Conclusions."
)

REPORTS: list[Spec] = [
    Spec(
        question="Prepare a board-ready Markdown report on FY2020 regional performance against plan: for each "
        "region give net revenue, the approved target, attainment and the dollar gap, say which regions met "
        "plan and where recovery effort should go. " + REPORT_SECTIONS,
        qtype=REPORT,
        level="medium",
        sql=REGION_REPORT_SQL,
        derive=Report(render_region_report),
        concepts=("VALUES table of document targets", "ratio", "fiscal year", "multi-table JOIN"),
        facts=(NET_REVENUE, FISCAL_YEAR, STORE_REGION, *TARGET_ROWS),
        guidelines=REPORT_GUIDELINE,
        ratio=True,
    ),
    Spec(
        question="The Pricing Committee wants a Markdown report on discount discipline in FY2020: by sales "
        "channel, how many orders carried a deep discount, how many broke the channel discount cap and how much "
        "discount those violations gave away, and whether the deep-discount share stayed within policy. "
        + REPORT_SECTIONS,
        qtype=REPORT,
        level="hard",
        sql=DISCOUNT_REPORT_SQL,
        derive=Report(render_discount_report),
        concepts=("CASE thresholds from a document", "conditional SUM", "fiscal year", "rate"),
        facts=(NET_REVENUE, FISCAL_YEAR, DEEP_DISCOUNT, DEEP_SHARE_CEILING, *CAP_ROWS),
        guidelines=REPORT_GUIDELINE,
    ),
    Spec(
        question="Write a Markdown report for Supply Chain on FY2020 fulfillment performance by distribution "
        "center (by name): orders, average delivery time, delivery-SLA and ship-SLA compliance, and which DCs "
        "need a corrective action plan. " + REPORT_SECTIONS,
        qtype=REPORT,
        level="hard",
        sql=FULFILLMENT_REPORT_SQL,
        derive=Report(render_fulfillment_report),
        concepts=("date arithmetic on M/D/YY text", "julianday", "channel-specific limits", "CASE mapping"),
        facts=(FISCAL_YEAR, SHIP_SLA, DELIVERY_LIMITS, DELIVERY_TARGET, *DC_NAMES),
        guidelines=REPORT_GUIDELINE,
        ratio=True,
    ),
    Spec(
        question="Category Management asks for a Markdown report comparing FY2019 and FY2020 by product "
        "category: net revenue, growth and gross margin %, which categories meet the margin floor, and how the "
        "strategic categories are doing. " + REPORT_SECTIONS,
        qtype=REPORT,
        level="medium",
        sql=CATEGORY_REPORT_SQL,
        derive=Report(render_category_report),
        concepts=("CASE mapping from a document", "conditional aggregation by fiscal year", "ratio of sums"),
        facts=(NET_REVENUE, GROSS_MARGIN, FISCAL_YEAR, CATEGORY_FLOOR, STRATEGIC, *CATEGORY_MEMBERS),
        guidelines=REPORT_GUIDELINE,
        ratio=True,
    ),
    Spec(
        question="Key Account Management needs the FY2020 Priority Customer Program review as a Markdown report: "
        "who held Priority status, their net revenue in the qualifying and the status year, the rebate each "
        "earned, and who belongs on the retention watch list. " + REPORT_SECTIONS,
        qtype=REPORT,
        level="hard",
        sql=PRIORITY_REPORT_SQL,
        derive=Report(render_priority_report),
        concepts=("conditional aggregation by fiscal year", "previous-year qualification", "TRIM"),
        facts=(NET_REVENUE, FISCAL_YEAR, PRIORITY, REBATE, WATCH_LIST, TRIMMED_NAMES),
        guidelines=REPORT_GUIDELINE,
    ),
]


def interleaved(*groups: list[Spec]) -> list[Spec]:
    """Round-robin over the question types, so that `--limit N` still samples every type."""
    longest = max(len(group) for group in groups)
    return [group[i] for i in range(longest) for group in groups if i < len(group)]


SPECS: list[Spec] = interleaved(SINGLE_CHOICE, MULTIPLE_CHOICE, FACTOIDS, REPORTS)

# ---------------------------------------------------------------- gold DAG

HARD, SOFT, ALT = EdgeType.HARD_DEP, EdgeType.SOFT_DEP, EdgeType.ALT_GROUP


def documents(spec: Spec) -> list[str]:
    return sorted({fact.doc for fact in spec.facts})


def search_node(spec: Spec) -> DagNode:
    topics = "; ".join(DOC_TOPICS[doc] for doc in documents(spec))
    return DagNode(
        id="search",
        type="search",
        tool="search_documents",
        description=f"Look up {topics} in the company documents ({', '.join(documents(spec))})",
        input={"query": topics},
        critical=any(fact.shapes_query for fact in spec.facts),
    )


def rate_nodes() -> list[DagNode]:
    return [
        DagNode(
            id="rate_sql",
            type="sql",
            tool="execute_sql",
            required=False,
            description="Compute the rate or ratio inside the SQL query",
        ),
        DagNode(
            id="rate_python",
            type="python",
            tool="execute_python",
            required=False,
            description="Or compute the rate or ratio in Python from the totals the SQL returned",
        ),
    ]


def dag_edges(spec: Spec) -> list[DagEdge]:
    edges: list[DagEdge] = []
    if any(fact.shapes_query for fact in spec.facts):  # a document threshold parameterizes the query
        edges.append(DagEdge(source="search", target="sql", type=HARD))
    if any(not fact.shapes_query for fact in spec.facts):  # a document fact is needed only to write the answer
        edges.append(DagEdge(source="search", target="answer", type=SOFT))
    edges += [DagEdge(source="schema", target="sql", type=HARD), DagEdge(source="sql", target="answer", type=HARD)]
    if spec.ratio:
        edges += [
            DagEdge(source="sql", target="rate_sql", type=SOFT),
            DagEdge(source="sql", target="rate_python", type=HARD),  # Python needs the fetched totals
            DagEdge(source="rate_sql", target="rate_python", type=ALT),
            # Soft: either alternative feeds the answer, and FDABench's order rule (SS) zeroes a trace whose
            # HARD predecessor never ran, so a hard edge from an optional alternative would cap one-way
            # solutions at half the TOS.
            DagEdge(source="rate_sql", target="answer", type=SOFT),
            DagEdge(source="rate_python", target="answer", type=SOFT),
        ]
    return edges


def critical_path(nodes: list[DagNode], edges: list[DagEdge]) -> list[str]:
    """The longest chain of HARD_DEP edges through critical nodes: the steps every correct solution
    takes, in this order. Optional alternatives (the rate nodes) are not part of it."""
    critical = [node.id for node in nodes if node.critical]
    preds: dict[str, list[str]] = {node: [] for node in critical}
    for edge in edges:
        if edge.type is HARD and edge.source in preds and edge.target in preds:
            preds[edge.target].append(edge.source)

    def chain(node: str) -> list[str]:
        return [*max((chain(p) for p in preds[node]), key=len, default=[]), node]

    return max((chain(node) for node in critical), key=len)


def build_dag(spec: Spec, expected_result: str) -> GoldDag:
    nodes = [search_node(spec)] if spec.facts else []
    nodes.append(
        DagNode(
            id="schema",
            type="schema",
            tool="get_schema_info",
            critical=True,
            description="Inspect the regional_sales tables, quoted names and column types",
            input={"database": DATABASE},
        )
    )
    nodes.append(
        DagNode(
            id="sql",
            type="sql",
            tool="execute_sql",
            critical=True,
            description="Run the aggregate query over the orders",
            input={"database": DATABASE},
            expected_sql=spec.sql,
            expected_result=expected_result,
        )
    )
    if spec.ratio:
        nodes += rate_nodes()
    nodes.append(
        DagNode(
            id="answer",
            type="answer",
            tool="answer",
            critical=True,
            description="Give the final answer in the requested format",
        )
    )
    edges = dag_edges(spec)
    alt_groups = {"rate": AltGroup(node_ids=["rate_sql", "rate_python"], min_required=1)} if spec.ratio else {}
    return GoldDag(nodes=nodes, edges=edges, critical_path=critical_path(nodes, edges), alt_groups=alt_groups)


# ---------------------------------------------------------------- tasks

DATA_SOURCES = [
    DataSource(
        name=DATABASE,
        kind=DataSourceKind.SQLITE,
        location="data/regional_sales.sqlite",
        description="Larkspur Home Goods order database (BIRD regional_sales): Sales Orders, Customers, Products, "
        "Regions, Sales Team, Store Locations. Column notes: data/database_description/*.csv.",
    ),
    DataSource(
        name="company_docs",
        kind=DataSourceKind.DOCUMENTS,
        location="docs",
        description="Larkspur Home Goods policy documents: metric definitions, fiscal calendar, order classes, "
        "discount policy, targets, quotas, store reviews, customer programs, fulfillment SLAs, categories.",
    ),
]
DEFAULT_GUIDELINES = {SC: SINGLE_GUIDELINE, MC: MULTI_GUIDELINE, REPORT: REPORT_GUIDELINE}


def metadata(spec: Spec) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "database": DATABASE,
        "documents": documents(spec),
        "doc_facts": [{"doc": fact.doc, "text": fact.text} for fact in spec.facts],
        "needs_documents": bool(spec.facts),
        "sql_concepts": list(spec.concepts),
        "option_seed": spec.seed() if spec.qtype in (SC, MC) else None,
    }
    if spec.distractor_sql:
        meta["distractor_sql"] = spec.distractor_sql
    return {key: value for key, value in meta.items() if value is not None}


def derive_gold(spec: Spec, connection: sqlite3.Connection) -> tuple[Result, Derived]:
    """Execute the gold SQL (and distractor query) and derive the answer side from the rows."""
    result = run_sql(connection, spec.sql)
    extra = run_sql(connection, spec.distractor_sql) if spec.distractor_sql else None
    return result, spec.derive.derive(result, random.Random(spec.seed()), extra)


def build_task(number: int, spec: Spec, connection: sqlite3.Connection) -> Task:
    result, derived = derive_gold(spec, connection)
    csv_text = result.to_csv()
    gold = Gold(
        answer=derived.answer,
        report=derived.report,
        sql=spec.sql,
        sql_result=csv_text,
        dag=build_dag(spec, csv_text),
        rubric=derived.rubric,
        explanation=derived.explanation,
    )
    return Task(
        id=f"BND{number:03d}",
        benchmark=BENCHMARK,
        question=spec.question,
        question_type=spec.qtype,
        level=spec.level,
        options=derived.options,
        guidelines=spec.guidelines or DEFAULT_GUIDELINES[spec.qtype],
        data=DATA_SOURCES,
        metadata=metadata(spec),
        gold=gold,
    )


def build_tasks(db_path: Path = DB_PATH) -> list[Task]:
    connection = open_database(db_path)
    try:
        return [build_task(number, spec, connection) for number, spec in enumerate(SPECS, start=1)]
    finally:
        connection.close()


def to_jsonl(tasks: list[Task]) -> str:
    """One task per line, sorted keys; each line is re-validated as a Task before it is accepted."""
    lines = []
    for task in tasks:
        line = json.dumps(task.model_dump(mode="json", exclude_none=True), sort_keys=True, ensure_ascii=False)
        Task.model_validate_json(line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate tasks/bundled/tasks.jsonl from the task specs.")
    parser.add_argument("--check", action="store_true", help="exit 1 if tasks.jsonl is not up to date")
    args = parser.parse_args(argv)
    fresh = to_jsonl(build_tasks())
    if args.check:
        current = OUTPUT.read_text(encoding="utf-8") if OUTPUT.exists() else ""
        if current != fresh:
            print(f"{OUTPUT} is out of date; run: python -m data_agent_compare.tasks.bundled.generate", file=sys.stderr)
            return 1
        print(f"{OUTPUT} is up to date ({len(SPECS)} tasks)")
        return 0
    OUTPUT.write_text(fresh, encoding="utf-8")
    print(f"wrote {len(SPECS)} tasks to {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
