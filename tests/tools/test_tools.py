"""The tool environment over real data: read-only SQL, file sandboxing, the Python sandbox, search."""

from __future__ import annotations

import hashlib
import shutil
import time
from pathlib import Path

import duckdb
import pytest

from data_agent_compare.core import ToolEnvironment, ToolError, ToolSettings
from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.core.trace import Budgets, ToolCallStep, Trace, TraceRecorder
from data_agent_compare.tools import DEFAULT_TOOL_NAMES, default_tools
from data_agent_compare.tools.answer import answer_schema
from data_agent_compare.tools.documents import DocumentSearchTool
from data_agent_compare.tools.files import ListFilesTool, ReadFileTool
from data_agent_compare.tools.python_sandbox import PythonTool
from data_agent_compare.tools.sql import Databases, SchemaTool, SqlTool

from helpers import FIXTURES, recorder


def build_environment(task: Task, recorder: TraceRecorder, settings: ToolSettings) -> ToolEnvironment:
    return ToolEnvironment(default_tools(task, settings), recorder)


FIXTURE_DB = FIXTURES / "regional_sales.sqlite"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def make_task(data: list[DataSource], **fields: object) -> Task:
    return Task(id="t", benchmark="test", question="?", question_type=QuestionType.FACTOID, data=data, **fields)


def sql_tools(sources: list[DataSource], **settings: object) -> tuple[SchemaTool, SqlTool]:
    tool_settings = ToolSettings(**settings)
    databases = Databases(sources, tool_settings)
    return SchemaTool(databases, tool_settings), SqlTool(databases, tool_settings)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    path = tmp_path / "db" / "regional_sales.sqlite"
    path.parent.mkdir()
    shutil.copy(FIXTURE_DB, path)
    return path


@pytest.fixture
def sqlite_sql(sqlite_path: Path) -> SqlTool:
    _, sql = sql_tools([DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite_path))])
    return sql


@pytest.fixture
def duckdb_path(tmp_path: Path) -> Path:
    path = tmp_path / "shop.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute('CREATE TABLE "Sales Orders" (id INTEGER, amount DECIMAL(10, 2), region VARCHAR)')
        con.execute("""INSERT INTO "Sales Orders" SELECT i, i * 1.5, 'r' || (i % 3) FROM range(500) t(i)""")
        con.execute("CREATE TABLE x (a INTEGER)")
    return path


@pytest.fixture
def duckdb_sql(duckdb_path: Path) -> SqlTool:
    _, sql = sql_tools([DataSource(name="shop", kind=DataSourceKind.DUCKDB, location=str(duckdb_path))])
    return sql


# ---------------------------------------------------------------- read-only SQL

SQLITE_WRITES = [
    "INSERT INTO Customers VALUES (999, 'Evil Corp')",
    "UPDATE Customers SET \"Customer Names\" = 'x'",
    "DELETE FROM Customers",
    "CREATE TABLE x (a INTEGER)",
    "CREATE TEMP TABLE x (a INTEGER)",
    "DROP TABLE Customers",
    "ALTER TABLE Customers ADD COLUMN z TEXT",
    "ATTACH DATABASE ':memory:' AS other",
    "DETACH DATABASE main",
    "PRAGMA journal_mode=DELETE",
    "PRAGMA user_version=5",
    "PRAGMA query_only=OFF",
    "VACUUM",
    "REPLACE INTO Customers VALUES (1, 'x')",
    "BEGIN",
    "SELECT 1; DROP TABLE x",
]


@pytest.mark.parametrize("sql", SQLITE_WRITES)
def test_sqlite_refuses_every_write(sqlite_sql: SqlTool, sqlite_path: Path, sql: str) -> None:
    before = sha256(sqlite_path)
    with pytest.raises(ToolError, match="refused"):
        sqlite_sql.run({"sql": sql})
    sqlite_sql.close()
    assert sha256(sqlite_path) == before
    assert [p.name for p in sqlite_path.parent.iterdir()] == [sqlite_path.name]  # no journal or WAL files


DUCKDB_WRITES = [
    "INSERT INTO x VALUES (1)",
    "UPDATE x SET a = 2",
    "DELETE FROM x",
    "CREATE TABLE y (a INTEGER)",
    "CREATE TEMP TABLE y (a INTEGER)",  # DuckDB's read_only mode alone would allow this one
    "DROP TABLE x",
    "ALTER TABLE x ADD COLUMN b INTEGER",
    "COPY x TO 'out.csv'",
    "EXPORT DATABASE 'exported'",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET threads = 1",
    "PRAGMA threads = 1",
    "ATTACH ':memory:' AS other",
    "DETACH shop",
    "CHECKPOINT",
    "SELECT 1; DROP TABLE x",
]


