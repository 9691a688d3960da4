"""Load DBGorilla (`synthetic-weaviate-queries-with-schemas.json`) as function-calling `Task`s.

The file is a JSON list of `{database_schema, query}` records (FORMATS.md). Record i becomes task
`dbgorilla-<i>`; a record carrying `index` (our 40-record sample keeps each record's position in
the full file) uses that instead, so sample ids match the full benchmark's. Errors name the
record by its 0-based position in the file being loaded.

Each task offers exactly one tool, `query_database`, built from the record's schema the way the
DBGorilla experiments build it: `collection_name` (an enum of the collection names, the only
required argument), `search_query`, three filter and three aggregation objects and
`groupby_property`. The description lists every collection with its properties, their data types
and descriptions. `property_name` is deliberately a free string, not an enum of the schema's
properties of the matching type: the published gold itself is not type-consistent (in our
sample 6 of 40 gold calls put a boolean or number property in `text_property_filter`), so typed
enums would make those gold calls impossible to express, and the original tool has none either.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..core.benchmark import (
    Benchmark,
    Loading,
    PredictionFieldError,
    ReportLayout,
    ReportMetric,
    ReportTableSpec,
    ScoringRules,
    TaskLoadError,
)
from ..core.safe_load import DocumentTooComplex, load_json
from ..core.task import Answer, Gold, QuestionType, Task, ToolCall
from ..core.tool import Tool, ToolSettings
from ..evaluators.dbgorilla import prediction_from_tool_call, summarize_dbgorilla
from ..tools import offered
from ..tools.function_call import function_call_tools
from .dbgorilla_published import DBGORILLA_RESULTS
from .records import collect, read_json

BENCHMARK = "dbgorilla"
TOOL_NAME = "query_database"
FILTER_OPERATORS = {"integer": ["=", "<", ">", "<=", ">="], "text": ["=", "LIKE"], "boolean": ["=", "!="]}
AGGREGATION_METRICS = {
    "integer": ["COUNT", "TYPE", "MIN", "MAX", "MEAN", "MEDIAN", "MODE", "SUM"],
    "text": ["COUNT", "TYPE", "TOP_OCCURRENCES"],
    "boolean": ["COUNT", "TYPE", "TOTAL_TRUE", "TOTAL_FALSE", "PERCENTAGE_TRUE", "PERCENTAGE_FALSE"],
}
VALUE_TYPES = {"integer": "number", "text": "string", "boolean": "boolean"}  # JSON-schema type of a filter value
KIND_WORDS = {"integer": "numeric", "text": "text", "boolean": "boolean"}  # "integer" filters take any number
STRING_FIELDS = ("search_query", "groupby_property")
OBJECT_FIELDS = tuple(f"{kind}_property_{part}" for part in ("filter", "aggregation") for kind in FILTER_OPERATORS)
ARGUMENT_FIELDS = ("search_query", *OBJECT_FIELDS, "groupby_property")  # the gold call's optional arguments


def load_dbgorilla(path: Path) -> list[Task]:
    """Read the DBGorilla query file `path` (a JSON list of records) as tasks.
    Raises TaskLoadError naming the file, the record's position and the field of a bad record
    (TaskLoadErrors for several)."""
    path = Path(path)
    records = read_json(path)
    if not isinstance(records, list):
        raise TaskLoadError(path, None, None, f"expected a JSON list of records, got {type(records).__name__}")
    specs: dict[str, dict[str, Any]] = {}  # records share database schemas: each read once per file
    _refuse_duplicate_numbers(path, records)
    return collect(enumerate(records), lambda numbered: parse_record(path, *numbered, specs=specs))


def _refuse_duplicate_numbers(path: Path, records: list[Any]) -> None:
    """Two records of one task number (`index`, or the position of a record without one) would be two
    tasks under one id, writing one trace file: refused, naming both records."""
    seen: dict[int, int] = {}
    for position, record in enumerate(records):
        number = record.get("index", position) if isinstance(record, dict) else None
        if not isinstance(number, int) or isinstance(number, bool):
            continue  # parse_record names a bad index
        if number in seen:
            raise TaskLoadError(path, position, "index", f"duplicate task number {number} (also record {seen[number]})")
        seen[number] = position


def parse_record(path: Path, position: int, record: Any, specs: dict[str, dict[str, Any]] | None = None) -> Task:
    """One record as a Task; `position` is its place in the file (the task number unless it has `index`).
    `specs` keeps the `query_database` spec of each database schema (JSON text) already read; the tasks of
    one schema share its spec, which nothing modifies."""
    if not isinstance(record, dict):
        raise TaskLoadError(path, position, None, f"expected a JSON object, got {type(record).__name__}")
    raw = record.get("database_schema")
    spec = specs.get(raw) if specs is not None and isinstance(raw, str) else None
    if spec is None:
        spec = query_database_spec(_schema(path, position, raw))
        if specs is not None:
            specs[raw] = spec
    query = _query(path, position, record.get("query"))
    number = record.get("index", position)
    if not isinstance(number, int) or isinstance(number, bool):
        raise TaskLoadError(path, position, "index", f"expected an integer, got {number!r}")
    arguments = {"collection_name": query["target_collection"]}
    arguments |= {field: query[field] for field in ARGUMENT_FIELDS if query.get(field) is not None}
    return Task(
        id=f"{BENCHMARK}-{number}",
        benchmark=BENCHMARK,
        question=query["corresponding_natural_language_query"],
        question_type=QuestionType.FUNCTION_CALL,
        tools=[TOOL_NAME],  # the benchmark offers this one tool and nothing else
        tool_specs=[spec],
        max_steps=1,
        metadata={"gold_query": query},  # the raw gold for the official AST scorer
        gold=Gold(tool_call=ToolCall(name=TOOL_NAME, arguments=arguments)),
    )


def _schema(path: Path, position: int, raw: Any) -> dict[str, Any]:
    """The record's `database_schema`: a JSON string of {weaviate_collections: [...]}, checked."""
    if not isinstance(raw, str):
        raise TaskLoadError(path, position, "database_schema", f"expected a JSON string, got {type(raw).__name__}")
    try:
        schema = load_json(raw)
    except json.JSONDecodeError as error:
        raise TaskLoadError(path, position, "database_schema", f"invalid JSON: {error.msg}") from error
    except DocumentTooComplex as error:
        raise TaskLoadError(path, position, "database_schema", f"refused: {error}") from None
    collections = schema.get("weaviate_collections") if isinstance(schema, dict) else None
    if not isinstance(collections, list) or not collections:
        raise TaskLoadError(path, position, "database_schema.weaviate_collections", "expected a non-empty list")
    for number, collection in enumerate(collections):
        _check_collection(path, position, f"database_schema.weaviate_collections.{number}", collection)
    return schema


