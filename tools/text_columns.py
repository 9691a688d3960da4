"""The unstructured text held in a task's databases, as passages for the RAG indexes.

DataAgentBench keeps much of its evidence as free text inside database rows (review texts, book
descriptions, article bodies). A column counts as unstructured text when it is declared as text
(SQL: TEXT, VARCHAR, CHAR, CLOB, STRING or no type; Mongo: a top-level field) and its first
SAMPLE_ROWS non-null values are strings averaging at least MIN_MEAN_CHARS characters and
MIN_MEAN_WORDS words; short labels, codes, dates and numbers stay structured data for SQL.

Each non-null value of such a column becomes passages of ~500 characters (the chunking of
`tools/documents.py`), under the source `<database>.<table>.<column>` (the logical names the agent
sees) and a heading made of the row's identifying columns (names ending in id, key, name or title),
so that a retrieved passage leads back to its row. At most MAX_ROWS rows are read per column; a cut
column says so in its `TextColumn` entry, which the index reports carry into the manifest.

The databases are opened read-only through the SQL backends of tools/sql/ (with a longer statement
timeout: one column is read at once) or read from the mongodump like tools/mongo.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..core.task import DataSource, DataSourceKind, Task
from ..core.tool import ToolError, ToolSettings
from .documents import Chunk, chunk_text
from .files import source_path

SAMPLE_ROWS = 200
MIN_MEAN_CHARS = 100
MIN_MEAN_WORDS = 15
MAX_ROWS = 200_000  # rows read per column
MAX_KEY_COLUMNS = 3
KEY_VALUE_CHARS = 80  # an identifying value longer than this is cut in the heading
READ_TIMEOUT_S = 600.0
TEXT_TYPES = ("TEXT", "CHAR", "CLOB", "STRING", "ANY")
_KEY_NAME = re.compile(r"(^|_)(id|key|name|title)$|[a-z]Id$|id$", re.IGNORECASE)


@dataclass(frozen=True)
class TextColumn:
    """One column read as text: where, how many rows and passages, and whether MAX_ROWS cut it."""

    source: str  # <database>.<table>.<column>
    rows: int
    passages: int
    cut: bool = False

    def report(self) -> dict[str, Any]:
        return asdict(self)


def is_unstructured(values: Sequence[Any]) -> bool:
    """Free text rather than a label: strings of MIN_MEAN_CHARS characters and MIN_MEAN_WORDS words on average."""
    texts = [v for v in values if isinstance(v, str)]
    if not texts or len(texts) < len(values):
        return False
    chars = sum(len(t) for t in texts) / len(texts)
    words = sum(len(t.split()) for t in texts) / len(texts)
    return chars >= MIN_MEAN_CHARS and words >= MIN_MEAN_WORDS


def key_columns(columns: Iterable[str], text_columns: set[str]) -> list[str]:
    return [c for c in columns if c not in text_columns and _KEY_NAME.search(c)][:MAX_KEY_COLUMNS]


def heading(keys: Sequence[str], values: Sequence[Any]) -> str:
    parts = []
    for name, value in zip(keys, values, strict=True):
        text = " ".join(str(value).split())
        cut = text if len(text) <= KEY_VALUE_CHARS else text[: KEY_VALUE_CHARS - 1] + "…"
        parts.append(f"{name}={cut}")
    return "; ".join(parts)


def text_column_chunks(task: Task, settings: ToolSettings) -> tuple[list[Chunk], list[TextColumn]]:
    """The passages of every unstructured text column of the task's databases (module docstring).
    Raises ToolError naming the database when one cannot be read."""
    from . import SQL_KINDS  # the SQL engines load with the first database read

    chunks: list[Chunk] = []
    columns: list[TextColumn] = []
    for source in task.data:
        if source.kind == DataSourceKind.MONGO:
            found = _mongo_chunks(task, source)
        elif source.kind in SQL_KINDS:
            found = _sql_chunks(task, source, settings)
        else:
            continue
        for column, pieces in found:
            chunks += pieces
            columns.append(column)
    return chunks, columns


# ---------------------------------------------------------------- SQL databases


def _sql_chunks(task: Task, source: DataSource, settings: ToolSettings) -> list[tuple[TextColumn, list[Chunk]]]:
    from .sql import Databases

    reading = settings.model_copy(update={"sql_timeout_s": max(settings.sql_timeout_s, READ_TIMEOUT_S)})
    databases = Databases([source], reading, task.data_dir)
    try:
        database = databases.get(source.name)
        found = []
        for table in database.tables():
            columns = database.columns(table)
            texts = [name for name, kind in columns if _texty(kind) and _sample_is_text(database, table.sql_name, name)]
            keys = key_columns([name for name, _ in columns], set(texts))
            for column in texts:
                found.append(_read_sql_column(database, source.name, table, keys, column))
        return found
    except ToolError as error:
        raise ToolError(f"database {source.name!r}: cannot read its text columns: {error}") from error
    finally:
        databases.close()


def _texty(declared: str) -> bool:
    upper = (declared or "ANY").upper()
    return any(kind in upper for kind in TEXT_TYPES)


def _sample_is_text(database: Any, table: str, column: str) -> bool:
    name = database.quote(column)
    sample = database.query(f"SELECT {name} FROM {table} WHERE {name} IS NOT NULL LIMIT {SAMPLE_ROWS}", SAMPLE_ROWS)
    return is_unstructured([row[0] for row in sample.rows])


def _read_sql_column(
    database: Any, db_name: str, table: Any, keys: list[str], column: str
) -> tuple[TextColumn, list[Chunk]]:
    selected = ", ".join(database.quote(c) for c in [*keys, column])
    name = database.quote(column)
    # the suite's own read for an index, not an agent's: no result-size bound
    result = database.query(f"SELECT {selected} FROM {table.sql_name} WHERE {name} IS NOT NULL", MAX_ROWS, None)
    where = f"{db_name}.{table.name}.{column}"
    chunks = [piece for row in result.rows for piece in chunk_text(where, heading(keys, row[:-1]), str(row[-1]))]
    return TextColumn(where, len(result.rows), len(chunks), cut=result.more), chunks


# ---------------------------------------------------------------- Mongo dumps


def _mongo_chunks(task: Task, source: DataSource) -> list[tuple[TextColumn, list[Chunk]]]:
    from .dab import dump_db_name
    from .mongo import read_dump

    folder = source_path(source, task.data_dir)
    try:
        collections = list(read_dump(folder, dump_db_name(task, source.name)))
    except (OSError, ValueError) as error:  # bson.InvalidBSON is a ValueError too
        raise ToolError(f"database {source.name!r}: cannot read the mongodump at {folder}: {error}") from error
    found = []
    for collection, documents in collections:
        fields = list(dict.fromkeys(key for document in documents[:SAMPLE_ROWS] for key in document))
        texts = [f for f in fields if _mongo_sample_is_text(documents, f)]
        keys = key_columns(fields, set(texts))
        for field in texts:
            rows = [d for d in documents if isinstance(d.get(field), str)][:MAX_ROWS]
            where = f"{source.name}.{collection}.{field}"
            chunks = [
                piece
                for document in rows
                for piece in chunk_text(where, heading(keys, [document.get(k) for k in keys]), document[field])
            ]
            cut = len(rows) == MAX_ROWS and sum(isinstance(d.get(field), str) for d in documents) > MAX_ROWS
            found.append((TextColumn(where, len(rows), len(chunks), cut=cut), chunks))
    return found


def _mongo_sample_is_text(documents: list[dict[str, Any]], field: str) -> bool:
    values = [d[field] for d in documents if d.get(field) is not None][:SAMPLE_ROWS]
    return is_unstructured(values)