@pytest.mark.parametrize("sql", DUCKDB_WRITES)
def test_duckdb_refuses_every_write(duckdb_sql: SqlTool, duckdb_path: Path, sql: str) -> None:
    before = sha256(duckdb_path)
    with pytest.raises(ToolError, match="refused"):
        duckdb_sql.run({"sql": sql})
    duckdb_sql.close()
    assert sha256(duckdb_path) == before


def test_duckdb_cannot_read_outside_files(duckdb_sql: SqlTool) -> None:
    with pytest.raises(ToolError, match="disabled by configuration"):
        duckdb_sql.run({"sql": "SELECT * FROM read_csv('/etc/passwd')"})


def test_identifiers_with_spaces(sqlite_sql: SqlTool, duckdb_sql: SqlTool) -> None:
    result = sqlite_sql.run({"sql": 'SELECT COUNT(*) FROM "Sales Orders"'})
    assert result.success and result.data == {"columns": ["COUNT(*)"], "rows": [[7991]]}
    assert "7991" in result.content
    duck = duckdb_sql.run({"sql": 'SELECT SUM(amount) AS total FROM "Sales Orders"'})
    assert duck.data == {"columns": ["total"], "rows": [[187125.0]]}  # DECIMAL arrives as a float


def test_row_cap_sets_truncated(sqlite_sql: SqlTool) -> None:
    _, sql = sql_tools([DataSource(name="s", kind=DataSourceKind.SQLITE, location=str(FIXTURE_DB))], sql_max_rows=10)
    result = sql.run({"sql": 'SELECT OrderNumber FROM "Sales Orders"'})
    assert result.truncated and len(result.data["rows"]) == 10
    assert "more rows exist" in result.content
    complete = sql.run({"sql": "SELECT * FROM Customers LIMIT 10"})
    assert not complete.truncated and len(complete.data["rows"]) == 10


def test_byte_cap_sets_truncated(duckdb_path: Path) -> None:
    source = DataSource(name="shop", kind=DataSourceKind.DUCKDB, location=str(duckdb_path))
    _, sql = sql_tools([source], sql_max_bytes=300)
    result = sql.run({"sql": 'SELECT * FROM "Sales Orders" LIMIT 100'})
    assert result.truncated and 0 < len(result.data["rows"]) < 100
    assert len(result.content.split("\n[truncated")[0].encode()) <= 300
    assert "truncated" in result.content


RUNAWAY = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT COUNT(*) FROM r"


@pytest.mark.parametrize("kind", [DataSourceKind.SQLITE, DataSourceKind.DUCKDB])
def test_runaway_query_times_out(kind: DataSourceKind, sqlite_path: Path, duckdb_path: Path) -> None:
    location = sqlite_path if kind == DataSourceKind.SQLITE else duckdb_path
    _, sql = sql_tools([DataSource(name="db", kind=kind, location=str(location))], sql_timeout_s=1)
    start = time.perf_counter()
    with pytest.raises(ToolError, match="timeout"):
        sql.run({"sql": RUNAWAY})
    assert time.perf_counter() - start < 4
    assert sql.run({"sql": "SELECT 42"}).data["rows"] == [[42]]  # the connection is still usable


def test_schema_info_quotes_identifiers(sqlite_path: Path) -> None:
    schema, _ = sql_tools([DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite_path))])
    result = schema.run({})
    assert 'table "Sales Orders" — 7991 rows' in result.content
    assert '"Customer Names" TEXT' in result.content and "CustomerID INTEGER" in result.content
    tables = {t["name"]: t for t in result.data["sales"]["tables"]}
    assert set(tables) == {"Customers", "Products", "Regions", '"Sales Orders"', '"Sales Team"', '"Store Locations"'}
    assert len(tables['"Sales Orders"']["sample_rows"]) == 2
    one = schema.run({"table": "Sales Orders"})
    assert [t["name"] for t in one.data["sales"]["tables"]] == ['"Sales Orders"']
    with pytest.raises(ToolError, match="no table"):
        schema.run({"table": "Nope"})


def test_several_databases_need_a_name(sqlite_path: Path, duckdb_path: Path) -> None:
    sources = [
        DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite_path)),
        DataSource(name="shop", kind=DataSourceKind.DUCKDB, location=str(duckdb_path)),
    ]
    schema, sql = sql_tools(sources)
    assert sql.parameters["required"] == ["sql", "database"]
    assert sql.parameters["properties"]["database"]["enum"] == ["sales", "shop"]
    assert sql.run({"sql": "SELECT COUNT(*) FROM x", "database": "shop"}).data["rows"] == [[0]]
    with pytest.raises(ToolError, match="several databases"):
        sql.run({"sql": "SELECT 1"})
    assert set(schema.run({}).data) == {"sales", "shop"}
    assert 'table "Sales Orders" — 500 rows' in schema.run({"database": "shop"}).content


