"""Turning run directories into tables and pages: `summary.md` (`markdown`, `summarize`, `pairwise`) and the
comparison report (`build_report`: report.html, report.md, results.csv/.parquet, leaderboard.json).

The report's modules load on first use: charting takes a second to import, and the CLI needs it only
when it writes a report."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .summary import PairRow, SummaryRow, markdown, pairwise, rich_table, summarize

_LAZY = {"build_report": ".build", "ReportFiles": ".build", "ReportError": ".runs"}

__all__ = [
    "PairRow",
    "ReportError",
    "ReportFiles",
    "SummaryRow",
    "build_report",
    "markdown",
    "pairwise",
    "rich_table",
    "summarize",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
