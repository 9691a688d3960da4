"""The files benchmarks publish, read as they are: each entry as one prediction record of ours.

`compare score --predictions FILE [--format NAME]` takes our own JSON Lines (`jsonl`) and every published
format a registered benchmark names (`Benchmark.published_formats`; each format's reader sits next to its
benchmark, in `tasks/<benchmark>_published.py`, and `core/published.py` says what a format is). A plug-in
benchmark's format is read like a built-in one.

The format is recognised from the content when `--format` is not given (the first format that recognises the
file, else `jsonl`). A published format is read whole before anything is scored: an entry of the wrong shape,
an unknown dataset or query, a run given twice or an answer that is not text is a `SubmissionError` naming
the entry (exit 2). `FORMATS`, `FORMAT_BENCHMARK`, `LINE_FORMATS` and `HAS_RUNS` are computed from the
registered benchmarks when first read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.benchmark import BENCHMARKS
from ..core.published import Entry, PublishedFormat, Sample, Submission, SubmissionError

__all__ = ["Entry", "PublishedFormat", "Submission", "SubmissionError", "detect_format", "read_submission"]

OWN_FORMAT = "jsonl"  # our own prediction lines (`predictions.read_predictions`)


def published_formats() -> dict[str, tuple[str, PublishedFormat]]:
    """Format name -> (the benchmark that reads it, the format), over every registered benchmark."""
    found: dict[str, tuple[str, PublishedFormat]] = {}
    for name in BENCHMARKS.names():
        try:
            formats = BENCHMARKS.load(name).published_formats
        except Exception:  # a plug-in that fails to import is named when it is used, not here
            continue
        found |= {fmt.name: (name, fmt) for fmt in formats}
    return found


def detect_format(path: Path) -> str:
    """The format of `path` from its content: the first published format that recognises it, else ours."""
    sample = Sample.of(path)
    return next((name for name, (_, fmt) in published_formats().items() if fmt.recognizes(sample)), OWN_FORMAT)


def read_submission(path: Path, fmt: str) -> Submission:
    """The entries of a published file read whole (not `LINE_FORMATS`: those are read line by line)."""
    reader = published_formats()[fmt][1].read
    if reader is None:
        raise SubmissionError(f"{path}: the {fmt} format is read line by line, not whole")
    return reader(path)


def __getattr__(name: str) -> Any:
    """The format tables, from the registered benchmarks (read lazily: registering happens on import)."""
    formats = published_formats()
    tables = {
        "FORMAT_BENCHMARK": {OWN_FORMAT: None} | {fmt: bench for fmt, (bench, _) in formats.items()},
        "FORMATS": (OWN_FORMAT, *formats),
        "LINE_FORMATS": {OWN_FORMAT} | {fmt for fmt, (_, f) in formats.items() if f.read is None},
        "HAS_RUNS": {fmt for fmt, (_, f) in formats.items() if f.has_runs},
    }
    if name in tables:
        return tables[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