# ---------------------------------------------------------------- files


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("hello data\n")
    (root / "sub" / "big.csv").write_text("a,b\n" + "1,2\n" * 1000)
    (tmp_path / "secret.txt").write_text("top secret")
    (root / "escape.txt").symlink_to(tmp_path / "secret.txt")
    (root / "inside.txt").symlink_to(root / "notes.txt")
    return root


def test_list_and_read_files(data_dir: Path) -> None:
    listing = ListFilesTool(data_dir).run({})
    lines = ["sub/", "inside.txt (11 bytes)", "notes.txt (11 bytes)", "sub/big.csv (4004 bytes)"]
    assert listing.content.splitlines() == lines  # escape.txt points outside: not listed
    reader = ReadFileTool(data_dir, ToolSettings())
    assert reader.run({"path": "notes.txt"}).content == "hello data\n"
    assert reader.run({"path": "inside.txt"}).content == "hello data\n"
    assert reader.run({"path": str(data_dir / "notes.txt")}).content == "hello data\n"


def test_read_file_caps_bytes(data_dir: Path) -> None:
    reader = ReadFileTool(data_dir, ToolSettings(file_max_bytes=100))
    first = reader.run({"path": "sub/big.csv"})
    assert first.truncated and "offset=100" in first.content and first.data["size"] == 4004
    rest = reader.run({"path": "sub/big.csv", "offset": 4000})
    assert not rest.truncated and rest.content == "1,2\n"


@pytest.mark.parametrize("path", ["../secret.txt", "sub/../../secret.txt", "/etc/passwd", "escape.txt"])
def test_paths_outside_the_data_folder_are_refused(data_dir: Path, path: str) -> None:
    with pytest.raises(ToolError, match="outside the data folder"):
        ReadFileTool(data_dir, ToolSettings()).run({"path": path})
    with pytest.raises(ToolError, match="outside the data folder"):
        ListFilesTool(data_dir).run({"path": path})


# ---------------------------------------------------------------- python sandbox


def run_python(code: str, **settings: object) -> tuple[bool, str]:
    result = PythonTool(ToolSettings(**settings)).run({"code": code})
    return result.success, result.content


# os.fork is allowed in the sandbox (its process limit binds: tests/tools/test_sandbox.py)
START_PROGRAM = [
    "import subprocess\nsubprocess.run(['echo', 'spawned'])",
    "import os\nos.system('echo spawned')",
    "import os\nos.execv('/bin/echo', ['echo', 'spawned'])",
]


def test_python_prints_output() -> None:
    assert run_python("print(6 * 7)") == (True, "42\n\n[exit status 0]")


def test_python_reports_exceptions() -> None:
    ok, content = run_python("x = 1\n1 / x\n1 / 0")
    assert not ok
    assert 'File "main.py", line 3' in content and "ZeroDivisionError: division by zero" in content


def test_python_times_out_an_infinite_loop() -> None:
    start = time.perf_counter()
    ok, content = run_python("print('started', flush=True)\nwhile True:\n    pass", python_timeout_s=1)
    assert not ok and "timed out after 1s" in content and "started" in content
    assert time.perf_counter() - start < 5


def test_python_has_no_network() -> None:
    ok, content = run_python("import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)")
    assert not ok and "socket.__new__ is not allowed" in content
    ok, content = run_python("import urllib.request\nurllib.request.urlopen('http://example.com', timeout=2)")
    assert not ok and "not allowed" in content


@pytest.mark.parametrize("code", START_PROGRAM)
def test_python_cannot_start_programs(code: str) -> None:
    result = PythonTool(ToolSettings()).run({"code": code})
    assert not result.success and "is not allowed" in result.content
    assert result.data["stdout"] == ""


def test_python_memory_cap_stops_a_huge_allocation() -> None:
    ok, content = run_python("block = bytearray(2 << 30)\nprint('allocated')", python_memory_mb=512)
    assert not ok and "MemoryError" in content and "allocated\n" not in content


def test_python_sees_no_parent_secrets(monkeypatch: pytest.MonkeyPatch, data_dir: Path) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-secret")
    code = "import os\nprint(sorted(os.environ))\nprint(open(os.path.join(os.environ['DATA_DIR'], 'notes.txt')).read())"
    result = PythonTool(ToolSettings(), data_dir).run({"code": code})
    assert result.success and "sk-or-secret" not in result.content
    assert "['DATA_DIR', 'HOME', 'LANG', 'PATH']" in result.content and "hello data" in result.content


# ---------------------------------------------------------------- document search