def _check_collection(path: Path, position: int, field: str, collection: Any) -> None:
    if not isinstance(collection, dict) or not isinstance(collection.get("name"), str):
        raise TaskLoadError(path, position, f"{field}.name", "expected a collection with a string name")
    properties = collection.get("properties")
    if not isinstance(properties, list):
        raise TaskLoadError(path, position, f"{field}.properties", "expected a list")
    for number, prop in enumerate(properties):
        where = f"{field}.properties.{number}"
        if not isinstance(prop, dict) or not isinstance(prop.get("name"), str):
            raise TaskLoadError(path, position, f"{where}.name", "expected a property with a string name")
        types = prop.get("data_type")
        if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
            raise TaskLoadError(path, position, f"{where}.data_type", "expected a non-empty list of type names")


def _query(path: Path, position: int, query: Any) -> dict[str, Any]:
    """The record's gold `query`, checked field by field (absent optional parts count as null)."""
    if not isinstance(query, dict):
        raise TaskLoadError(path, position, "query", f"expected a JSON object, got {type(query).__name__}")
    for field in ("corresponding_natural_language_query", "target_collection"):
        if not isinstance(query.get(field), str) or not query[field].strip():
            raise TaskLoadError(path, position, f"query.{field}", "expected a non-empty string")
    for field in OBJECT_FIELDS:
        if query.get(field) is not None and not isinstance(query[field], dict):
            raise TaskLoadError(path, position, f"query.{field}", "expected an object or null")
    for field in STRING_FIELDS:
        if query.get(field) is not None and not isinstance(query[field], str):
            raise TaskLoadError(path, position, f"query.{field}", "expected a string or null")
    return query


def query_database_spec(schema: dict[str, Any]) -> dict[str, Any]:
    """The `query_database` tool spec ({name, description, parameters}) for a parsed
    `{weaviate_collections: [...]}` schema."""
    collections = schema["weaviate_collections"]
    properties: dict[str, Any] = {
        "collection_name": {
            "type": "string",
            "description": "The collection to query.",
            "enum": [collection["name"] for collection in collections],
        },
        "search_query": {"type": "string", "description": "A search query to return objects from a search index."},
    }
    for kind, operators in FILTER_OPERATORS.items():
        properties[f"{kind}_property_filter"] = _filter_parameter(kind, operators)
    for kind, metrics in AGGREGATION_METRICS.items():
        properties[f"{kind}_property_aggregation"] = _aggregation_parameter(kind, metrics)
    properties["groupby_property"] = {"type": "string", "description": "Group the results by a property."}
    return {
        "name": TOOL_NAME,
        "description": "Query a database.\n\nAvailable collections in this database:\n" + describe_collections(schema),
        "parameters": {"type": "object", "properties": properties, "required": ["collection_name"]},
    }


