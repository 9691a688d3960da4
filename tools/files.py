"""File tools over the task's data folder: `list_files` and `read_file`.

Every path is resolved (symlinks followed) and must stay inside `task.data_dir`;
`..`, absolute paths elsewhere and symlinks pointing out are refused.
"""

from __future__ import annotations

import codecs
import os
from pathlib import Path
from typing import Any

from pydantic import Field

from ..core.task import DataSource
from ..core.tool import DataUnavailable, Tool, ToolError, ToolResult, ToolSettings
from .parameters import Parameters, parameters_schema, with_fields

MAX_LIST_ENTRIES = 1000


def source_path(source: DataSource, base_dir: Path | None) -> Path:
    """Where a data source lives; a relative location is relative to the task's data folder."""
    if not source.location:
        raise DataUnavailable(f"data source {source.name!r} has no location")
    path = Path(source.location).expanduser()
    return base_dir / path if not path.is_absolute() and base_dir is not None else path


def resolve_inside(root: Path, path: str) -> Path:
    """The real path `path` names under root; refuses anything that resolves outside it."""
    root = root.resolve()
    candidate = (root / path).resolve()  # an absolute `path` replaces root here, then must lie inside it
    if not candidate.is_relative_to(root):
        raise ToolError(f"refused: {path!r} is outside the data folder; use paths relative to it")
    return candidate


class ListFilesParameters(Parameters):
    path: str | None = Field(None, description="Subfolder to list (default: all).")


class ReadFileParameters(Parameters):
    path: str = Field(description="File path relative to the data folder.")
    offset: int = Field(0, ge=0, description="Byte offset to start at.")
    max_bytes: int | None = Field(None, ge=1)  # at most the settings' file_max_bytes: set per tool


class ListFilesTool(Tool):
    name = "list_files"
    description = "List the files of the task's data folder (recursively) with their sizes in bytes."

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir.resolve()
        self.parameters = parameters_schema(ListFilesParameters)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        folder = resolve_inside(self.root, arguments.get("path") or ".")
        if not folder.is_dir():
            raise ToolError(f"not a folder: {arguments.get('path')!r}")
        entries = self._entries(folder)
        truncated = len(entries) > MAX_LIST_ENTRIES
        entries = entries[:MAX_LIST_ENTRIES]
        lines = [_line(path, size) for path, size in entries]
        if truncated:
            lines.append(f"[truncated: showing the first {MAX_LIST_ENTRIES} entries; list a subfolder]")
        content = "\n".join(lines) or "(empty folder)"
        data = [{"path": path, "size": size if isinstance(size, int) else None} for path, size in entries]
        return ToolResult(success=True, content=content, data=data, truncated=truncated)

    def _entries(self, folder: Path) -> list[tuple[str, int | str | None]]:
        """(relative path, size, None for folders, or why it cannot be read: a dangling link); symlinks
        leading outside are left out. One bad entry never hides the others."""
        entries: list[tuple[str, int | str | None]] = []
        for current, dirs, files in os.walk(folder):
            dirs.sort()
            here = Path(current)
            for name in [*dirs, *sorted(files)]:
                path = here / name
                try:
                    real = path.resolve()
                except (OSError, RuntimeError):  # a symlink loop
                    entries.append((path.relative_to(self.root).as_posix(), "unreadable: a symlink loop"))
                    continue
                if not real.is_relative_to(self.root):
                    continue
                entries.append((path.relative_to(self.root).as_posix(), _size(real)))
            if len(entries) > MAX_LIST_ENTRIES:
                break
        return entries


def _size(real: Path) -> int | str | None:
    try:
        return None if real.is_dir() else real.stat().st_size
    except FileNotFoundError:
        return "dangling link: its target does not exist"
    except OSError as error:
        return f"unreadable: {error.strerror or error}"


def _line(path: str, size: int | str | None) -> str:
    if size is None:
        return f"{path}/"
    return f"{path} ({size} bytes)" if isinstance(size, int) else f"{path} ({size})"


class ReadFileTool(Tool):
    name = "read_file"

    def __init__(self, data_dir: Path, settings: ToolSettings) -> None:
        self.root = data_dir.resolve()
        self.max_bytes = settings.file_max_bytes
        self.description = (
            f"Read a text file of the data folder, at most {self.max_bytes} bytes per call; "
            "continue with `offset` for longer files. Use execute_python for analysis of large files."
        )
        max_bytes = (int | None, Field(None, ge=1, le=self.max_bytes))
        self.parameters = parameters_schema(with_fields(ReadFileParameters, max_bytes=max_bytes))

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        path = resolve_inside(self.root, arguments["path"])
        if not path.is_file():
            raise ToolError(f"no such file: {arguments['path']!r}")
        offset = arguments.get("offset", 0)
        limit = min(arguments.get("max_bytes", self.max_bytes), self.max_bytes)
        size = path.stat().st_size
        with path.open("rb") as handle:
            handle.seek(offset)
            raw = handle.read(limit)
        if b"\0" in raw:
            raise ToolError(f"{arguments['path']!r} is a binary file; read it with execute_python")
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        text = decoder.decode(raw, final=False)  # keeps a split multi-byte character for the next call
        end = offset + len(raw) - len(decoder.getstate()[0])
        truncated = end < size
        if truncated:
            text += f"\n[truncated: bytes {offset}-{end} of {size}; call again with offset={end}]"
        data = {"path": arguments["path"], "offset": offset, "next_offset": end, "size": size}
        return ToolResult(success=True, content=text, data=data, truncated=truncated)
