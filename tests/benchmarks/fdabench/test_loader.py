"""The FDABench loader on the published samples (tests/fixtures/fdabench)."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.core.task import DataSourceKind, EdgeType, QuestionType, Task
from data_agent_compare.tasks.fdabench import DB_ROOT_ENV, load_fdabench

from helpers import FIXTURES, by_id, environment, write_jsonl

FDA = FIXTURES / "fdabench"
REGIONAL_SALES = FIXTURES / "regional_sales.sqlite"
FDA_FILES = ("test_singlechoice.jsonl", "test_multichoice.jsonl", "test_report.jsonl")
LITERAL_FIELDS = ("tools_available", "options", "correct_answer", "gold_subtasks")


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FDA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def record(task_id: str) -> dict[str, Any]:
    return next(r for name in FDA_FILES for r in records(name) if r["task_id"] == task_id)


@pytest.fixture(scope="module")
def fda() -> dict[str, Task]:
    return by_id(load_fdabench(FDA, db_root=FDA / "no-databases-here"))


@pytest.fixture
def db_root(tmp_path: Path) -> Path:
    root = tmp_path / "databases"
    (root / "regional_sales").mkdir(parents=True)
    shutil.copy(REGIONAL_SALES, root / "regional_sales" / "regional_sales.sqlite")
    return root


# ---------------------------------------------------------------- FDABench: the samples


def test_folder_loads_the_three_files_in_order(fda):
    assert list(fda) == [
        *("FDA0722", "FDA0902", "FDA1005", "FDA1037", "FDA1108"),
        *("FDA1248", "FDA1249", "FDA1371", "FDA1802", "FDA1898", "FDA1993"),
        *("FDA0010", "FDA0065", "FDA0236", "FDA0582"),
    ]
    assert {t.benchmark for t in fda.values()} == {"fdabench"}
    assert [fda[i].level for i in ("FDA0722", "FDA1037", "FDA1898")] == ["hard", "easy", "medium"]


def test_multiple_choice_task_fields(fda):
    task = fda["FDA1248"]
    assert task.question_type == QuestionType.MULTIPLE_CHOICE
    assert task.question.startswith("Among all the orders made by Aimee Bixby, what was the longest shipment time?")
    assert list(task.options) == list("ABCDEFGH")
    assert task.options["B"].startswith("This scenario demonstrates the strategic value of proprietary customer data")
    assert task.gold.answer == ["B", "C", "E", "H"]
    assert task.metadata["db"] == "superstore"
    assert task.metadata["instance_id"] == "bird141"
    assert task.metadata["database_type"] == "bird"
    assert task.metadata["tools_available"][:3] == ["get_schema_info", "generated_sql", "execute_sql"]
    subtasks = task.metadata["gold_subtasks"]
    assert [s["subtask_id"] for s in subtasks] == [
        "get_schema_info",
        "generated_sql",
        "execute_sql",
        "web_context_search",
        "vectorDB_search",
    ]
    assert subtasks[3]["tool"] == "perplexity_search"
    assert subtasks[1]["expected_SQL"].startswith("SELECT MAX(strftime('%J', `Ship Date`)")
    assert task.gold.sql == subtasks[1]["expected_SQL"]
    assert task.gold.sql_result == "column_1\n5.0\n"  # rows without column names get a generic header


def test_single_choice_gold_is_one_letter_with_explanation(fda):
    task = fda["FDA0722"]
    assert task.question_type == QuestionType.SINGLE_CHOICE
    assert list(task.options) == list("ABCD")
    assert task.gold.answer == "B"
    assert task.gold.explanation.startswith("From the gold result, the next page was")
    assert task.gold.sql_result.startswith("next_page,max_duration ")  # CSV text kept as published


def test_tasks_without_answers_load(fda):
    for task_id in ("FDA1005", "FDA1898"):
        task = fda[task_id]
        assert task.gold.answer is None
        assert task.options
        assert "gold_subtasks" not in task.metadata
    assert fda["FDA1005"].gold.explanation.startswith("Among the six latest region trips")


def test_report_task_fields(fda):
    task = fda["FDA0010"]
    assert task.question_type == QuestionType.REPORT
    assert task.options is None
    assert task.gold.answer is None
    assert task.gold.report.startswith("## Executive Summary The analysis identifies 87 instances")
    assert task.gold.sql == "SELECT name FROM teams WHERE CAST(lost AS REAL) * 100 / games > 75"
    assert task.gold.sql_result.startswith("column_1\nColumbus Athletic Supply\nDayton Metropolitans\n")
    assert task.gold.dag is None and task.gold.rubric is None
    assert fda["FDA0065"].gold.report is None  # published without a reference report


def test_bigquery_tasks_are_unavailable(fda):
    task = fda["FDA0722"]
    assert task.unavailable == "BigQuery/Snowflake database ga360 is not reachable here"
    assert [(s.name, s.kind) for s in task.data] == [("ga360", DataSourceKind.BIGQUERY)]


def test_missing_sqlite_database_is_unavailable(fda):
    root = (FDA / "no-databases-here").absolute()
    assert fda["FDA1248"].unavailable == f"database superstore not found under {root}"
    # Spider2-lite local* ids are SQLite databases too
    assert fda["FDA0065"].unavailable == f"database AdventureWorks not found under {root}"
    assert fda["FDA0065"].data[0].location == str(root / "AdventureWorks" / "AdventureWorks.sqlite")


def test_bird_task_with_its_database_is_available_with_sql_tools(tmp_path, db_root):
    row = record("FDA1248") | {"task_id": "FDA9001", "db": "regional_sales", "instance_id": "bird284"}
    task = load_fdabench(write_jsonl(tmp_path / "tasks" / "test_multichoice.json", [row]), db_root=db_root)[0]
    assert task.unavailable is None
    assert [(s.name, s.kind, s.location) for s in task.data] == [
        ("regional_sales", DataSourceKind.SQLITE, str(db_root / "regional_sales" / "regional_sales.sqlite"))
    ]
    env = environment(task)
    try:
        assert {"get_schema_info", "execute_sql", "execute_python", "answer"} <= set(env.tools)
    finally:
        env.close()


def test_db_root_defaults_to_env_then_databases_folder(tmp_path, db_root, monkeypatch):
    row = record("FDA1248") | {"db": "regional_sales"}
    file = write_jsonl(db_root.parent / "test_multichoice.jsonl", [row])  # db_root is <folder>/databases
    monkeypatch.delenv(DB_ROOT_ENV, raising=False)
    assert load_fdabench(file.parent)[0].unavailable is None
    monkeypatch.setenv(DB_ROOT_ENV, str(tmp_path / "elsewhere"))
    assert load_fdabench(file.parent)[0].unavailable.startswith("database regional_sales not found under")


def test_python_literal_strings_parse_like_json(tmp_path):
    folder = tmp_path / "literal"
    for name in FDA_FILES:
        rows = [{k: repr(v) if k in LITERAL_FIELDS else v for k, v in r.items()} for r in records(name)]
        write_jsonl(folder / name.replace(".jsonl", ".json"), rows)
    assert "\"correct_answer\": \"['B', 'C', 'E', 'H']\"" in (folder / "test_multichoice.json").read_text()
    root = tmp_path / "databases"
    literal = [t.model_dump() for t in load_fdabench(folder, db_root=root)]
    plain = [t.model_dump() for t in load_fdabench(FDA, db_root=root)]
    assert literal == plain
    assert literal[5]["gold"]["answer"] == ["B", "C", "E", "H"]


def test_bare_letter_answers(tmp_path):
    single = record("FDA0722") | {"correct_answer": "b"}
    multiple = record("FDA1248") | {"correct_answer": "B, C;E H"}
    tasks = load_fdabench(write_jsonl(tmp_path / "t.jsonl", [single, multiple]))
    assert [t.gold.answer for t in tasks] == ["B", ["B", "C", "E", "H"]]


def test_dag_rubric_and_frozen_searches_of_the_newer_generator(tmp_path):
    dag = {
        "dag_id": "FDA9002",
        "nodes": {
            "get_schema_info": {"node_id": "get_schema_info", "node_type": "SQL_QUERY", "tool": "get_schema_info"},
            "execute_sql": {"node_type": "SQL_QUERY", "tool": "execute_sql", "expected_result": [["West", 3]]},
            "web_search": {"node_id": "web_search", "tool": "web_search", "is_required": False},
            "vector_search": {"node_id": "vector_search", "tool": "vector_search", "is_required": False},
        },
        "edges": [
            {"source_id": "get_schema_info", "target_id": "execute_sql", "edge_type": "HARD_DEP"},
            {"source_id": "execute_sql", "target_id": "web_search", "edge_type": "soft_dep"},
        ],
        "alt_groups": {"search_group": {"group_id": "search_group", "node_ids": ["web_search", "vector_search"]}},
        "critical_path": ["get_schema_info", "execute_sql"],
    }
    rubric = {
        "task_classification": {"type": "H"},
        "evaluation_dimensions": {
            "SQL_ACCURACY": {"weight": 0.4, "criteria": "States 3 orders", "verification": "exact_match"},
            "COMPLETENESS": {"weight": 0.2, "criteria": ["Covers the region", "Covers the year"]},
        },
        "chain_validation": [{"step": 1, "tool": "web_search", "rationale": "market context"}],
    }
    searches = {"searches": [{"step": 1, "query": "q", "context_summary": "s"}]}
    row = record("FDA0236") | {
        "task_id": "FDA9002",
        "dag": repr(dag),
        "rubric": json.dumps(rubric),  # JSON text in a string: parsed too
        "sql_result": "region,orders\nWest,3\n",
        "frozen_web_search": searches,
        "frozen_vector_search": {"searches": []},
        "db_type": "sqlite",
    }
    task = load_fdabench(write_jsonl(tmp_path / "test_report.jsonl", [row]))[0]
    gold = task.gold
    assert [(n.id, n.type, n.required, n.critical) for n in gold.dag.nodes] == [
        ("get_schema_info", "SQL_QUERY", True, True),
        ("execute_sql", "SQL_QUERY", True, True),
        ("web_search", "tool", False, False),
        ("vector_search", "tool", False, False),
    ]
    assert gold.dag.nodes[1].expected_result == "column_1,column_2\nWest,3\n"
    assert [(e.source, e.target, e.type) for e in gold.dag.edges] == [
        ("get_schema_info", "execute_sql", EdgeType.HARD_DEP),
        ("execute_sql", "web_search", EdgeType.SOFT_DEP),
    ]
    assert gold.dag.alt_groups["search_group"].node_ids == ["web_search", "vector_search"]
    assert gold.dag.critical_path == ["get_schema_info", "execute_sql"]
    assert [(d.name, d.weight, d.criteria) for d in gold.rubric.dimensions] == [
        ("SQL_ACCURACY", 0.4, ["States 3 orders"]),
        ("COMPLETENESS", 0.2, ["Covers the region", "Covers the year"]),
    ]
    assert gold.rubric.chain_validation == ["1. web_search: market context"]
    assert gold.sql_result == "region,orders\nWest,3\n"  # the record's own result wins over the subtasks'
    assert task.metadata["frozen_web_search"] == searches
    assert task.metadata["frozen_vector_search"] == {"searches": []}
    assert task.metadata["db_type"] == "sqlite"


def test_rubric_and_dag_list_forms(tmp_path):
    rubric = {"dimensions": [{"name": "logical_reasoning", "weight": 1, "criteria": "Flows"}]}
    dag = {
        "nodes": [{"id": "a", "tool": "execute_sql"}, {"id": "b", "tool": "answer"}],
        "edges": [{"source": "a", "target": "b"}],
    }
    row = record("FDA0236") | {"rubric": rubric, "dag": dag}
    gold = load_fdabench(write_jsonl(tmp_path / "r.jsonl", [row]))[0].gold
    assert [(d.name, d.weight, d.criteria) for d in gold.rubric.dimensions] == [("LOGICAL_REASONING", 1.0, ["Flows"])]
    assert [(e.source, e.target, e.type) for e in gold.dag.edges] == [("a", "b", EdgeType.HARD_DEP)]
    weights_only = record("FDA0236") | {"rubric": {"evaluation_dimensions": {"COMPLETENESS": 0.5}}}
    gold = load_fdabench(write_jsonl(tmp_path / "w.jsonl", [weights_only]))[0].gold
    assert [(d.name, d.weight, d.criteria) for d in gold.rubric.dimensions] == [("COMPLETENESS", 0.5, [])]


def test_other_database_types(tmp_path):
    rows = [
        record("FDA0236") | {"task_id": "X1", "database_type": "dabstep"},
        record("FDA0236") | {"task_id": "X2", "database_type": "postgres"},
        {k: v for k, v in record("FDA0236").items() if k != "database_type"} | {"task_id": "X3"},
        record("FDA0722") | {"task_id": "X4", "instance_id": "sf_bq011"},
    ]
    tasks = load_fdabench(write_jsonl(tmp_path / "t.jsonl", rows))
    assert tasks[0].unavailable.startswith("FDABench tasks over DABstep files are not wired here")
    assert tasks[1].unavailable == "unknown database_type 'postgres'"
    assert tasks[2].unavailable == "the record names no database_type"
    assert tasks[3].unavailable == "BigQuery/Snowflake database ga360 is not reachable here"
    assert tasks[3].data[0].kind == DataSourceKind.SNOWFLAKE


def test_json_and_jsonl_suffixes(tmp_path):
    shutil.copy(FDA / "test_report.jsonl", tmp_path / "test_report.json")
    assert len(load_fdabench(tmp_path)) == 4
    shutil.copy(FDA / "test_report.jsonl", tmp_path / "test_report.jsonl")
    with pytest.raises(TaskLoadError, match=r"both test_report\.json and test_report\.jsonl exist"):
        load_fdabench(tmp_path)


def test_folder_without_task_files_and_no_path(tmp_path):
    with pytest.raises(TaskLoadError, match="no FDABench task file found"):
        load_fdabench(tmp_path)
    with pytest.raises(TaskLoadError, match="no path given"):
        load_fdabench(None)


# ---------------------------------------------------------------- FDABench: malformed input


def _lines(*rows: dict[str, Any] | str) -> list[dict[str, Any] | str]:
    return [record("FDA0902"), *rows]  # the bad record is always on line 2


MALFORMED = {
    "truncated line": (_lines(json.dumps(record("FDA0722"))[:500]), None, "invalid JSON"),
    "unterminated literal": (_lines(record("FDA0722") | {"correct_answer": "['C'"}), "correct_answer", "literal"),
    "missing query": (_lines({k: v for k, v in record("FDA0722").items() if k != "query"}), "query", "missing"),
    "unknown question type": (_lines(record("FDA0722") | {"question_type": "ranking"}), "question_type", "ranking"),
    "letter not an option": (_lines(record("FDA0722") | {"correct_answer": ["E"]}), "correct_answer.0", "'E'"),
    "two letters, single choice": (_lines(record("FDA0722") | {"correct_answer": ["A", "B"]}), "correct_answer", ""),
    "choice without options": (_lines({k: v for k, v in record("FDA0722").items() if k != "options"}), "options", ""),
    "bad options literal": (_lines(record("FDA0722") | {"options": "{'A': 'x',"}), "options", "literal"),
    "subtask without tool": (
        _lines(record("FDA0722") | {"gold_subtasks": [{"subtask_id": "s"}]}),
        "gold_subtasks.0.tool",
        "required",
    ),
    "unknown dependency": (
        _lines(record("FDA0722") | {"gold_subtasks": [{"tool": "execute_sql", "depends_on": ["nope"]}]}),
        "gold_subtasks.0.depends_on",
        "nope",
    ),
    "depends_on cycle": (
        _lines(
            record("FDA0722")
            | {
                "gold_subtasks": [
                    {"subtask_id": "schema", "tool": "get_schema_info"},
                    {"subtask_id": "a", "tool": "execute_sql", "depends_on": ["schema", "b"]},
                    {"subtask_id": "b", "tool": "execute_python", "depends_on": "c"},
                    {"subtask_id": "c", "tool": "execute_sql", "depends_on": ["a"]},
                ]
            }
        ),
        "gold_subtasks.1.depends_on",
        "cycle (each subtask depends on the next): a → b → c → a",
    ),
    "subtask depending on itself": (
        _lines(record("FDA0722") | {"gold_subtasks": [{"tool": "execute_sql", "depends_on": ["execute_sql"]}]}),
        "gold_subtasks.0.depends_on",
        "execute_sql → execute_sql",
    ),
    "dag cycle": (
        _lines(
            record("FDA0236")
            | {
                "dag": {
                    "nodes": [{"id": "a"}, {"id": "b"}],
                    "edges": [{"source": "a", "target": "b"}, {"source": "b", "target": "a", "type": "SOFT_DEP"}],
                }
            }
        ),
        "dag",
        "cycle in its HARD_DEP/SOFT_DEP edges: a → b → a",
    ),
    "edge to unknown node": (
        _lines(record("FDA0236") | {"dag": {"nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "z"}]}}),
        "dag",
        "unknown node ids",
    ),
    "bad edge type": (
        _lines(
            record("FDA0236")
            | {"dag": {"nodes": [{"id": "a"}], "edges": [{"source": "a", "target": "a", "type": "X"}]}}
        ),
        "dag.edges.0.type",
        "",
    ),
    "bad rubric weight": (
        _lines(record("FDA0236") | {"rubric": {"evaluation_dimensions": {"COMPLETENESS": {"weight": "high"}}}}),
        "rubric.evaluation_dimensions.COMPLETENESS.weight",
        "number",
    ),
    "task id not a string": (_lines(record("FDA0722") | {"task_id": 722}), "task_id", "string"),
    "not an object": (_lines("[1, 2]"), None, "expected a JSON object"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_record_names_file_line_and_field(tmp_path, case):
    rows, field, message = MALFORMED[case]
    file = write_jsonl(tmp_path / "test_singlechoice.jsonl", rows)
    with pytest.raises(TaskLoadError) as raised:
        load_fdabench(tmp_path)
    error = raised.value
    assert (error.file, error.line, error.field) == (str(file), 2, field)
    assert message in error.message
    assert f"{file}:2:" in str(error)


def test_old_sample_data_shape_is_refused():
    with pytest.raises(TaskLoadError) as raised:
        load_fdabench(FDA / "sample_data.json")
    error = raised.value
    assert (error.file, error.line, error.field) == (str(FDA / "sample_data.json"), 1, "query")
    assert "older sample_data.json record shape" in error.message


def test_duplicate_task_id_across_files(tmp_path):
    write_jsonl(tmp_path / "test_singlechoice.jsonl", [record("FDA0722")])
    file = write_jsonl(tmp_path / "test_report.jsonl", [record("FDA0010") | {"task_id": "FDA0722"}])
    with pytest.raises(TaskLoadError, match="duplicate task id 'FDA0722'") as raised:
        load_fdabench(tmp_path)
    assert (raised.value.file, raised.value.line, raised.value.field) == (str(file), 1, "task_id")


def test_2007_tasks_load_in_under_two_seconds(tmp_path):
    """The full release's size, in the published form: every structured field a Python-literal
    string (literal_eval is the slow part, ~0.9 s of the load here)."""
    samples = [r for name in FDA_FILES for r in records(name)]
    rows = [
        {k: repr(v) if k in LITERAL_FIELDS else v for k, v in samples[i % len(samples)].items()}
        | {"task_id": f"S{i:04d}"}
        for i in range(2007)
    ]
    file = write_jsonl(tmp_path / "test_report.jsonl", rows)
    started = time.perf_counter()
    tasks = load_fdabench(file, db_root=tmp_path)
    elapsed = time.perf_counter() - started
    assert len(tasks) == 2007
    assert tasks[len(samples)].gold == tasks[0].gold and tasks[0].gold.answer == "B"  # FDA0722 twice
    assert elapsed < 2.0, f"loading 2,007 tasks took {elapsed:.2f} s"
