"""Load FDABench (`test_singlechoice`, `test_multichoice`, `test_report`) as `Task`s.

`load_fdabench(path, db_root=...)`: `path` is a folder holding any of the three files, each as
`.json` or `.jsonl` (both are JSON Lines: one task per line), or one such file. Every malformed
record is reported (TaskLoadError, TaskLoadErrors for several) with the file, the 1-based line and
the dotted field path.

Fields, as published (FORMATS.md) and as this loader maps them:
- `tools_available`, `gold_subtasks`, `options`, `correct_answer`, `dag`, `rubric`,
  `frozen_web_search`, `frozen_vector_search` may be real JSON values or Python-literal strings
  (`"['C']"`); strings are parsed with `ast.literal_eval` (JSON text as a fallback for
  `true`/`null`), never `eval`. `correct_answer` may also be bare letters (`"C"`, `"B, C"`).
- `query` → question; `question_type` single_choice / multiple_choice / report (also
  singlechoice, multichoice, multi_choice; case, `-` and spaces ignored); `level` as given.
- `options` → letter → text. `correct_answer` → gold answer: one letter string for single
  choice, a list of letters for multiple choice (the project's convention); absent or empty →
  None. Every letter must be an option.
- `explanation`, `ground_truth_report` → gold; `sql_result` → gold.sql_result (CSV text). Without
  it, gold.sql / gold.sql_result come from the last gold subtask with an `expected_SQL` /
  `expected_result`. Results given as rows (lists) become CSV under a generic header
  (`column_1`, ...), since the rows carry no column names and CSV readers skip the first line.
- `dag` → GoldDag: nodes as a dict {id: node} or a list; node keys node_id|id, node_type|type,
  is_required|required, is_critical_path|critical (or listed in critical_path); edges
  source_id|source, target_id|target, edge_type|type; alt_groups as {id: group} or a list.
- `rubric` → Rubric: `evaluation_dimensions` (or `dimensions`) as {name: {weight, criteria}},
  {name: weight} or [{name, weight, criteria}]; criteria a string or a list of strings;
  `chain_validation` steps ({step, tool, rationale} or strings) become one string each. Other
  rubric keys (task_classification, per-dimension verification) are not kept.
- metadata: instance_id, db, database_type, db_type, tools_available, frozen_web_search,
  frozen_vector_search when present, and `gold_subtasks` (validated list of dicts whose depends_on
  name known subtasks and form no cycle; the DAG scorer reads it from there).

Databases: database_type bird / spider1 / local, and Spider2-lite ids that are not bq*/sf*
(Spider2-lite `local*`), are SQLite files at `<db_root>/<db>/<db>.sqlite`; a missing file makes
the task `unavailable`, as do Spider2-lite bq*/sf* ids (BigQuery/Snowflake), database_type
dabstep (not wired to the DABstep files) and unknown or absent database types. `db_root`
defaults to the env var FDABENCH_DB_ROOT, else `<folder of path>/databases`.
"""

from __future__ import annotations

import ast
import csv
import graphlib
import io
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

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
from ..core.safe_load import load_json
from ..core.task import (
    Answer,
    DataSource,
    DataSourceKind,
    GoldDag,
    QuestionType,
    Rubric,
    Task,
    answer_from_text,
    answer_from_tool,
)
from ..core.tool import Tool, ToolSettings
from ..tools import default_tools
from .fdabench_published import FDABENCH_RESULTS
from .records import collect, json_object, read_lines

