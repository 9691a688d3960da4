"""The sqlglot layer of the read-only SQL guard on its own (`tools/sql.py` `check_read_statement`): the
backends' own guards (DuckDB's parser, SQLite's authorizer, PostgreSQL's read-only role) would still refuse
most writes, so only a test of this layer alone shows it is there."""

from __future__ import annotations

import pytest

from data_agent_compare.core.tool import ToolError
from data_agent_compare.tools.sql import check_read_statement

WRITES = [
    "INSERT INTO t VALUES (1)",
    "UPDATE t SET a = 1",
    "DELETE FROM t",
    "CREATE TEMP TABLE x AS SELECT 1",
    "DROP TABLE t",
    "ALTER TABLE t ADD COLUMN b INT",
]
READS = ["SELECT 1", "WITH x AS (SELECT 1 AS a) SELECT a FROM x", "EXPLAIN SELECT 1", "SELECT 1 UNION SELECT 2"]


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "postgres"])
@pytest.mark.parametrize("sql", WRITES)
def test_a_write_is_refused_by_the_layer_alone(dialect: str, sql: str) -> None:
    with pytest.raises(ToolError, match="refused"):
        check_read_statement(sql, dialect)


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "postgres"])
def test_two_statements_in_one_call_are_refused(dialect: str) -> None:
    with pytest.raises(ToolError, match="2 statements"):
        check_read_statement("SELECT 1; SELECT 2", dialect)


def test_a_write_hidden_in_a_read_is_refused() -> None:
    with pytest.raises(ToolError, match="refused"):
        check_read_statement("WITH gone AS (DELETE FROM t RETURNING *) SELECT * FROM gone", "postgres")


@pytest.mark.parametrize("dialect", ["sqlite", "duckdb", "postgres"])
@pytest.mark.parametrize("sql", READS)
def test_one_read_passes(dialect: str, sql: str) -> None:
    check_read_statement(sql, dialect)
