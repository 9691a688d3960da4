"""The error every task loader raises for a bad task file: it names the file, the line (or
record) and the field, so a broken benchmark file can be fixed without a debugger."""

from __future__ import annotations

from pathlib import Path

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
