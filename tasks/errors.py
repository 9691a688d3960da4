"""What every task loader shares: the error it raises for a bad task file (naming the file, the
line or record and the field, so a broken benchmark file can be fixed without a debugger) and
the small readers that raise it."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError


class TaskLoadError(ValueError):
    """A task file, or one record of it, cannot be loaded."""

    def __init__(self, file: str | Path, line: int | None, field: str | None, message: str) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        where = self.file if line is None else f"{self.file}:{line}"
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")

    @classmethod
    def from_validation(cls, file: str | Path, line: int | None, error: ValidationError) -> TaskLoadError:
        """The first pydantic error, with its location as a dotted field path (e.g. gold.dag.nodes.0.id)."""
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "<record>"
        extra = f" (and {error.error_count() - 1} more errors)" if error.error_count() > 1 else ""
        return cls(file, line, field, first["msg"] + extra)


class TaskLoadErrors(TaskLoadError):
    """Several bad records of one load, in file order. A TaskLoadError itself, so callers that
    catch one still catch it; `file` is the first problem's file, `line` and `field` are None."""

    def __init__(self, errors: list[TaskLoadError]) -> None:
        self.errors = errors
        self.file = errors[0].file
        self.line = None
        self.field = None
        self.message = f"{len(errors)} problems:\n" + "\n".join(str(error) for error in errors)
        ValueError.__init__(self, self.message)  # not TaskLoadError's "file:line: field" prefix


R = TypeVar("R")
T = TypeVar("T")


def collect(records: Iterable[R], parse: Callable[[R], T]) -> list[T]:
    """`parse` of every record. Bad records do not stop the load: their TaskLoadErrors are raised
    together at the end, a lone one as itself (so its message stays the one-error message)."""
    parsed: list[T] = []
    errors: list[TaskLoadError] = []
    for record in records:
        try:
            parsed.append(parse(record))
        except TaskLoadError as error:
            errors.append(error)
    if len(errors) > 1:
        raise TaskLoadErrors(errors)
    if errors:
        raise errors[0]
    return parsed


def json_object(path: str | Path, line: int, text: str) -> dict[str, Any]:
    """One JSON Lines record, which must be an object; a TaskLoadError naming the line otherwise."""
    try:
        record = json.loads(text)
    except json.JSONDecodeError as error:
        raise TaskLoadError(path, line, None, f"invalid JSON: {error.msg} (column {error.colno})") from error
    if not isinstance(record, dict):
        raise TaskLoadError(path, line, None, f"expected a JSON object, got {type(record).__name__}")
    return record


def read_json(path: str | Path) -> Any:
    """A whole JSON file; a TaskLoadError naming the file (and line) when it is missing or invalid."""
    path = Path(path)
    if not path.is_file():
        raise TaskLoadError(path, None, None, "file not found")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TaskLoadError(path, error.lineno, None, f"invalid JSON: {error.msg} (column {error.colno})") from error


LFS_MAGIC = b"version https://git-lfs"
LFS_POINTER_MAX_BYTES = 1024  # pointer files are ~130 bytes; real data is never read in full


def is_lfs_pointer(path: Path) -> bool:
    """A Git LFS pointer stands where a published data file should be (the data was not pulled)."""
    if path.stat().st_size > LFS_POINTER_MAX_BYTES:
        return False
    with path.open("rb") as handle:
        return handle.read(len(LFS_MAGIC)) == LFS_MAGIC
