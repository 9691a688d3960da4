"""Turning run directories into tables and pages."""

from reports.summary import SummaryRow, markdown, rich_table, summarize

__all__ = ["SummaryRow", "markdown", "rich_table", "summarize"]
