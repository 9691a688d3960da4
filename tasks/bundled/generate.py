"""Generate the bundled benchmark: analyst questions over the BIRD `regional_sales` database and
the documents of its fictional owner, Larkspur Home Goods (docs/, company.yaml).

The questions are data (questions.yaml): each has its gold SQL and says how its answer is derived
from the SQL's rows (`gold.py`; report questions by their writer in `report_writers.py`). Every gold
answer is computed here by executing that SQL against data/regional_sales.sqlite; nothing is
hand-typed. Choice options are the real answer plus distractors drawn from other rows of the same
result (or from a stated distractor query), shuffled with a seed derived from the question text, so
adding a task never reshuffles the others.

    python -m data_agent_compare.tasks.bundled.generate          # rewrite tasks.jsonl
    python -m data_agent_compare.tasks.bundled.generate --check  # exit 1 if tasks.jsonl is out of date
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ...core.task import (
    AltGroup,
    DagEdge,
    DagNode,
    DataSource,
    DataSourceKind,
    EdgeType,
    Gold,
    GoldDag,
    QuestionType,
    Task,
)
from .gold import FORMATS, Derived, Factoid, MemberChoice, Report, Result, TopChoice, ValueChoice, run_sql
from .report_writers import REPORT_WRITERS

ROOT = Path(__file__).resolve().parent
DB_PATH = ROOT / "data" / "regional_sales.sqlite"
DOCS_DIR = ROOT / "docs"
QUESTIONS = ROOT / "questions.yaml"
COMPANY = ROOT / "company.yaml"
OUTPUT = ROOT / "tasks.jsonl"
BENCHMARK = "bundled"
DATABASE = "regional_sales"

Level = Literal["easy", "medium", "hard"]
Deriver = TopChoice | ValueChoice | MemberChoice | Factoid | Report

SC = QuestionType.SINGLE_CHOICE
MC = QuestionType.MULTIPLE_CHOICE
REPORT = QuestionType.REPORT
DEFAULT_GUIDELINES = {
    SC: "Choose exactly one option; answer with its letter (e.g. B).",
    MC: "Choose every correct option (two to four are correct); answer with their letters, e.g. A, C, F.",
    REPORT: "Write a Markdown report with exactly these sections: Executive Summary, Data Analysis Results, "
    "External Context & Insights, Key Connections, Conclusions. Quote the figures you computed.",
}


# ---------------------------------------------------------------- the data files


@dataclass(frozen=True)
class DocFact:
    """A fact a task relies on: `text` must appear verbatim in docs/`doc`."""

    doc: str
    text: str
    shapes_query: bool = True  # False: needed to interpret or narrate the result, not to write the SQL


@dataclass(frozen=True)
class Spec:
    """One question of questions.yaml."""

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


def load_specs(path: Path = QUESTIONS) -> list[Spec]:
    return [_spec(item) for item in yaml.safe_load(path.read_text(encoding="utf-8"))]


def _spec(item: dict[str, Any]) -> Spec:
    facts = tuple(DocFact(f["document"], f["text"], f.get("shapes_query", True)) for f in item.get("facts", []))
    return Spec(
        question=item["question"],
        qtype=QuestionType(item["type"]),
        level=item["level"],
        sql=item["sql"],
        derive=_deriver(item["derive"]),
        concepts=tuple(item["concepts"]),
        facts=facts,
        guidelines=item.get("guidelines"),
        ratio=item.get("ratio", False),
        distractor_sql=item.get("distractor_sql"),
    )


def _deriver(derive: dict[str, Any]) -> Deriver:
    """`{KIND: {settings}}` of questions.yaml as its deriver (`gold.py`); `format` names one of `FORMATS`."""
    [(kind, settings)] = derive.items()
    if kind == "report":
        return Report(REPORT_WRITERS[settings])
    settings = dict(settings)
    if "format" in settings:
        settings["fmt"] = FORMATS[settings.pop("format")]
    if kind == "member_choice":
        settings["n_options"] = settings.pop("options")
    kinds: dict[str, type[Deriver]] = {
        "top_choice": TopChoice,
        "value_choice": ValueChoice,
        "member_choice": MemberChoice,
        "factoid": Factoid,
    }
    return kinds[kind](**settings)


def load_company(path: Path = COMPANY) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


SPECS: list[Spec] = load_specs()
_COMPANY = load_company()
CATEGORIES: dict[str, list[str]] = _COMPANY["categories"]
DISTRIBUTION_CENTERS: dict[str, str] = _COMPANY["distribution_centers"]
CHANNEL_CAPS: dict[str, float] = _COMPANY["channel_caps"]
DOC_TOPICS: dict[str, str] = _COMPANY["document_topics"]


def open_database(path: Path = DB_PATH) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


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
