"""SQLite opened read-only: a `mode=ro` URI, `PRAGMA query_only=ON`, an authorizer that allows only
reads, and per-connection limits on what one query may allocate."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from ...core.task import DataSource, DataSourceKind
from ...core.tool import ToolError
from .database import TOO_LARGE, Database, QueryResult, TableInfo, database_file, fetch_bounded
from .statements import READ_ONLY_HINT, leading_keyword, quote_identifier

VALUE_MAX_BYTES = 4 << 20  # SQLite: one string or blob
SQLITE_HEAP_LIMIT = 128 << 20  # SQLite: everything SQLite holds in this process (PRAGMA hard_heap_limit)

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
