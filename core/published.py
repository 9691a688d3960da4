"""The files a benchmark publishes (leaderboard submissions, result files), as one benchmark reads them.

A benchmark names the formats it reads (`Benchmark.published_formats`); each `PublishedFormat` says how to
recognise a file of it (`recognizes`) and how to read it whole into `Entry`s, each one prediction record of
ours (`read`). `compare score` (`evaluators/submissions.py`) finds the formats through the registered
benchmarks, so a plug-in benchmark's published format is read like a built-in one. Anything malformed is a
`SubmissionError` naming the file and the entry (exit 2).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .safe_load import DocumentTooComplex
from .safe_load import load_json as load_json_text


class SubmissionError(Exception):
    """The submission as a whole cannot be scored (names the file and the entry): exit 2."""


@dataclass
class Entry:
    """One prediction of a published file, as our record (`task_id` + the benchmark's answer field)."""

    where: str  # "entry 12", "line 3", "gpt-4o.json detailed_results[4]"
    record: dict[str, Any]
    run: str | None = None
    model: str | None = None
    published: dict[str, Any] = field(default_factory=dict)  # the publisher's own per-entry figures


@dataclass
class Submission:
    format: str
    entries: list[Entry]
    published: dict[str, float] = field(default_factory=dict)  # the publisher's aggregate, by name


@dataclass(frozen=True)
class Sample:
    """What format recognition looks at: the path, the first bytes, the first line, the first object's keys
    of a JSON list, and the start of the text."""

    path: Path
    is_dir: bool = False
    head: bytes = b""
    first_line: str = ""
    first_keys: frozenset[str] = frozenset()
    text_start: str = ""  # the first 100,000 characters (whitespace and BOM stripped before)

    @classmethod
    def of(cls, path: Path) -> Sample:
        if path.is_dir():
            return cls(path, is_dir=True)
        with path.open("rb") as file:
            head = file.read(4096)
        text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
        start = text if len(head) < 4096 else path.read_text(encoding="utf-8", errors="replace")[:100_000]
        keys = _first_keys(path) if text.startswith("[") else frozenset()
        return cls(path, head=head, first_line=text.split("\n", 1)[0], first_keys=keys, text_start=start)


@dataclass(frozen=True)
class PublishedFormat:
    """One published file format. `read` is None for a format read line by line like our own JSON Lines
    (`evaluators.predictions.read_predictions`: a bad line is reported and skipped)."""

    name: str
    recognizes: Callable[[Sample], bool]
    read: Callable[[Path], Submission] | None = None
    has_runs: bool = False  # two entries for one task are two runs (epochs)


def load_json(path: Path) -> Any:
    try:
        return load_json_text(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as bad:
        raise SubmissionError(f"{path}: not UTF-8 (byte offset {bad.start})") from None
    except json.JSONDecodeError as bad:
        raise SubmissionError(f"{path}: not valid JSON (line {bad.lineno}: {bad.msg})") from None
    except DocumentTooComplex as bad:
        raise SubmissionError(f"{path}: refused: {bad}") from None


def text_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, line) of the non-blank lines of a UTF-8 file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as bad:
        raise SubmissionError(f"{path}: not UTF-8 (byte offset {bad.start})") from None
    return [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _first_keys(path: Path) -> frozenset[str]:
    try:
        data = load_json_text(path.read_text(encoding="utf-8"))
    except ValueError:  # not UTF-8, not JSON, or nested too deep
        return frozenset()
    return frozenset(data[0]) if isinstance(data, list) and data and isinstance(data[0], dict) else frozenset()
