"""What every read-only database backend is: the `Database` interface, its results, and the
bounds every backend applies (rows, bytes, SQL text length)."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ...core.task import DataSource, DataSourceKind
from ...core.tool import DataUnavailable, ToolError
from ..files import source_path
from .statements import quote_identifier

RESULT_MAX_BYTES = 64 << 20  # what one query's fetched rows may hold in the runner
# An agent's SQL text, checked before any parser sees it: sqlglot held 834 MB parsing 1.5 MB of SQL.
SQL_TEXT_MAX_CHARS = 100_000
TOO_LARGE = (
    f"the result exceeds {RESULT_MAX_BYTES >> 20} MB (values are capped too); aggregate, select fewer columns "
    "or add a LIMIT"
)


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