def describe_collections(schema: dict[str, Any]) -> str:
    """Each collection's name and its properties as `- name (type): description` lines."""
    blocks = []
    for collection in schema["weaviate_collections"]:
        lines = [f"Collection Name: {collection['name']}", "Properties:"]
        for prop in collection["properties"]:
            described = f": {prop['description']}" if prop.get("description") else ""
            lines.append(f"- {prop['name']} ({', '.join(prop['data_type'])}){described}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _filter_parameter(kind: str, operators: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"Filter the objects on a {KIND_WORDS[kind]} property.",
        "properties": {
            "property_name": {"type": "string"},
            "operator": {"type": "string", "enum": operators},
            "value": {"type": VALUE_TYPES[kind]},
        },
        "required": ["property_name", "operator", "value"],
    }


def _aggregation_parameter(kind: str, metrics: list[str]) -> dict[str, Any]:
    fields: dict[str, Any] = {"property_name": {"type": "string"}, "metrics": {"type": "string", "enum": metrics}}
    if kind == "text":
        fields["top_occurrences_limit"] = {"type": "integer"}
    return {
        "type": "object",
        "description": f"Aggregate a {KIND_WORDS[kind]} property over the (filtered) objects.",
        "properties": fields,
        "required": ["property_name", "metrics"],
    }


# ---------------------------------------------------------------- the benchmark


AST = ReportMetric("AST", ("ast_score",))
DBGORILLA_TABLES = (
    ReportTableSpec(
        "metrics",
        "DBGorilla metrics (mean [95% CI])",
        (
            ReportMetric("ast_score", ("ast_score",)),
            ReportMetric("exact_match", ("exact_match",)),
            ReportMetric("collection_routing", ("collection_routing",)),
            ReportMetric("no_tool_call", ("no_tool_call",)),
            ReportMetric("{} EM", ("component_exact_match.",)),  # one column per component of the query
        ),
        "Per-component EM is over the queries whose gold has that component; no_tool_call is a rate.",
    ),
    ReportTableSpec(
        "by_argument_count",
        "DBGorilla by number of gold arguments",
        # the first: the family whose judged components count the gold call's arguments
        (
            ReportMetric("gold arguments", ("component_exact_match.",)),
            AST,
            ReportMetric("exact match", ("exact_match",)),
        ),
    ),
)


class DbGorilla(Benchmark):
    """DBGorilla: natural-language queries as one `query_database` call (official AST score)."""

    name = BENCHMARK
    loading = Loading(
        published_formats=(DBGORILLA_RESULTS,),  # weaviate-gorilla's experiment results (dbgorilla_published.py)
        harness={"budgets": {"max_steps": 1}},  # one step, no execution: the first tool call is the prediction
    )
    scoring = ScoringRules(
        scorers=("dbgorilla", "tool_success"),
        run_scorers=("tool_success",),  # measures the run's tool calls, not a prediction made elsewhere
        # The scorer revision behind the published gpt-4o results (evaluators/dbgorilla.py says the difference).
        rules={"ast-2024-11": ("dbgorilla_ast_2024_11", "tool_success")},
        aggregate_rule="the published average_ast_score is the mean AST over each model's predictions",
    )
    layout = ReportLayout(primary_metric=AST, tables=DBGORILLA_TABLES)

    def load(self) -> list[Task]:
        return load_dbgorilla(self.path)

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        return offered(task, function_call_tools(task))

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        """`predicted_query`: the query object in the gold `query` shape, or null for no call."""
        if "predicted_query" not in record:
            raise PredictionFieldError("predicted_query", "missing (use null for no tool call)")
        predicted = record["predicted_query"]
        if predicted is None:
            return Answer(status="no_tool_call")
        if not isinstance(predicted, dict) or not predicted.get("target_collection"):
            raise PredictionFieldError("predicted_query", "expected an object with target_collection, or null")
        arguments = {"collection_name": predicted["target_collection"]}
        arguments |= {
            k: v
            for k, v in predicted.items()
            if v is not None and k not in ("target_collection", "corresponding_natural_language_query")
        }
        return Answer(tool_call=ToolCall(name=TOOL_NAME, arguments=arguments))

    def aggregate(self, scored: Sequence[tuple[Task, Answer]]) -> dict[str, Any]:
        """The paper's aggregates: routing, no-tool-call rate, per component, by argument count."""
        pairs = [
            (prediction_from_tool_call(answer.tool_call), prediction_from_tool_call(task.gold.tool_call))
            for task, answer in scored
            if task.gold is not None
        ]
        return summarize_dbgorilla(pairs)

    def submission_aggregate(self, rows: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> dict[str, Any]:
        """The published per-model figure: the mean AST score of each model's predictions."""
        by_model: dict[str, list[float]] = {}
        for row in rows:
            by_model.setdefault(str(row.get("model") or "predictions"), []).append(float(row.get("ast_score") or 0.0))
        return {f"{model} average_ast_score": sum(v) / len(v) for model, v in sorted(by_model.items())}
