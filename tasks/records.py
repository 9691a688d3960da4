"""What every task loader shares: small readers of JSON and JSON Lines files that raise the core's
TaskLoadError for a bad file (naming the file, the line or record and the field, so a broken
benchmark file can be fixed without a debugger), and collecting every bad record of a load."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ..core.benchmark import TaskLoadError, TaskLoadErrors
from ..core.safe_load import DocumentTooComplex, load_json

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
        record = load_json(text)
    except json.JSONDecodeError as error:
        raise TaskLoadError(path, line, None, f"invalid JSON: {error.msg} (column {error.colno})") from error
    except DocumentTooComplex as error:
        raise TaskLoadError(path, line, None, f"refused: {error}") from None
    if not isinstance(record, dict):
        raise TaskLoadError(path, line, None, f"expected a JSON object, got {type(record).__name__}")
    return record


def read_text(path: str | Path) -> str:
    """A whole UTF-8 text file; a TaskLoadError naming the file (and the line and byte offset of the
    first byte that is not UTF-8) when it is missing, unreadable or binary."""
    path = Path(path)
    if path.is_dir():  # e.g. DBGorilla's --tasks-path given the folder that holds its queries file
        raise TaskLoadError(path, None, None, "is a folder; give the file itself")
    if not path.is_file():
        raise TaskLoadError(path, None, None, "file not found")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TaskLoadError(path, None, None, f"cannot be read: {error.strerror or error}") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        message = f"not UTF-8 text: byte 0x{data[error.start]:02x} at offset {error.start}"
        raise TaskLoadError(path, line, None, message) from error


def read_lines(path: str | Path) -> list[tuple[int, str]]:
    """(line number, line) of the non-blank lines of a UTF-8 JSON Lines file. Split on "\\n" only:
    str.splitlines would also split on U+2028 inside JSON strings."""
    lines = enumerate(read_text(path).split("\n"), start=1)
    return [(number, line) for number, line in lines if line.strip()]


def read_json(path: str | Path) -> Any:
    """A whole JSON file; a TaskLoadError naming the file (and line) when it is missing or invalid."""
    path = Path(path)
    try:
        return load_json(read_text(path))
    except json.JSONDecodeError as error:
        raise TaskLoadError(path, error.lineno, None, f"invalid JSON: {error.msg} (column {error.colno})") from error
    except DocumentTooComplex as error:
        raise TaskLoadError(path, None, None, f"refused: {error}") from None


LFS_MAGIC = b"version https://git-lfs"
LFS_POINTER_MAX_BYTES = 1024  # pointer files are ~130 bytes; real data is never read in full


def is_lfs_pointer(path: Path) -> bool:
    """A Git LFS pointer stands where a published data file should be (the data was not pulled)."""
    if path.stat().st_size > LFS_POINTER_MAX_BYTES:
        return False
    with path.open("rb") as handle:
        return handle.read(len(LFS_MAGIC)) == LFS_MAGIC
