"""A task's logical databases opened by kind, SQLite and DuckDB in a worker process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from ...core.task import DataSource, DataSourceKind
from ...core.tool import ToolError, ToolSettings
from ..parameters import one_of_field
from ..worker_process import WorkerDied, WorkerProcess, WorkerTimedOut
from .database import Database, QueryResult, TableInfo, database_file
from .duckdb_database import DuckDbDatabase
from .postgres_database import PostgresDatabase
from .sqlite_database import SqliteDatabase

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

    def database_field(self, *, required: bool) -> tuple[Any, FieldInfo]:
        """The `database` argument of a tool over these databases (parameters.py `with_fields`)."""
        return one_of_field(self.names, "Logical database name.", required=required)

    def close(self) -> None:
        for database in self.by_name.values():
            database.close()
        self.by_name = {}
