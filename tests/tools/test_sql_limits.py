"""SQL cannot reach or bloat the runner: SQLite's pointer functions are denied, and queries that
build values of hundreds of MB (SQLite, DuckDB, PostgreSQL) are refused or bounded, so the
process running the tools stays within 250 MiB of the same queries without them."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

from data_agent_compare.core.task import DataSource, DataSourceKind
from data_agent_compare.tools import ToolError, ToolSettings
from data_agent_compare.tools.postgres import PostgresCluster
from data_agent_compare.tools.sql import Databases, SqlTool

from helpers import postgres_bin_dir_or_skip

ORDINARY = [
    ("lite", "SELECT count(*) AS n, sum(a) AS total FROM t"),
    ("duck", "SELECT count(*) AS n, sum(a) AS total FROM t"),
    ("duck", "SELECT count(*) AS n FROM range(1000)"),  # as a table function range() streams
    ("pg", "SELECT count(*) AS n FROM generate_series(1, 1000)"),
]
BOMBS = [
    ("lite", "SELECT length(zeroblob(900000000)), length(randomblob(600000000))"),
    ("lite", "SELECT " + ", ".join(["zeroblob(4000000)"] * 100)),  # 100 values under the value cap: 400 MB
    ("lite", "WITH RECURSIVE r(n, s) AS (SELECT 0, zeroblob(3000000) UNION ALL SELECT n + 1, s FROM r WHERE n < 200) "
     "SELECT s FROM r"),
    ("duck", "SELECT length(repeat('x', 600000000))"),
    ("duck", "SELECT 'x'.repeat(600000000)"),
    ("duck", "SELECT lpad('x', 600000000, 'y')"),
    ("duck", "SELECT list(range) FROM range(10000000)"),  # 10 million Python ints in the process that fetches
    ("pg", "SELECT repeat('x', 300000000)"),
    ("pg", "SELECT decode(repeat('00', 200000000), 'hex')"),
    ("pg", "SELECT repeat('x', 1000000) FROM generate_series(1, 300)"),
]  # fmt: skip

# Runs the SQL tool on the given databases and queries in a process of its own: its peak RSS is
# what the queries cost the process that runs an agent's tools.
SCRIPT = textwrap.dedent("""
    import json, resource, sys
    from data_agent_compare.core.task import DataSource, DataSourceKind
    from data_agent_compare.tools import ToolError, ToolSettings
    from data_agent_compare.tools.sql import Databases, SqlTool
    config = json.loads(sys.argv[1])
    sources = [DataSource(name=n, kind=DataSourceKind(k), location=where) for n, k, where in config["sources"]]
    settings = ToolSettings()
    tool = SqlTool(Databases(sources, settings), settings)
    outcomes = []
    for database, query in config["queries"]:
        try:
            outcomes.append(["ok", tool.run({"database": database, "sql": query}).content[:300]])
        except ToolError as error:
            outcomes.append(["refused", str(error)])
    tool.close()
    print(json.dumps({"outcomes": outcomes, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""")


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[tuple[str, str, str]]]:
    folder = tmp_path_factory.mktemp("sql-limits")
    with sqlite3.connect(folder / "lite.sqlite") as con:
        con.execute("CREATE TABLE t (a INTEGER)")
        con.executemany("INSERT INTO t VALUES (?)", [(i,) for i in range(100)])
    with duckdb.connect(str(folder / "duck.duckdb")) as con:
        con.execute("CREATE TABLE t AS SELECT range AS a FROM range(100)")
    with PostgresCluster(postgres_bin_dir_or_skip()) as cluster:
        yield [
            ("lite", "sqlite", str(folder / "lite.sqlite")),
            ("duck", "duckdb", str(folder / "duck.duckdb")),
            ("pg", "postgres", cluster.url("postgres")),
        ]


def run_queries(sources: list[tuple[str, str, str]], queries: list[tuple[str, str]]) -> dict[str, Any]:
    config = json.dumps({"sources": sources, "queries": queries})
    done = subprocess.run([sys.executable, "-c", SCRIPT, config], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.slow
def test_sql_bombs_are_refused_and_the_tools_process_stays_within_250_mib_of_a_run_without_them(
    sources: list[tuple[str, str, str]],
) -> None:
    without = run_queries(sources, ORDINARY)
    with_bombs = run_queries(sources, ORDINARY + BOMBS)
    assert [kind for kind, _ in without["outcomes"]] == ["ok"] * len(ORDINARY)
    assert with_bombs["outcomes"][: len(ORDINARY)] == without["outcomes"]
    for (database, query), (kind, message) in zip(BOMBS, with_bombs["outcomes"][len(ORDINARY) :], strict=True):
        print(f"{database}: {query[:60]} -> {kind}: {message[:140]}")
        assert kind == "refused", (query, message)
        assert "refused" in message
    grown = with_bombs["peak_mib"] - without["peak_mib"]
    print(f"peak RSS without the bombs {without['peak_mib']:.0f} MiB, with them {with_bombs['peak_mib']:.0f} MiB")
    assert grown < 250


@pytest.fixture
def lite(sources: list[tuple[str, str, str]]) -> Iterator[SqlTool]:
    settings = ToolSettings()
    name, kind, where = sources[0]
    tool = SqlTool(Databases([DataSource(name=name, kind=DataSourceKind(kind), location=where)], settings), settings)
    yield tool
    tool.close()


@pytest.mark.parametrize(
    "query",
    [
        "SELECT fts3_tokenizer('simple')",
        "SELECT hex(fts3_tokenizer('simple'))",
        "SELECT fts3_tokenizer('simple', x'4141414141414141')",
        "SELECT load_extension('/tmp/evil.so')",
        "SELECT a FROM t WHERE FTS3_TOKENIZER('porter') IS NOT NULL",
    ],
)
def test_sqlite_functions_that_expose_pointers_or_load_code_are_refused(lite: SqlTool, query: str) -> None:
    with pytest.raises(ToolError, match=r"refused: SQL function \w+\(\) is not allowed"):
        lite.run({"sql": query})
    assert "100" in lite.run({"sql": "SELECT count(*) FROM t"}).content  # the connection still works


def test_one_sqlite_value_is_capped_at_a_few_mb(lite: SqlTool) -> None:
    assert "4000000" in lite.run({"sql": "SELECT length(zeroblob(4000000))"}).content
    with pytest.raises(ToolError, match="string or blob too big"):
        lite.run({"sql": "SELECT length(zeroblob(5000000))"})


def test_duckdb_table_functions_stream_but_the_scalar_forms_are_refused(sources: list[tuple[str, str, str]]) -> None:
    settings = ToolSettings()
    name, kind, where = sources[1]
    tool = SqlTool(Databases([DataSource(name=name, kind=DataSourceKind(kind), location=where)], settings), settings)
    try:
        assert "4950" in tool.run({"sql": "SELECT sum(range) FROM range(100)"}).content
        for query in ("SELECT range(10)", "SELECT \"repeat\"('ab', 3)", "EXPLAIN ANALYZE SELECT repeat('x', 9)"):
            with pytest.raises(ToolError, match=r"refused: (range|repeat)\(\)"):
                tool.run({"sql": query})
    finally:
        tool.close()


def test_a_duckdb_worker_that_dies_is_reported_and_replaced(sources: list[tuple[str, str, str]]) -> None:
    settings = ToolSettings()
    name, kind, where = sources[1]
    databases = Databases([DataSource(name=name, kind=DataSourceKind(kind), location=where)], settings)
    database = databases.get(name)
    try:
        worker = database._worker._process  # type: ignore[attr-defined]
        assert worker is not None and worker.pid != os.getpid()  # DuckDB runs outside this process
        worker.kill()
        worker.wait()
        with pytest.raises(ToolError, match="ended the database's worker process"):
            database.query("SELECT count(*) FROM t", 10)
        assert database.query("SELECT count(*) FROM t", 10).rows == [(100,)]  # reopened
    finally:
        databases.close()
    assert worker.poll() is not None