BENCHMARK = "fdabench"
FILE_STEMS = ("test_singlechoice", "test_multichoice", "test_report")
SUFFIXES = (".json", ".jsonl")
DB_ROOT_ENV = "FDABENCH_DB_ROOT"
SQLITE_TYPES = {"bird", "spider1", "local"}
SPIDER2 = "spider2-lite"
REMOTE_PREFIXES = {"bq": DataSourceKind.BIGQUERY, "sf": DataSourceKind.SNOWFLAKE}
QUESTION_TYPES = {
    "single_choice": QuestionType.SINGLE_CHOICE,
    "singlechoice": QuestionType.SINGLE_CHOICE,
    "multiple_choice": QuestionType.MULTIPLE_CHOICE,
    "multichoice": QuestionType.MULTIPLE_CHOICE,
    "multi_choice": QuestionType.MULTIPLE_CHOICE,
    "report": QuestionType.REPORT,
}
CHOICE_TYPES = {QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE}
LITERAL_FIELDS = (
    "tools_available",
    "gold_subtasks",
    "options",
    "dag",
    "rubric",
    "frozen_web_search",
    "frozen_vector_search",
)
METADATA_FIELDS = (
    "instance_id",
    "db",
    "database_type",
    "db_type",
    "tools_available",
    "frozen_web_search",
    "frozen_vector_search",
)
OLD_SHAPE_FIELDS = {"question", "external_knowledge", "evidence"}
BARE_LETTERS = re.compile(r"[A-Za-z](\s*[,;\s]\s*[A-Za-z])*")
LETTER = re.compile(r"[A-Z]")

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class _Where:
    """The record being loaded, for error messages."""

    file: Path
    line: int

    def error(self, field: str | None, message: str) -> TaskLoadError:
        return TaskLoadError(self.file, self.line, field, message)


def load_fdabench(path: Path | None, *, db_root: Path | None = None) -> list[Task]:
    """The tasks of the FDABench folder or file `path`; SQLite databases are looked up under
    `db_root` (default: $FDABENCH_DB_ROOT, else `<folder>/databases`). Raises TaskLoadError
    (TaskLoadErrors when several records are bad)."""
    if path is None:
        raise TaskLoadError("fdabench", None, None, "no path given: pass the folder holding test_*.json(l)")
    path = Path(path)
    root = default_db_root(path) if db_root is None else Path(db_root)
    exists = _cached_exists()
    seen: dict[str, _Where] = {}

    def parse(located: tuple[_Where, str]) -> Task:
        where, line = located
        record = json_object(where.file, where.line, line)
        task = _parse_record(where, record, root.absolute(), exists)
        if task.id in seen:
            first = seen[task.id]
            raise where.error("task_id", f"duplicate task id {task.id!r} (first at {first.file}:{first.line})")
        seen[task.id] = where
        return task

    files = _task_files(path)
    tasks = collect([line for file in files for line in _read_lines(file)], parse)
    if not tasks:
        raise TaskLoadError(files[0] if len(files) == 1 else path, None, None, "no tasks: the files are empty")
    return tasks


def default_db_root(path: Path) -> Path:
    env = os.environ.get(DB_ROOT_ENV)
    if env:
        return Path(env)
    return (path if path.is_dir() else path.parent) / "databases"