def test_document_search_ranks_and_caches(tmp_path: Path) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "policies.md").write_text(
        "# Policies\n\n## Refunds\n\nCustomers may return a product within 30 days of delivery "
        "and get their money back.\n\n## Office hours\n\nThe office opens at 9am on weekdays.\n"
    )
    (corpus / "shipping.txt").write_text("Parcels ship with three carriers. Express delivery takes one day.\n")
    source = DataSource(name="docs", kind=DataSourceKind.DOCUMENTS, location=str(corpus))
    settings = ToolSettings(cache_dir=str(tmp_path / "cache"))
    first = DocumentSearchTool([source], settings)
    assert not first.loaded_from_cache
    result = first.run({"query": "How many days do I have to return an item for a refund?", "top_k": 2})
    best = result.data[0]
    assert (best["source"], best["heading"]) == ("policies.md", "Policies > Refunds")
    assert "30 days" in result.content.split("\n\n2.")[0]
    second = DocumentSearchTool([source], settings)
    assert second.loaded_from_cache  # same corpus: nothing embedded again
    assert second.run({"query": "refund within 30 days"}).data[0]["text"] == best["text"]
    (corpus / "shipping.txt").write_text("Changed.\n")
    assert not DocumentSearchTool([source], settings).loaded_from_cache


# ---------------------------------------------------------------- answer and environment


def test_answer_schema_follows_the_question_type() -> None:
    options = {"A": "yes", "B": "no", "C": "maybe"}
    single = Task(id="1", benchmark="b", question="?", question_type=QuestionType.SINGLE_CHOICE, options=options)
    multi = single.model_copy(update={"question_type": QuestionType.MULTIPLE_CHOICE})
    assert answer_schema(single)["properties"]["answer"] == {"type": "string", "enum": ["A", "B", "C"]}
    items = answer_schema(multi)["properties"]["answer"]
    assert items["type"] == "array" and items["items"]["enum"] == ["A", "B", "C"] and items["minItems"] == 1
    assert answer_schema(make_task([]))["properties"]["answer"] == {"type": "string"}
    assert all(answer_schema(t)["required"] == ["answer"] for t in (single, multi, make_task([])))


def test_environment_picks_tools_from_the_data(sqlite_path: Path, data_dir: Path) -> None:
    source = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite_path))
    env = build_environment(make_task([source], data_dir=data_dir), recorder(), ToolSettings())
    assert list(env.tools) == [n for n in DEFAULT_TOOL_NAMES if n != "search_documents"]
    only_sql = build_environment(make_task([source], tools=["execute_sql"]), recorder(), ToolSettings())
    assert list(only_sql.tools) == ["execute_sql", "answer"]
    plain = build_environment(make_task([]), recorder(), ToolSettings())
    assert list(plain.tools) == ["execute_python", "answer"]


def test_environment_refuses_unsupported_sources() -> None:
    source = DataSource(name="warehouse", kind=DataSourceKind.BIGQUERY, location="bq://project")
    with pytest.raises(ToolError, match="'warehouse' \\(bigquery\\)"):
        build_environment(make_task([source]), recorder(), ToolSettings())


def test_environment_call_records_a_tool_call_step(sqlite_path: Path) -> None:
    source = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite_path))
    trace_recorder = recorder()
    env: ToolEnvironment = build_environment(make_task([source]), trace_recorder, ToolSettings())
    assert env.call("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"}).success
    refused = env.call("execute_sql", {"sql": "DROP TABLE Customers"})
    assert not refused.success and "refused DROP" in (refused.error or "")
    steps = trace_recorder.trace.steps
    assert all(isinstance(s, ToolCallStep) for s in steps)
    assert [(s.tool, s.success, s.arguments) for s in steps] == [
        ("execute_sql", True, {"sql": "SELECT COUNT(*) FROM Customers"}),
        ("execute_sql", False, {"sql": "DROP TABLE Customers"}),
    ]
    assert steps[0].duration_s > 0 and "50" in steps[0].result_summary
    env.close()


def test_frozen_searches_recorded_with_a_task_are_replayed_whatever_the_query():
    from data_agent_compare.core.task import Task
    from data_agent_compare.core.trace import TraceRecorder

    recorded = [{"title": "Census 2020", "url": "https://example.org/c", "snippet": "Population grew 7.4%."}]
    task = Task(
        id="FDA1",
        benchmark="fdabench",
        question="q",
        question_type="report",
        metadata={"frozen_web_search": recorded, "frozen_vector_search": "Vector passage: margin 31%."},
    )
    recorder = TraceRecorder(Trace(task_id="FDA1", system="s", model="m"), Budgets())
    env = build_environment(task, recorder, ToolSettings())
    assert {"web_search", "search_documents"} <= set(env.tools)
    first = env.call("web_search", {"query": "population growth"})
    second = env.call("web_search", {"query": "anything else"})
    assert first.content == second.content and "Population grew 7.4%" in first.content
    assert "margin 31%" in env.call("search_documents", {"query": "margin"}).content
    assert [s.tool for s in recorder.trace.tool_calls] == ["web_search", "web_search", "search_documents"]
