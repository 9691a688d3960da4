"""DuckDB opened read-only, external access and configuration changes off, every statement checked
by DuckDB's own parser and by sqlglot, and the functions that build one huge value refused."""

from __future__ import annotations

import contextlib
import json
import re
import threading
from pathlib import Path
from typing import Any

import duckdb

from ...core.task import DataSource, DataSourceKind
from ...core.tool import ToolError
from .database import Database, QueryResult, TableInfo, database_file, fetch_bounded
from .statements import EXPLAIN_PREFIX, READ_ONLY_HINT, check_read_statement, leading_keyword

DUCKDB_MEMORY_LIMIT = "256MB"
DUCKDB_THREADS = 2
_DUCKDB_READ_TYPES = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
_DUCKDB_CONFIG = {
    "enable_external_access": False,  # no files, URLs, ATTACH, COPY or Python replacement scans
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "memory_limit": DUCKDB_MEMORY_LIMIT,
    "threads": DUCKDB_THREADS,
}
# Per session, then locked: lock_configuration refuses SET / PRAGMA x=y from then on.
_DUCKDB_SESSION = ("SET enable_progress_bar = false", "SET lock_configuration = true")
# Scalar functions whose one result DuckDB builds outside its memory_limit (repeat('x', 600000000)
# takes 600 MB in the runner); as table functions (FROM range(n)) they stream and are allowed.
_DUCKDB_DENIED_FUNCTIONS = {
    "repeat", "lpad", "rpad", "range", "generate_series", "list_resize", "array_resize", "printf", "format",
    "bar", "format_bytes", "list_repeat",
}  # fmt: skip


class DuckDbDatabase(Database):
    kind = DataSourceKind.DUCKDB

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        super().__init__(source, base_dir, timeout_s)
        path = database_file(source, base_dir)
        self._con = duckdb.connect(str(path), read_only=True, config=dict(_DUCKDB_CONFIG))
        for statement in _DUCKDB_SESSION:  # the progress bar would draw on the runner's terminal
            self._con.execute(statement)

    def _check(self, sql: str) -> None:
        try:
            statements = self._con.extract_statements(sql)
        except duckdb.Error as error:
            raise ToolError(f"SQL error: {error}") from error
        if not statements:
            raise ToolError("empty query")
        if len(statements) > 1:
            raise ToolError(f"refused: {len(statements)} statements in one call; send one query per call")
        if statements[0].type not in _DUCKDB_READ_TYPES:
            raise ToolError(f"refused {leading_keyword(sql)}: {READ_ONLY_HINT}")
        check_read_statement(sql, "duckdb")
        denied = sorted(_called_functions(self._con, sql) & _DUCKDB_DENIED_FUNCTIONS)
        if denied:
            raise ToolError(
                f"refused: {', '.join(denied)}() can build one value larger than the query memory allows; "
                "use it as a table function (FROM range(n)) or build the value outside SQL"
            )

    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        self._check(sql)
        timer = threading.Timer(self.timeout_s, self._con.interrupt)
        timer.start()
        try:
            self._con.execute(sql)
            columns = [d[0] for d in self._con.description or []]
            rows = fetch_bounded(self._con.fetchmany, max_rows, 2048, max_bytes)  # a chunk is within memory_limit
        except duckdb.InterruptException as error:
            raise self._timed_out() from error
        except duckdb.OutOfMemoryException as error:
            raise ToolError(
                f"refused: the query needs more than DuckDB's {DUCKDB_MEMORY_LIMIT} memory limit"
            ) from error
        except duckdb.Error as error:
            raise ToolError(f"SQL error: {error}") from error
        finally:
            timer.cancel()
            self._abort_pending()
        return QueryResult(columns, rows[:max_rows], len(rows) > max_rows)

    def _abort_pending(self) -> None:
        # DuckDB >= 2 streams results and refuses new work until an unfinished one is aborted.
        abort = getattr(self._con, "abort", None)
        if abort is not None:
            with contextlib.suppress(duckdb.Error):
                abort()

    def tables(self) -> list[TableInfo]:
        sql = (
            "SELECT table_schema, table_name, table_type FROM information_schema.tables "
            "WHERE table_catalog = current_database() ORDER BY table_schema <> 'main', table_schema, table_name"
        )
        rows = self.query(sql, 10_000).rows
        return [TableInfo(None if s == "main" else s, n, t == "VIEW") for s, n, t in rows]

    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        sql = (
            "SELECT column_name, data_type FROM information_schema.columns WHERE table_catalog = current_database() "
            f"AND table_schema = {_literal(table.schema or 'main')} AND table_name = {_literal(table.name)} "
            "ORDER BY ordinal_position"
        )
        return [(name, kind) for name, kind in self.query(sql, 10_000).rows]

    def close(self) -> None:
        self._con.close()


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _called_functions(con: duckdb.DuckDBPyConnection, sql: str) -> set[str]:
    """Lower-case names of the scalar and aggregate functions `sql` calls, by DuckDB's own parser
    (any spelling: `repeat(x, n)`, `x.repeat(n)`, `"repeat"(x, n)`); table functions left out."""
    explain = EXPLAIN_PREFIX.match(sql)
    if explain:  # EXPLAIN ANALYZE runs the statement; the serializer takes SELECTs only
        sql = sql[explain.end() :]
    try:
        tree = json.loads(con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])  # type: ignore[index]
    except (duckdb.Error, TypeError, ValueError):
        tree = {"error": True}
    if tree.get("error"):  # a form it cannot serialize (SUMMARIZE, PIVOT...): every word counts
        return {word.lower() for word in re.findall(r"\w+", sql)}
    names: set[str] = set()

    def walk(node: Any, table_function: bool = False) -> None:
        if isinstance(node, dict):
            if node.get("class") == "FUNCTION" and not table_function:
                names.add(str(node.get("function_name", "")).lower())
            for key, value in node.items():
                walk(value, node.get("type") == "TABLE_FUNCTION" and key == "function")
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(tree)
    return names