def _task_files(path: Path) -> list[Path]:
    """The task files of a folder in the order single, multiple, report; or the file itself."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise TaskLoadError(path, None, None, "no such file or folder")
    files: list[Path] = []
    for stem in FILE_STEMS:
        found = [path / f"{stem}{suffix}" for suffix in SUFFIXES if (path / f"{stem}{suffix}").is_file()]
        if len(found) > 1:
            raise TaskLoadError(found[1], None, None, f"both {found[0].name} and {found[1].name} exist: keep one")
        files += found
    if not files:
        names = ", ".join(f"{stem}.json(l)" for stem in FILE_STEMS)
        raise TaskLoadError(path, None, None, f"no FDABench task file found (expected {names})")
    return files


def _read_lines(file: Path) -> list[tuple[_Where, str]]:
    """The non-blank lines of a JSON Lines file with their positions (a TaskLoadError naming the
    byte offset when the file is not UTF-8)."""
    return [(_Where(file, number), line) for number, line in read_lines(file)]


def _parse_record(where: _Where, record: dict[str, Any], db_root: Path, exists: Callable[[Path], bool]) -> Task:
    _refuse_old_shape(where, record)
    record = {
        key: _parse_literal(where, key, value) if key in LITERAL_FIELDS else value for key, value in record.items()
    }
    task_id = _required_text(where, record, "task_id")
    question = _required_text(where, record, "query")
    question_type = _question_type(where, record)
    options = _parse_options(where, record.get("options"))
    if question_type in CHOICE_TYPES and not options:
        raise where.error("options", f"a {question_type} task needs options")
    _check_tools(where, record.get("tools_available"))
    subtasks = _parse_subtasks(where, record.get("gold_subtasks"))
    data, unavailable = _data_sources(where, record, db_root, exists)
    metadata = {key: record[key] for key in METADATA_FIELDS if record.get(key) not in (None, "", [], {})}
    if subtasks:
        metadata["gold_subtasks"] = subtasks
    gold = _gold(where, record, question_type, options, subtasks or [])
    try:
        return Task(
            id=task_id,
            benchmark=BENCHMARK,
            question=question,
            question_type=question_type,
            level=_optional_text(where, record, "level"),
            options=options if question_type in CHOICE_TYPES else None,
            data=data,
            unavailable=unavailable,
            metadata=metadata,
            gold=gold,
        )
    except ValidationError as error:
        raise TaskLoadError.from_validation(where.file, where.line, error) from error


def _refuse_old_shape(where: _Where, record: dict[str, Any]) -> None:
    if "query" not in record and record.keys() >= OLD_SHAPE_FIELDS:
        raise where.error(
            "query",
            "this is the older sample_data.json record shape (question / external_knowledge / evidence, "
            "no answers), not an FDABench task: use test_singlechoice / test_multichoice / test_report",
        )


def _parse_literal(where: _Where, field: str, value: Any) -> Any:
    """A Python-literal string parsed (JSON text as a fallback); any other value as it is."""
    if not isinstance(value, str):
        return value
    if not value.strip():
        return None
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as error:
        try:
            return load_json(value)  # JSON written as a string: true/false/null are no Python literals
        except ValueError:  # not JSON, or nested too deep
            pass
        reason = error.msg if isinstance(error, SyntaxError) else str(error)
        raise where.error(field, f"not a valid Python literal: {reason}") from error


def _required_text(where: _Where, record: dict[str, Any], field: str) -> str:
    value = record.get(field)
    if value is None:
        raise where.error(field, "required field is missing")
    if not isinstance(value, str) or not value.strip():
        raise where.error(field, f"expected a non-empty string, got {value!r}")
    return value.strip() if field == "task_id" else value


def _optional_text(where: _Where, record: dict[str, Any], field: str) -> str | None:
    value = record.get(field)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise where.error(field, f"expected a string, got {type(value).__name__}")
    return value.strip().lower() if field == "level" else value


def _question_type(where: _Where, record: dict[str, Any]) -> QuestionType:
    raw = _required_text(where, record, "question_type")
    key = re.sub(r"[\s-]+", "_", raw.strip().lower())
    if key not in QUESTION_TYPES:
        raise where.error("question_type", f"unknown question type {raw!r} (expected one of {sorted(QUESTION_TYPES)})")
    return QUESTION_TYPES[key]


def _parse_options(where: _Where, raw: Any) -> dict[str, str] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not raw:
        raise where.error("options", f"expected a non-empty mapping letter -> text, got {raw!r:.80}")
    options: dict[str, str] = {}
    for key, text in raw.items():
        letter = str(key).strip().upper()
        if not LETTER.fullmatch(letter):
            raise where.error(f"options.{key}", "an option key must be one letter")
        if not isinstance(text, str | int | float) or isinstance(text, bool):
            raise where.error(f"options.{key}", f"expected the option's text, got {type(text).__name__}")
        options[letter] = str(text)
    return options


def _parse_answer(
    where: _Where, raw: Any, question_type: QuestionType, options: dict[str, str]
) -> str | list[str] | None:
    """Gold letters: one string for single choice, a list for multiple choice; None when absent."""
    if isinstance(raw, str) and BARE_LETTERS.fullmatch(raw.strip()):
        raw = re.findall(r"[A-Za-z]", raw)
    else:
        raw = _parse_literal(where, "correct_answer", raw)
    if raw is None:
        return None
    items = [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple):
        raise where.error("correct_answer", f"expected a list of option letters, got {raw!r:.80}")
    letters = []
    for position, item in enumerate(items):
        letter = item.strip().upper() if isinstance(item, str) else None
        if letter not in options:
            raise where.error(f"correct_answer.{position}", f"{item!r} is not one of the options {sorted(options)}")
        letters.append(letter)
    if not letters:
        return None
    if question_type == QuestionType.SINGLE_CHOICE:
        if len(letters) != 1:
            raise where.error("correct_answer", f"a single-choice task needs exactly one letter, got {letters}")
        return letters[0]
    return letters


def _check_tools(where: _Where, tools: Any) -> None:
    if tools is not None and not (isinstance(tools, list) and all(isinstance(tool, str) for tool in tools)):
        raise where.error("tools_available", f"expected a list of tool names, got {tools!r:.80}")


def _parse_subtasks(where: _Where, raw: Any) -> list[dict[str, Any]] | None:
    """The gold subtasks, checked the way the DAG scorer reads them (id = subtask_id, else tool)."""
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        raise where.error("gold_subtasks", f"expected a list of subtasks, got {type(raw).__name__}")
    ids: list[str] = []
    for position, subtask in enumerate(raw):
        field = f"gold_subtasks.{position}"
        if not isinstance(subtask, dict):
            raise where.error(field, f"expected a mapping, got {type(subtask).__name__}")
        if not isinstance(subtask.get("tool"), str) or not subtask["tool"].strip():
            raise where.error(f"{field}.tool", "required: the tool's name")
        node_id = subtask.get("subtask_id") or subtask["tool"]
        if not isinstance(node_id, str) or node_id in ids:
            raise where.error(f"{field}.subtask_id", f"must be a unique string, got {node_id!r}")
        ids.append(node_id)
    dependencies: dict[str, list[str]] = {}
    for position, subtask in enumerate(raw):
        dependencies[ids[position]] = _dependencies(where, position, subtask)
        unknown = sorted(set(dependencies[ids[position]]) - set(ids))
        if unknown:
            raise where.error(f"gold_subtasks.{position}.depends_on", f"unknown subtask ids {unknown}")
    _refuse_cycle(where, ids, dependencies)
    return raw


def _refuse_cycle(where: _Where, ids: list[str], dependencies: dict[str, list[str]]) -> None:
    """Refuse a depends_on cycle, named from its first subtask: no order of the steps satisfies it."""
    try:
        graphlib.TopologicalSorter(dependencies).prepare()
    except graphlib.CycleError as error:
        cycle = error.args[1][::-1][:-1]  # reversed, each subtask depends on the next; closing repeat dropped
        first = min(range(len(cycle)), key=lambda i: ids.index(cycle[i]))
        path = " → ".join([*cycle[first:], *cycle[:first], cycle[first]])
        field = f"gold_subtasks.{ids.index(cycle[first])}.depends_on"
        raise where.error(field, f"depends_on makes a cycle (each subtask depends on the next): {path}") from None


def _dependencies(where: _Where, position: int, subtask: dict[str, Any]) -> list[str]:
    value = subtask.get("depends_on")
    if value is None or isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list) and all(isinstance(dep, str) for dep in value):
        return value
    raise where.error(f"gold_subtasks.{position}.depends_on", "expected a list of subtask ids")


def _gold(
    where: _Where,
    record: dict[str, Any],
    question_type: QuestionType,
    options: dict[str, str] | None,
    subtasks: list[dict[str, Any]],
) -> dict[str, Any]:
    """The gold fields, validated with the Task so that errors name `gold.<field>`."""
    answer = _parse_answer(where, record.get("correct_answer"), question_type, options) if options else None
    sql = _last_given(subtasks, "expected_SQL", "expected_output")
    result = record.get("sql_result")
    if _empty(result):
        result = _last_given(subtasks, "expected_result")
    return {
        "answer": answer if question_type in CHOICE_TYPES else None,
        "report": _optional_text(where, record, "ground_truth_report"),
        "explanation": _optional_text(where, record, "explanation"),
        "sql": sql,
        "sql_result": _as_csv(result),
        "dag": _parse_dag(where, record.get("dag")),
        "rubric": _parse_rubric(where, record.get("rubric")),
    }


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == []


def _last_given(subtasks: list[dict[str, Any]], *keys: str) -> Any:
    """The value of the last subtask that gives one of `keys` (the final step's SQL or result)."""
    for subtask in reversed(subtasks):
        for key in keys:
            if not _empty(subtask.get(key)):
                return subtask[key]
    return None


def _as_csv(value: Any) -> str | None:
    """A SQL result as CSV text: text as it is; rows (or one value) under a generic header."""
    if value is None or isinstance(value, str):
        return value or None
    rows = (
        [list(row) if isinstance(row, list | tuple) else [row] for row in value]
        if isinstance(value, list)
        else [[value]]
    )
    width = max((len(row) for row in rows), default=1)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([f"column_{i}" for i in range(1, width + 1)])
    writer.writerows(rows)
    return out.getvalue()


def _validated(where: _Where, prefix: str, model: type[M], data: dict[str, Any]) -> M:
    """The model built from `data`; a pydantic error becomes a TaskLoadError at `prefix.<loc>`."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join([prefix, *(str(part) for part in first["loc"])])
        raise where.error(field, first["msg"]) from error


def _mapping_items(where: _Where, field: str, raw: Any, id_keys: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    """(id, item) pairs of a {id: item} mapping or of a list of items carrying their id."""
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = [(_first(item, *id_keys) if isinstance(item, dict) else None, item) for item in raw]
    else:
        raise where.error(field, f"expected a mapping or a list, got {type(raw).__name__}")
    for position, (key, item) in enumerate(pairs):
        label = key if isinstance(raw, dict) else position
        if not isinstance(item, dict):
            raise where.error(f"{field}.{label}", f"expected a mapping, got {type(item).__name__}")
        if key is None:
            raise where.error(f"{field}.{label}", f"needs one of {list(id_keys)}")
    return [(str(key), item) for key, item in pairs]


def _list_of_mappings(where: _Where, field: str, raw: Any) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise where.error(field, "expected a list of mappings")
    return raw


def _first(item: dict[str, Any], *keys: str, default: Any = None) -> Any:
    return next((item[key] for key in keys if item.get(key) is not None), default)


def _parse_dag(where: _Where, raw: Any) -> GoldDag | None:
    """The published DAG (PUDDING field names) or one in this project's field names."""
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise where.error("dag", f"expected a mapping, got {type(raw).__name__}")
    critical_path = raw.get("critical_path") or []
    if not isinstance(critical_path, list):
        raise where.error("dag.critical_path", "expected a list of node ids")
    nodes = [
        _dag_node(key, node, critical_path)
        for key, node in _mapping_items(where, "dag.nodes", raw.get("nodes") or [], ("node_id", "id"))
    ]
    if not nodes:
        return None
    edges = [
        {
            "source": _first(edge, "source_id", "source"),
            "target": _first(edge, "target_id", "target"),
            "type": str(_first(edge, "edge_type", "type", default="HARD_DEP")).upper(),
        }
        for edge in _list_of_mappings(where, "dag.edges", raw.get("edges") or [])
    ]
    groups = {
        key: {"node_ids": group.get("node_ids") or [], "min_required": group.get("min_required", 1)}
        for key, group in _mapping_items(where, "dag.alt_groups", raw.get("alt_groups") or {}, ("group_id", "id"))
    }
    data = {"nodes": nodes, "edges": edges, "critical_path": critical_path, "alt_groups": groups}
    return _validated(where, "dag", GoldDag, data)


def _dag_node(key: str, node: dict[str, Any], critical_path: list[str]) -> dict[str, Any]:
    node_id = _first(node, "node_id", "id", default=key)
    return {
        "id": node_id,
        "type": _first(node, "node_type", "type", default="tool"),
        "tool": node.get("tool"),
        "description": node.get("description") or "",
        "required": _first(node, "is_required", "required", default=True),
        "critical": _first(node, "is_critical_path", "critical", default=False) or node_id in critical_path,
        "input": node.get("input"),
        "expected_sql": _first(node, "expected_sql", "expected_SQL"),
        "expected_result": _as_csv(node.get("expected_result")),
    }


def _parse_rubric(where: _Where, raw: Any) -> Rubric | None:
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise where.error("rubric", f"expected a mapping, got {type(raw).__name__}")
    key = "evaluation_dimensions" if "evaluation_dimensions" in raw else "dimensions"
    field = f"rubric.{key}"
    dimensions = [
        {
            "name": name.upper(),
            "weight": _weight(where, f"{field}.{name}.weight", spec.get("weight", 0.25)),
            "criteria": _criteria(where, f"{field}.{name}.criteria", spec.get("criteria")),
        }
        for name, spec in _mapping_items(where, field, _weights_as_specs(raw.get(key) or {}), ("name", "dimension"))
    ]
    if not dimensions:
        return None
    chain = raw.get("chain_validation") or []
    if not isinstance(chain, list):
        raise where.error("rubric.chain_validation", f"expected a list of steps, got {type(chain).__name__}")
    data = {"dimensions": dimensions, "chain_validation": [_chain_step(step) for step in chain]}
    return _validated(where, "rubric", Rubric, data)


def _weight(where: _Where, field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise where.error(field, f"expected a non-negative number, got {value!r}")
    return float(value)


def _weights_as_specs(dimensions: Any) -> Any:
    """{name: weight} is read as {name: {weight}}."""
    if isinstance(dimensions, dict):
        return {
            name: {"weight": spec} if isinstance(spec, int | float) and not isinstance(spec, bool) else spec
            for name, spec in dimensions.items()
        }
    return dimensions


def _criteria(where: _Where, field: str, raw: Any) -> list[str]:
    if raw is None or raw == "":
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
        return raw
    raise where.error(field, f"expected a string or a list of strings, got {raw!r:.80}")


def _chain_step(step: Any) -> str:
    if isinstance(step, dict) and {"tool", "rationale"} <= step.keys():
        number = f"{step['step']}. " if "step" in step else ""
        return f"{number}{step['tool']}: {step['rationale']}"
    return step if isinstance(step, str) else json.dumps(step, ensure_ascii=False)


def _data_sources(
    where: _Where, record: dict[str, Any], db_root: Path, exists: Callable[[Path], bool]
) -> tuple[list[DataSource], str | None]:
    """The task's database and, when it cannot be reached here, why."""
    database_type = _optional_text(where, record, "database_type")
    kind = (database_type or "").strip().lower()
    if not kind:
        return [], "the record names no database_type"
    if kind == "dabstep":
        return [], "FDABench tasks over DABstep files are not wired here (load DABstep itself with load_dabstep)"
    if kind not in SQLITE_TYPES and kind != SPIDER2:
        return [], f"unknown database_type {database_type!r}"
    db = _required_text(where, record, "db").strip()
    instance_id = str(record.get("instance_id") or "")
    remote = next((k for prefix, k in REMOTE_PREFIXES.items() if instance_id.startswith(prefix)), None)
    if kind == SPIDER2 and remote:
        return [DataSource(name=db, kind=remote)], f"BigQuery/Snowflake database {db} is not reachable here"
    file = db_root / db / f"{db}.sqlite"
    source = DataSource(name=db, kind=DataSourceKind.SQLITE, location=str(file))
    return [source], None if exists(file) else f"database {db} not found under {db_root}"


def _cached_exists() -> Callable[[Path], bool]:
    """Path.is_file, asked once per database: thousands of tasks share a few hundred databases."""
    known: dict[Path, bool] = {}

    def exists(file: Path) -> bool:
        if file not in known:
            known[file] = file.is_file()
        return known[file]

    return exists


# ---------------------------------------------------------------- the benchmark


FDABENCH_SUMMARY_METRICS = (
    ReportMetric("EX single", ("exact_match",), "single_choice"),
    ReportMetric("EX multi", ("exact_match",), "multiple_choice"),
    ReportMetric("TOS", ("tos",)),
    ReportMetric("RS", ("rs",)),
    ReportMetric("ROUGE-L", ("rougeL_f",)),
)
DIFFICULTY_METRICS = (
    ReportMetric("RS", ("rs",)),
    ReportMetric("TOS", ("tos",)),
    ReportMetric("tool coverage", ("coverage",)),  # beside TOS: the required steps done (evaluators/dag.py)
    ReportMetric("EX_SC", ("exact_match",), "single_choice"),
    ReportMetric("EX_MC", ("exact_match",), "multiple_choice"),
    ReportMetric("EX", ("exact_match", "correct")),
    ReportMetric("SR", ("sr",)),
)
DIFFICULTY_NOTE = "EX_SC / EX_MC: exact match on single- / multiple-choice tasks; external calls: model calls per task."


def fdabench_tables(paper: str = "") -> tuple[ReportTableSpec, ...]:
    """The report tables of FDABench's kind of tasks; `paper` names the paper's tables in the titles."""
    cite = (lambda tables: f" ({paper} {tables})") if paper else (lambda tables: "")
    return (
        ReportTableSpec("by_difficulty", "By difficulty" + cite("Tables 3–5"), DIFFICULTY_METRICS, DIFFICULTY_NOTE),
        ReportTableSpec("model_by_workflow", "Accuracy per model × workflow" + cite("Table 6")),
        ReportTableSpec("workflow_by_difficulty", "Accuracy per workflow × difficulty" + cite("Table 7")),
    )


FDABENCH_TABLES = fdabench_tables("FDABench")


class FdaBench(Benchmark):
    """FDABench: single-choice, multiple-choice and report tasks over BIRD/Spider SQLite and documents."""

    name = BENCHMARK
    loading = Loading(published_formats=(FDABENCH_RESULTS,))  # the reference harness's rows (fdabench_published.py)
    scoring = ScoringRules(
        scorers=("exact_match", "rouge", "rubric", "tool_dag", "tool_success"),
        run_scorers=("tool_success",),  # SR measures the run's tool calls, not a prediction made elsewhere
    )
    layout = ReportLayout(summary_metrics=FDABENCH_SUMMARY_METRICS, tables=FDABENCH_TABLES)

    def load(self) -> list[Task]:
        return load_fdabench(self.path)

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        return default_tools(task, settings)

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        return fdabench_prediction(task, record)


def fdabench_prediction(task: Task, record: dict[str, Any]) -> Answer:
    """An FDABench submission record: `selected_answer` (letters as a list, "A", "A, C" or
    "['A', 'C']") for choice tasks, `generated_report` for reports; `answer` is read as either."""
    if task.question_type == QuestionType.REPORT:
        report = record.get("generated_report", record.get("answer"))
        if not isinstance(report, str):
            raise PredictionFieldError("generated_report", "missing or not a string")
        return answer_from_text(task, report)
    if "selected_answer" not in record and "answer" not in record:
        raise PredictionFieldError("selected_answer", "missing")
    value = record.get("selected_answer", record.get("answer"))
    if task.question_type in CHOICE_TYPES:
        return answer_from_tool(task, {"answer": _letters(value)})
    return answer_from_text(task, str(value))


def _letters(value: Any) -> list[str]:
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise PredictionFieldError("selected_answer", f"unreadable list literal {value!r}") from None
    if isinstance(value, str):
        value = value.replace(";", ",").split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PredictionFieldError("selected_answer", "expected letters as a list or a string")
    return [v.strip() for v in value if v.strip()]
