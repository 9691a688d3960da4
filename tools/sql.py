"""Read-only SQL over a task's databases: `get_schema_info` and `execute_sql`.

Each logical database is a `Database` backend (SQLite, DuckDB, PostgreSQL). Writes are
refused in layers, because one layer can have gaps:

- SQLite: a `mode=ro` URI, `PRAGMA query_only=ON`, and an authorizer that allows
  only reads, selects, functions, recursive CTEs and a few read-only PRAGMAs.
- DuckDB: `read_only=True` with external access, extension loading and
  configuration changes disabled, plus a statement-type check by DuckDB's own
  parser and by sqlglot (DuckDB's read-only mode still allows TEMP tables, SET,
  INSTALL...).
- PostgreSQL (a server URL; tools.postgres restores DAB's dumps into one): the session
  defaults to read-only transactions, every query runs in `BEGIN READ ONLY` and is rolled
  back (so not even a `set_config` outlives it), the statement must be a prepared single
  SELECT/WITH/VALUES/TABLE/EXPLAIN/SHOW that sqlglot also reads as one read, and
  `statement_timeout` bounds it. The throw-away cluster adds a reader role without write
  privileges.

Every query has a row cap, a byte cap on the rendered text and a timeout; its text is capped at
SQL_TEXT_MAX_CHARS before any parser sees it.

An agent's SQLite and DuckDB queries run in a worker process (`WorkerDatabase`, tools/worker_process.py)
under a memory rlimit, killed when a call outlives its timeout (one SQLite function call can run for
minutes without reaching the progress handler) or the unit's wall time. Within it, what one query may
allocate is bounded too: SQLite's values are capped at VALUE_MAX_BYTES
(`Connection.setlimit`), its heap at SQLITE_HEAP_LIMIT (process-wide), and functions that expose
pointers or load code (`fts3_tokenizer`, `load_extension`...) are denied by the authorizer;
DuckDB runs with a `memory_limit` and few threads, and the scalar functions that build one huge
value outside that limit (`repeat`, `lpad`, `range`...) are refused. PostgreSQL's reader role
bounds the server (tools/postgres.py); a query's result that comes over exceeds no
RESULT_MAX_BYTES there either: the server checks the running size and fails the query. Every
backend stops fetching at RESULT_MAX_BYTES, with an error that says so.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
import sqlite3
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import psycopg
import sqlglot
from psycopg.types.string import TextLoader
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ..core.task import DataSource, DataSourceKind
from ..core.tool import DataUnavailable, Tool, ToolError, ToolResult, ToolSettings
from .files import source_path
from .worker_process import WorkerDied, WorkerProcess, WorkerTimedOut

SAMPLE_ROWS = 2
SAMPLE_CELL_CHARS = 60
READ_ONLY_HINT = "the database is read-only; only single SELECT/WITH queries are allowed"
RESULT_MAX_BYTES = 64 << 20  # what one query's fetched rows may hold in the runner
VALUE_MAX_BYTES = 4 << 20  # SQLite: one string or blob
SQLITE_HEAP_LIMIT = 128 << 20  # SQLite: everything SQLite holds in this process (PRAGMA hard_heap_limit)
DUCKDB_MEMORY_LIMIT = "256MB"
# An agent's SQL text, checked before any parser sees it: sqlglot held 834 MB parsing 1.5 MB of SQL.
SQL_TEXT_MAX_CHARS = 100_000
DUCKDB_THREADS = 2
TOO_LARGE = (
    f"the result exceeds {RESULT_MAX_BYTES >> 20} MB (values are capped too); aggregate, select fewer columns "
    "or add a LIMIT"
)

_SAFE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# DuckDB's reserved words are a superset of what SQLite needs quoting for; quoting a
# non-reserved word is harmless in every dialect we serve.
_RESERVED = Dialect.get_or_raise("duckdb").generator_class.RESERVED_KEYWORDS


def quote_identifier(name: str) -> str:
    """The identifier as an agent must write it, e.g. `"Sales Orders"`."""
    if _SAFE_IDENTIFIER.fullmatch(name) and name.lower() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    more: bool  # rows beyond the cap exist


@dataclass
class TableInfo:
    schema: str | None  # None for the default schema
    name: str
    is_view: bool = False

    @property
    def sql_name(self) -> str:
        parts = [self.schema, self.name] if self.schema else [self.name]
        return ".".join(quote_identifier(p) for p in parts)


# ---------------------------------------------------------------- statement checks

_READ_NODES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values, exp.Describe, exp.Show, exp.Summarize, exp.Pivot)
_WRITE_NODES = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter, exp.Copy)
_READ_COMMANDS = {"DESCRIBE", "SHOW", "SUMMARIZE"}  # forms sqlglot only knows as opaque commands
_EXPLAIN = re.compile(r"\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.IGNORECASE)


def leading_keyword(sql: str) -> str:
    match = re.search(r"[A-Za-z]+", re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S))
    return match.group(0).upper() if match else "empty"


def check_read_statement(sql: str, dialect: str) -> None:
    """Refuse anything but one read statement, as sqlglot parses it.

    A ParseError passes: sqlglot does not know every dialect's syntax, and each backend
    has its own authoritative guard (DuckDB's parser, SQLite's authorizer).
    """
    explain = _EXPLAIN.match(sql)
    if explain:  # sqlglot has no EXPLAIN; check the statement explained
        sql = sql[explain.end() :]
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError:
        return
    if len(statements) > 1:
        raise ToolError(f"refused: {len(statements)} statements in one call; send one query per call")
    if not statements:
        raise ToolError("empty query")
    statement = statements[0]
    if isinstance(statement, exp.Command):
        allowed = str(statement.this).upper() in _READ_COMMANDS
    else:
        allowed = isinstance(statement, _READ_NODES)
    # A read at the top can still hide a write, e.g. Postgres' `WITH x AS (DELETE ...)`.
    if not allowed or statement.find(*_WRITE_NODES):
        raise ToolError(f"refused {leading_keyword(sql)}: {READ_ONLY_HINT}")


# ---------------------------------------------------------------- backends


class Database(ABC):
    """One logical database opened read-only; queries are serialized by a lock.

    Subclasses connect in `__init__`; each reads `source.location` its own way (a file
    relative to the task's data folder here, a connection URL for a server database).
    """

    kind: ClassVar[DataSourceKind]

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        self.name = source.name
        self.timeout_s = timeout_s
        self._lock = threading.Lock()

    def query(self, sql: str, max_rows: int, max_bytes: int | None = RESULT_MAX_BYTES) -> QueryResult:
        """At most max_rows rows; a ToolError past max_bytes (None: the suite's own reads, unbounded)."""
        if len(sql) > SQL_TEXT_MAX_CHARS:
            raise ToolError(
                f"refused: the query is {len(sql):,} characters, more than {SQL_TEXT_MAX_CHARS:,}; "
                "send a shorter query (compute long value lists in execute_python)"
            )
        with self._lock:
            return self._query(sql, max_rows, max_bytes)

    @abstractmethod
    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        """Check the statement, run it under the timeout, fetch at most max_rows (+1 to see more)."""

    @abstractmethod
    def tables(self) -> list[TableInfo]: ...

    @abstractmethod
    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        """(name, type) of each column."""

    @abstractmethod
    def close(self) -> None: ...

    def quote(self, name: str) -> str:
        """An identifier (column, table) as the agent must write it in SQL."""
        return quote_identifier(name)

    def _timed_out(self) -> ToolError:
        return ToolError(f"query cancelled after the {self.timeout_s:g}s timeout; simplify it or add a LIMIT")


def _size(value: Any) -> int:
    """Roughly what a fetched cell holds in memory."""
    if isinstance(value, str | bytes | bytearray):
        return len(value) + 50
    if isinstance(value, list | tuple | dict):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return 50 + sum(_size(key) + _size(item) for key, item in items)
    return 32


def fetch_bounded(fetchmany: Any, max_rows: int, batch: int, max_bytes: int | None = RESULT_MAX_BYTES) -> list[Any]:
    """At most max_rows + 1 rows (the +1 tells the caller more exist), `batch` at a time;
    a ToolError once they would hold more than max_bytes."""
    rows: list[Any] = []
    used = 0
    while len(rows) <= max_rows:
        got = fetchmany(min(batch, max_rows + 1 - len(rows)))
        if not got:
            break
        used += sum(_size(cell) for row in got for cell in row)
        if max_bytes is not None and used > max_bytes:
            raise ToolError(f"refused: {TOO_LARGE}")
        rows += got
    return rows


def database_file(source: DataSource, base_dir: Path | None) -> Path:
    path = source_path(source, base_dir)
    if not path.is_file():
        raise DataUnavailable(f"database {source.name!r}: file not found: {path}")
    return path.resolve()


_SQLITE_ACTIONS = (  # noqa: SIM905 - a word list reads better than 33 quoted strings
    "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW "
    "CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE DROP_TEMP_TRIGGER "
    "DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT PRAGMA READ SELECT TRANSACTION UPDATE ATTACH DETACH "
    "ALTER_TABLE REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE FUNCTION SAVEPOINT RECURSIVE"
).split()
_SQLITE_ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{a}"): a for a in _SQLITE_ACTIONS}
_SQLITE_READ_ACTIONS = {sqlite3.SQLITE_READ, sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION, sqlite3.SQLITE_RECURSIVE}
# PRAGMAs that only describe the schema; their argument is a table or index name.
_SQLITE_READ_PRAGMAS = {"table_info", "table_xinfo", "index_list", "index_info", "index_xinfo", "foreign_key_list"}
# Functions that return or take pointers, load code or touch files: fts3_tokenizer('simple') returns
# a code address and with a second argument overwrites it.
_SQLITE_DENIED_FUNCTIONS = {
    "fts3_tokenizer", "load_extension", "readfile", "writefile", "edit", "fts5", "fts5_source_id",
    "sqlite_dbdata", "sqlite_dbpage", "zipfile", "sha3_query", "eval",
}  # fmt: skip
_SQLITE_LIMITS = {  # per connection (sqlite3.SQLITE_LIMIT_*)
    "LENGTH": VALUE_MAX_BYTES,  # a string, blob or row: zeroblob(900000000) fails
    "SQL_LENGTH": 1 << 20,
    "COLUMN": 2000,
    "EXPR_DEPTH": 1000,
    "COMPOUND_SELECT": 500,
    "FUNCTION_ARG": 127,
    "ATTACHED": 0,
    "LIKE_PATTERN_LENGTH": 50_000,
    "TRIGGER_DEPTH": 10,
    "WORKER_THREADS": 0,
}


class SqliteDatabase(Database):
    kind = DataSourceKind.SQLITE

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        super().__init__(source, base_dir, timeout_s)
        self._denied: str | None = None
        self._deadline = 0.0
        self._interrupted = False
        # autocommit (isolation_level=None): the driver never opens a transaction itself
        uri = database_file(source, base_dir).as_uri() + "?mode=ro"
        self._con = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self._con.execute("PRAGMA query_only=ON")
        self._con.execute(f"PRAGMA hard_heap_limit={SQLITE_HEAP_LIMIT}")
        for name, value in _SQLITE_LIMITS.items():
            self._con.setlimit(getattr(sqlite3, f"SQLITE_LIMIT_{name}"), value)
        self._con.set_authorizer(self._authorize)
        self._con.set_progress_handler(self._progress, 10_000)

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
        denied_function = action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() in _SQLITE_DENIED_FUNCTIONS
        if not denied_function and (
            action in _SQLITE_READ_ACTIONS or (action == sqlite3.SQLITE_PRAGMA and arg1 in _SQLITE_READ_PRAGMAS)
        ):
            return sqlite3.SQLITE_OK
        if self._denied is None:
            parts = [_SQLITE_ACTION_NAMES.get(action, str(action)), arg1, arg2 and f"= {arg2}"]
            self._denied = " ".join(p for p in parts if p)
        return sqlite3.SQLITE_DENY

    def _progress(self) -> int:
        self._interrupted = time.monotonic() > self._deadline
        return int(self._interrupted)  # non-zero aborts the running statement

    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        self._denied, self._interrupted = None, False
        self._deadline = time.monotonic() + self.timeout_s
        cursor = self._con.cursor()
        try:
            cursor.execute(sql)
            columns = [d[0] for d in cursor.description or []]
            rows = fetch_bounded(cursor.fetchmany, max_rows, 1, max_bytes)  # a row: at most SQLite's heap
        except sqlite3.ProgrammingError as error:
            if "one statement at a time" in str(error):
                raise ToolError("refused: multiple statements in one call; send one query per call") from error
            raise ToolError(f"SQL error: {error}") from error
        except sqlite3.DatabaseError as error:
            raise self._explain(sql, error) from error
        except MemoryError as error:  # SQLite's heap limit
            raise ToolError(f"refused: the query needs more memory than SQLite may use here; {TOO_LARGE}") from error
        finally:
            cursor.close()
        return QueryResult(columns, rows[:max_rows], len(rows) > max_rows)

    def _explain(self, sql: str, error: sqlite3.DatabaseError) -> ToolError:
        if self._interrupted:
            return self._timed_out()
        if self._denied is not None and self._denied.startswith("FUNCTION"):
            name = self._denied.rpartition(" ")[2]
            return ToolError(
                f"refused: SQL function {name}() is not allowed (it exposes memory addresses or loads code)"
            )
        if self._denied is not None or "readonly" in str(error):
            denied = f" (SQLite authorizer denied: {self._denied})" if self._denied else ""
            return ToolError(f"refused {leading_keyword(sql)}: {READ_ONLY_HINT}{denied}")
        if isinstance(error, sqlite3.DataError | sqlite3.OperationalError) and (
            "too big" in str(error) or "out of memory" in str(error)
        ):
            return ToolError(f"refused: {error}: {TOO_LARGE}")
        return ToolError(f"SQL error: {error}")

    def tables(self) -> list[TableInfo]:
        sql = "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%'"
        rows = self.query(sql + " ORDER BY name", 10_000).rows
        return [TableInfo(None, name, kind == "view") for name, kind in rows]

    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        rows = self.query(f"PRAGMA table_info({quote_identifier(table.name)})", 10_000).rows
        return [(row[1], row[2] or "ANY") for row in rows]

    def close(self) -> None:
        self._con.close()


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
    explain = _EXPLAIN.match(sql)
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
        except psycopg.errors.OutOfMemory as error:  # the server's memory limit per process (tools/postgres.py)
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


BACKENDS: dict[DataSourceKind, type[Database]] = {
    DataSourceKind.SQLITE: SqliteDatabase,
    DataSourceKind.DUCKDB: DuckDbDatabase,
    DataSourceKind.POSTGRES: PostgresDatabase,
}
# Run in a worker process under a memory rlimit (tools/worker_process.py), killed at the call's deadline:
# DuckDB builds some values outside its memory_limit, inside the process that opened it, and one SQLite
# function call (printf('%.*c', 2147483647, 'x'), a long LIKE) runs to its end without ever reaching the
# progress handler, so only ending its process bounds it in time.
WORKER_KINDS = {DataSourceKind.DUCKDB, DataSourceKind.SQLITE}


CRASHED = (
    "the query ended the database's worker process (it needed more memory than a query may use); "
    "the database was reopened: aggregate, select fewer columns or add a LIMIT"
)


class WorkerDatabase(Database):
    """The backend of `source.kind` (BACKENDS) in a worker process; same interface, same errors."""

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        super().__init__(source, base_dir, timeout_s)
        self.kind = source.kind
        # resolved here: a missing file is the caller's DataUnavailable, before any process starts
        resolved = source.model_copy(update={"location": str(database_file(source, base_dir))})
        backend = (BACKENDS[source.kind], (resolved, None, timeout_s))
        self._worker = WorkerProcess(f"database {self.name!r}", *backend, timeout_s)

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return self._worker.call(method, *args)
        except WorkerTimedOut as timed_out:
            if timed_out.wall_time:
                raise ToolError("query stopped at the task's wall-time limit; simplify it or add a LIMIT") from None
            raise self._timed_out() from None
        except WorkerDied:
            raise ToolError(f"refused: {CRASHED}") from None

    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        result: QueryResult = self._call("query", sql, max_rows, max_bytes)
        return result

    def tables(self) -> list[TableInfo]:
        tables: list[TableInfo] = self._call("tables")
        return tables

    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        columns: list[tuple[str, str]] = self._call("columns", table)
        return columns

    def quote(self, name: str) -> str:
        quoted: str = self._call("quote", name)
        return quoted

    def close(self) -> None:
        self._worker.stop()


class Databases:
    """The task's logical databases by name, shared by the schema and SQL tools."""

    def __init__(self, sources: list[DataSource], settings: ToolSettings, base_dir: Path | None = None) -> None:
        self.settings = settings
        self.by_name: dict[str, Database] = {}
        try:
            for source in sources:
                self.by_name[source.name] = self._open(source, base_dir)
        except Exception:
            self.close()
            raise

    def _open(self, source: DataSource, base_dir: Path | None) -> Database:
        backend = BACKENDS.get(source.kind)
        if backend is not None and source.kind in WORKER_KINDS:
            return WorkerDatabase(source, base_dir, self.settings.sql_timeout_s)
        if backend is None:
            raise ToolError(f"data source {source.name!r}: {source.kind} databases are not supported")
        return backend(source, base_dir, self.settings.sql_timeout_s)

    @property
    def names(self) -> list[str]:
        return list(self.by_name)

    def get(self, name: str | None) -> Database:
        if name is None:
            if len(self.by_name) == 1:
                return next(iter(self.by_name.values()))
            raise ToolError(f"several databases: pass `database`, one of {', '.join(self.by_name)}")
        if name not in self.by_name:
            raise ToolError(f"unknown database {name!r}; available: {', '.join(self.by_name)}")
        return self.by_name[name]

    def database_parameter(self) -> dict[str, Any]:
        return {"type": "string", "enum": self.names, "description": "Logical database name."}

    def close(self) -> None:
        for database in self.by_name.values():
            database.close()
        self.by_name = {}


# ---------------------------------------------------------------- rendering


def jsonable(value: Any) -> Any:
    """A cell value as JSON can carry it (Decimal -> float, bytes/dates -> text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(bytes(value))} bytes>"
    return str(value)


def _cell(value: Any) -> str:
    return "NULL" if value is None else str(jsonable(value))


def render_table(columns: list[str], rows: Sequence[Sequence[Any]], max_bytes: int) -> tuple[str, int]:
    """CSV text with a header, cut before max_bytes; returns the text and how many rows it holds."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    size, shown = len(out.getvalue().encode()), 0
    for row in rows:
        line = io.StringIO()
        csv.writer(line, lineterminator="\n").writerow([_cell(v) for v in row])
        encoded = len(line.getvalue().encode())
        if size + encoded > max_bytes:
            break
        out.write(line.getvalue())
        size += encoded
        shown += 1
    return out.getvalue(), shown


# ---------------------------------------------------------------- tools


class SqlTool(Tool):
    name = "execute_sql"

    def __init__(self, databases: Databases, settings: ToolSettings) -> None:
        self.databases = databases
        self.settings = settings
        self.description = (
            "Run one read-only SQL query (SELECT/WITH) and get the result as CSV. "
            f"At most {settings.sql_max_rows} rows are returned; aggregate or add LIMIT for large results. "
            'Quote identifiers with spaces in double quotes, e.g. "Sales Orders".'
        )
        properties: dict[str, Any] = {
            "sql": {"type": "string", "description": "One SQL query."},
            "database": databases.database_parameter(),
        }
        required = ["sql"] if len(databases.names) == 1 else ["sql", "database"]
        self.parameters = {
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        }

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        database = self.databases.get(arguments.get("database"))
        result = database.query(arguments["sql"], self.settings.sql_max_rows)
        if not result.columns:
            raise ToolError("the statement returned no result set; send one SELECT query")
        text, shown = render_table(result.columns, result.rows, self.settings.sql_max_bytes)
        truncated = result.more or shown < len(result.rows)
        if truncated:
            more = f"at least {len(result.rows) + 1}" if result.more else str(len(result.rows))
            text += f"[truncated: showing {shown} of {more} rows; more rows exist — aggregate or add LIMIT]\n"
        elif not result.rows:
            text += "(0 rows)\n"
        rows = [[jsonable(v) for v in row] for row in result.rows[:shown]]
        return ToolResult(
            success=True, content=text, data={"columns": result.columns, "rows": rows}, truncated=truncated
        )

    def close(self) -> None:
        self.databases.close()


class SchemaTool(Tool):
    name = "get_schema_info"

    def __init__(self, databases: Databases, settings: ToolSettings) -> None:
        self.databases = databases
        self.settings = settings
        self.description = (
            "Describe the databases: tables with quoted names as SQL needs them, columns and types, "
            "row counts and sample rows. Pass `table` to describe one table."
        )
        self.parameters = {
            "type": "object",
            "properties": {
                "database": databases.database_parameter(),
                "table": {"type": "string", "description": "One table to describe (default: all)."},
            },
            "additionalProperties": False,
        }

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        name = arguments.get("database")
        databases = [self.databases.get(name)] if name else list(self.databases.by_name.values())
        sections, data = [], {}
        for database in databases:
            tables = _select_tables(database, arguments.get("table"))
            infos = [self._describe(database, table) for table in tables]
            sections.append(_render_database(database, infos))
            data[database.name] = {"kind": str(database.kind), "tables": infos}
        return ToolResult(success=True, content="\n\n".join(sections), data=data)

    def _describe(self, database: Database, table: TableInfo) -> dict[str, Any]:
        count = database.query(f"SELECT COUNT(*) FROM {table.sql_name}", 1).rows[0][0]
        sample = database.query(f"SELECT * FROM {table.sql_name} LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
        return {
            "name": table.sql_name,
            "view": table.is_view,
            "row_count": count,
            "columns": [{"name": database.quote(n), "type": t} for n, t in database.columns(table)],
            "sample_columns": sample.columns,
            "sample_rows": [[jsonable(v) for v in row] for row in sample.rows],
        }

    def close(self) -> None:
        self.databases.close()


def _select_tables(database: Database, wanted: str | None) -> list[TableInfo]:
    tables = database.tables()
    if wanted is None:
        return tables
    key = wanted.strip().lower()
    found = [t for t in tables if key in (t.name.lower(), t.sql_name.lower())]
    if not found:
        names = ", ".join(t.sql_name for t in tables)
        raise ToolError(f"no table {wanted!r} in database {database.name!r}; tables: {names}")
    return found


def _render_database(database: Database, infos: list[dict[str, Any]]) -> str:
    lines = [f"database {database.name} ({database.kind}): {len(infos)} table(s)"]
    for info in infos:
        kind = "view" if info["view"] else "table"
        lines.append(f"\n{kind} {info['name']} — {info['row_count']} rows")
        lines.append("  columns: " + ", ".join(f"{c['name']} {c['type']}" for c in info["columns"]))
        if info["sample_rows"]:
            short = [[_short(v) for v in row] for row in info["sample_rows"]]
            text, _ = render_table(info["sample_columns"], short, 10_000)
            lines.append("  sample rows:\n" + "\n".join("    " + line for line in text.splitlines()))
    return "\n".join(lines)


def _short(value: Any) -> Any:
    if isinstance(value, str) and len(value) > SAMPLE_CELL_CHARS:
        return value[: SAMPLE_CELL_CHARS - 1] + "…"
    return value
