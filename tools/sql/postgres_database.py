"""A database on a PostgreSQL server (tools/postgres/ restores DAB's dumps into one): read-only
transactions rolled back after every query, a prepared single read statement, and the result's
size bounded by the server itself."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.types.string import TextLoader

from ...core.task import DataSource, DataSourceKind
from ...core.tool import ToolError
from .database import RESULT_MAX_BYTES, TOO_LARGE, Database, QueryResult, TableInfo, fetch_bounded
from .statements import READ_ONLY_HINT, check_read_statement, leading_keyword

# DECLARE ... CURSOR (a server-side cursor, so the row cap bounds what is transferred) takes
# only these; EXPLAIN and SHOW results are small and are fetched whole.
_PG_CURSOR_KEYWORDS = {"SELECT", "WITH", "VALUES", "TABLE"}
_PG_READ_KEYWORDS = _PG_CURSOR_KEYWORDS | {"EXPLAIN", "SHOW"}
_PG_REFUSED = (psycopg.errors.ReadOnlySqlTransaction, psycopg.errors.InsufficientPrivilege)
_PG_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_$]*")  # unquoted names fold to lower case
_PG_CONNECT_TIMEOUT_S = 10


@dataclass
class PostgresTableInfo(TableInfo):
    quoted: str = ""  # quoting depends on the server's keywords, known to the database only

    @property
    def sql_name(self) -> str:
        return self.quoted


class PostgresDatabase(Database):
    """A database on a PostgreSQL server; `source.location` is its postgresql:// URL.

    Tables are those of every non-system schema (`public` shown unqualified). The schema
    tool's row counts are exact COUNT(*)s, as for the other backends: DAB's tables are small,
    and `pg_class.reltuples` is only an estimate (and -1 before the first ANALYZE).
    """

    kind = DataSourceKind.POSTGRES

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        super().__init__(source, base_dir, timeout_s)
        options = f"-c default_transaction_read_only=on -c statement_timeout={max(1, round(timeout_s * 1000))}"
        try:
            self._con = psycopg.connect(
                postgres_url(source), autocommit=True, options=options, connect_timeout=_PG_CONNECT_TIMEOUT_S
            )
        except psycopg.Error as error:
            raise ToolError(f"database {source.name!r}: cannot connect: {error}") from error
        for json_type in ("json", "jsonb"):  # the JSON text, not a Python dict's repr
            self._con.adapters.register_loader(json_type, TextLoader)
        reserved = self._run("SELECT word FROM pg_get_keywords() WHERE catcode <> 'U'", None, 10_000).rows
        self._reserved = {word for (word,) in reserved}

    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        check_read_statement(sql, "postgres")
        if leading_keyword(sql) not in _PG_READ_KEYWORDS:  # sqlglot lets what it cannot parse pass
            raise ToolError(f"refused {leading_keyword(sql)}: {READ_ONLY_HINT}")
        if leading_keyword(sql) not in _PG_CURSOR_KEYWORDS or max_bytes is None:
            return self._run(sql, None, max_rows, max_bytes)
        result = self._run(_pg_sized(sql, max_bytes), None, max_rows, max_bytes)
        return QueryResult(result.columns[:-1], [row[:-1] for row in result.rows], result.more)

    def _run(
        self, sql: str, params: Sequence[Any] | None, max_rows: int, max_bytes: int | None = RESULT_MAX_BYTES
    ) -> QueryResult:
        try:
            self._con.execute("BEGIN READ ONLY")
            if leading_keyword(sql) in _PG_CURSOR_KEYWORDS:
                with self._con.cursor(name="agent_query") as cursor:
                    cursor.execute(sql, params)  # DECLARE: one statement only
                    rows = fetch_bounded(cursor.fetchmany, max_rows, 1000, max_bytes)
                    columns = [d.name for d in cursor.description or []]
            else:
                with self._con.cursor() as cursor:
                    cursor.execute(sql, params, prepare=True)  # prepared: the server refuses several statements
                    rows = cursor.fetchmany(max_rows + 1) if cursor.description else []
                    columns = [d.name for d in cursor.description or []]
        except psycopg.errors.QueryCanceled as error:
            raise self._timed_out() from error
        except psycopg.errors.OutOfMemory as error:  # the server's memory limit per process (tools/postgres/)
            raise ToolError(
                "refused: the query needs more memory than the database server gives one query; aggregate, "
                "select fewer columns or add a LIMIT"
            ) from error
        except psycopg.errors.InvalidTextRepresentation as error:
            if _PG_TOO_LARGE in str(error):
                raise ToolError(f"refused: {TOO_LARGE}") from error
            raise ToolError(f"SQL error: {_pg_message(error)}") from error
        except _PG_REFUSED as error:
            raise ToolError(f"refused by PostgreSQL: {_pg_message(error)} ({READ_ONLY_HINT})") from error
        except psycopg.Error as error:
            raise ToolError(f"SQL error: {_pg_message(error)}") from error
        finally:
            with contextlib.suppress(psycopg.Error):
                self._con.execute("ROLLBACK")
        return QueryResult(columns, rows[:max_rows], len(rows) > max_rows)

    def quote(self, name: str) -> str:
        if _PG_IDENTIFIER.fullmatch(name) and name not in self._reserved:
            return name
        return '"' + name.replace('"', '""') + '"'

    def tables(self) -> list[TableInfo]:
        sql = (
            "SELECT n.nspname, c.relname, c.relkind IN ('v', 'm') FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition "
            "AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\\_%' "
            "ORDER BY n.nspname <> 'public', n.nspname, c.relname"
        )
        return [self._table(schema, name, view) for schema, name, view in self._run(sql, None, 10_000).rows]

    def _table(self, schema: str, name: str, is_view: bool) -> TableInfo:
        shown_schema = None if schema == "public" else schema  # public: the default search_path
        parts = [shown_schema, name] if shown_schema else [name]
        return PostgresTableInfo(shown_schema, name, is_view, quoted=".".join(self.quote(p) for p in parts))

    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        sql = (
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
        )
        return [(name, kind) for name, kind in self._run(sql, (table.schema or "public", table.name), 10_000).rows]

    def close(self) -> None:
        self._con.close()


_PG_TOO_LARGE = "result larger than the limit: "
_PG_SIZE_COLUMN = "__result_bytes"


def _pg_sized(sql: str, max_bytes: int) -> str:
    """The agent's query with its result's running size (the last column, dropped again): the
    server fails the query once it passes max_bytes, before the rows reach the runner.
    A non-constant cast of a message to integer is how plain SQL raises an error."""
    body = sql.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    size = f'"{_PG_SIZE_COLUMN}"'
    return (
        f"SELECT * FROM (SELECT q.*, sum(pg_column_size(q.*)) OVER (ROWS UNBOUNDED PRECEDING) AS {size} "
        f"FROM (\n{body}\n) AS q) AS sized "
        f"WHERE CASE WHEN {size} > {int(max_bytes)} THEN ('{_PG_TOO_LARGE}' || {size})::int IS NULL ELSE true END"
    )


def _pg_message(error: psycopg.Error) -> str:
    """The server's message and hint, without psycopg's quote of the statement (which shows
    our DECLARE wrapper rather than the agent's query)."""
    parts = [error.diag.message_primary or str(error), error.diag.message_detail, error.diag.message_hint]
    return "; ".join(part for part in parts if part)


def postgres_url(source: DataSource) -> str:
    location = source.location or ""
    if location.startswith(("postgresql://", "postgres://")):
        return location
    if location.endswith(".sql"):
        raise ToolError(
            f"database {source.name!r} is a pg_dump file ({location}), not a server: restore it first "
            "into a server (a DAB run does it itself: a local throw-away server, or the one --postgres-url names)"
        )
    raise ToolError(f"database {source.name!r}: expected a postgresql:// URL, got {location!r}")
