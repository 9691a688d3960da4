"""`compare score`'s tables, drawn from what `engine/scoring.py` computes: the means over tasks with their
intervals, and a benchmark's aggregate at the leaderboard's precision."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:
    from ..engine.scoring import MetricMean


def means_table(means: list[MetricMean]) -> Table:
    """Every score's mean over tasks (a task's runs averaged first) with its 95% bootstrap interval."""
    table = Table(title="Scores (mean over tasks, 95% bootstrap CI over tasks)")
    for column in ("metric", "tasks", "predictions", "mean", "95% CI"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for row in means:
        interval = "–" if row.low != row.low else f"[{row.low:.3f}, {row.high:.3f}]"
        table.add_row(row.metric, str(row.tasks), str(row.predictions), f"{row.mean:.3f}", interval)
    return table


def aggregate_table(title: str, metrics: dict[str, Any], digits: int) -> Table:
    """The aggregate at the leaderboard's precision; an unrounded value (named so) at full precision."""
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in metrics.items():
        table.add_row(name, _shown(name, value, digits))
    return table


def _shown(name: str, value: Any, digits: int) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.6f}" if name.endswith("unrounded") else f"{value:.{digits}f}"
    return str(value)
