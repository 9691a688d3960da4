"""Turning run directories into tables and pages."""

from .summary import PairRow, SummaryRow, markdown, pairwise, rich_table, summarize

__all__ = ["PairRow", "SummaryRow", "markdown", "pairwise", "rich_table", "summarize"]
