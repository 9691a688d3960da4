"""The report's charts as Vega-Lite specs (built with Altair), interactive in the HTML and exported as
static SVG/PNG with vl-convert for report.md. Each is readable without colour: points differ by shape,
lines by dash, bars and points carry text labels; every axis says its unit.

- cost vs quality, with the Pareto frontier (no other row is both cheaper and more accurate);
- latency by phase per system, stacked;
- accuracy by difficulty with 95% intervals;
- tool F1 (TF) and TOS per system;
- DAB's pass@k curves.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert

from ..evaluators.dab import pass_at_k_table
from .cells import has_score, mean_cell, score
from .runs import ReportData
from .summary import PHASES, correctness
from .tables import groups, levels

VEGA_LITE_VERSION = "6.4"  # the Vega-Lite inside vl-convert that renders these specs (Altair 6 writes 6.x)
WIDTH = 520
LABEL_SHARE = 0.12  # a stacked segment gets a text label when it is at least this share of its bar
SHAPES = ["circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "triangle-right", "triangle-left"]
DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4]]


@dataclass
class Figure:
    key: str
    title: str
    spec: dict[str, Any]


def _row_name(system: str, model: str) -> str:
    return f"{system}/{model}"


def cost_quality(data: ReportData) -> Figure | None:
    summary = data.summary()
    rows = [r for r in summary if r.accuracy is not None]
    if not rows:
        return None
    points = []
    for r in rows:
        cost = r.total_cost_usd / max(1, r.tasks - r.unavailable)
        points.append({"row": _row_name(r.system, r.model), "model": r.model, "cost": cost, "accuracy": r.accuracy})
    frontier = pareto(points)
    for point in points:
        point["frontier"] = "on the Pareto frontier" if point in frontier else "dominated"
    base = alt.Chart(alt.Data(values=points))
    x = alt.X("cost:Q", title="mean cost per task (USD)", scale=alt.Scale(zero=False, padding=20))
    y = alt.Y("accuracy:Q", title="accuracy (share of tasks correct)", scale=alt.Scale(domain=[0, 1]))
    shape = alt.Shape("model:N", scale=alt.Scale(range=SHAPES), title="model")
    tooltip = ["row:N", alt.Tooltip("cost:Q", format=".5f"), alt.Tooltip("accuracy:Q", format=".3f"), "frontier:N"]
    marks = base.mark_point(size=120, filled=True).encode(x=x, y=y, shape=shape, color="model:N", tooltip=tooltip)
    labels = base.mark_text(align="left", dx=9, dy=-6, fontSize=11).encode(x="cost:Q", y="accuracy:Q", text="row:N")
    line = (
        alt.Chart(alt.Data(values=sorted(frontier, key=lambda p: p["cost"])))
        .mark_line(strokeDash=[5, 3], color="#444")
        .encode(x="cost:Q", y="accuracy:Q", order="cost:Q")
    )
    chart = (line + marks + labels).properties(
        width=WIDTH, height=320, title="Cost vs quality (dashed: Pareto frontier)"
    )
    return Figure("cost_quality", "Cost vs quality", chart.to_dict())


def pareto(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points no other point beats on both cost (lower) and accuracy (higher)."""

    def dominated(p: dict[str, Any]) -> bool:
        return any(
            q["cost"] <= p["cost"]
            and q["accuracy"] >= p["accuracy"]
            and (q["cost"], q["accuracy"]) != (p["cost"], p["accuracy"])
            for q in points
        )

    return [p for p in points if not dominated(p)]


def phase_latency(data: ReportData) -> Figure | None:
    rows = data.summary()
    values = [
        {"row": _row_name(r.system, r.model), "phase": phase, "order": i, "seconds": r.mean_latency_by_phase_s[phase]}
        for r in rows
        for i, phase in enumerate(PHASES)
        if r.mean_latency_by_phase_s[phase] > 0
    ]
    if not values:
        return None
    base = (
        alt.Chart(alt.Data(values=values))
        .transform_joinaggregate(total="sum(seconds)", groupby=["row"])
        .encode(
            y=alt.Y("row:N", title="system / model"),
            x=alt.X("seconds:Q", title="mean seconds per task", stack="zero"),
            order=alt.Order("order:Q"),
        )
    )
    bars = base.mark_bar(stroke="white", strokeWidth=1).encode(
        color=alt.Color("phase:N", sort=list(PHASES), title="phase"),
        tooltip=["row:N", "phase:N", alt.Tooltip("seconds:Q", format=".3f")],
    )
    # A label where the segment has room for it; the order of the segments is the legend's, left to right.
    text = (
        base.transform_filter(f"datum.seconds >= {LABEL_SHARE} * datum.total")
        .mark_text(color="black", align="right", dx=-3, fontSize=10)
        .encode(text="phase:N")
    )
    title = alt.Title(
        "Latency by phase", subtitle="segments left to right: " + " → ".join(PHASES) + "; hover for seconds"
    )
    chart = (bars + text).properties(width=WIDTH, title=title)
    return Figure("phase_latency", "Latency by phase", chart.to_dict())


def accuracy_by_difficulty(data: ReportData) -> Figure | None:
    found = levels(data.records)
    if not found or not any(correctness(r) is not None for r in data.records):
        return None
    values = []
    for (system, model, level), rows in groups(
        data.records, lambda r: r.system, lambda r: r.model, lambda r: r.level
    ).items():
        cell = mean_cell(
            rows, correctness, quality=True, infra_errors_as_failures=data.infra_errors_as_failures, with_n=True
        )
        if cell.value is not None:
            low = cell.value if cell.low is None else cell.low
            high = cell.value if cell.high is None else cell.high
            values.append(
                {
                    "row": _row_name(system, model),
                    "level": level,
                    "accuracy": cell.value,
                    "low": low,
                    "high": high,
                    "n": cell.n,
                }
            )
    x = alt.X("level:N", title="difficulty", sort=found, axis=alt.Axis(labelAngle=0))
    offset = alt.XOffset("row:N")
    base = alt.Chart(alt.Data(values=values))
    bars = base.mark_errorbar(ticks=True).encode(
        x=x,
        xOffset=offset,
        y=alt.Y("low:Q", title="accuracy (share correct, 95% CI)", scale=alt.Scale(domain=[0, 1])),
        y2="high:Q",
        color=alt.Color("row:N", legend=None),  # one legend, the points': colour and shape together
    )
    points = base.mark_point(size=90, filled=True).encode(
        x=x,
        xOffset=offset,
        y="accuracy:Q",
        shape=alt.Shape("row:N", scale=alt.Scale(range=SHAPES), title="system / model"),
        color=alt.Color("row:N", title="system / model"),
        tooltip=["row:N", "level:N", alt.Tooltip("accuracy:Q", format=".3f"), "low:Q", "high:Q", "n:Q"],
    )
    chart = (bars + points).properties(width=WIDTH, height=300, title="Accuracy by difficulty (bars: 95% bootstrap CI)")
    return Figure("accuracy_difficulty", "Accuracy by difficulty", chart.to_dict())


def tool_scores(data: ReportData) -> Figure | None:
    metrics = [(name, key) for name, key in (("tool F1 (TF)", "tf"), ("TOS", "tos")) if has_score(data.records, key)]
    if not metrics:
        return None
    values = []
    for (system, model), rows in groups(data.records, lambda r: r.system, lambda r: r.model).items():
        for name, key in metrics:
            cell = mean_cell(rows, score(key), quality=True, infra_errors_as_failures=data.infra_errors_as_failures)
            if cell.value is not None:
                values.append({"row": _row_name(system, model), "metric": name, "value": cell.value})
    base = alt.Chart(alt.Data(values=values)).encode(
        y=alt.Y("row:N", title="system / model"),
        yOffset=alt.YOffset("metric:N"),  # each metric on its own line within the row: labels never collide
        x=alt.X("value:Q", title="score (0–1, mean over tasks)", scale=alt.Scale(domain=[0, 1])),
    )
    points = base.mark_point(size=110, filled=True).encode(
        shape=alt.Shape("metric:N", scale=alt.Scale(range=SHAPES), title="metric"),
        color=alt.Color("metric:N", title="metric"),
        tooltip=["row:N", "metric:N", alt.Tooltip("value:Q", format=".3f")],
    )
    text = base.mark_text(align="left", dx=8, fontSize=10).encode(text=alt.Text("value:Q", format=".2f"))
    chart = (points + text).properties(width=WIDTH, title="Tool F1 and TOS per system")
    return Figure("tool_scores", "Tool F1 and TOS", chart.to_dict())


def pass_at_k_curves(data: ReportData) -> Figure | None:
    if data.benchmark != "dab":
        return None
    values = []
    for (system, model), rows in groups(data.records, lambda r: r.system, lambda r: r.model).items():
        table = pass_at_k_table([r.model_dump() for r in rows])
        values += [{"row": _row_name(system, model), "k": k, "pass": v} for k, v in table.overall.items()]
    if not values:
        return None
    # Each line is told apart by dash and point shape and labelled at its end (the legend is colour only).
    last = max(value["k"] for value in values)
    base = alt.Chart(alt.Data(values=values)).encode(
        x=alt.X("k:O", title="k (trials drawn)", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("pass:Q", title="pass@k (share of queries, datasets weighted equally)", scale=alt.Scale(domain=[0, 1])),
    )
    lines = base.mark_line(point=alt.OverlayMarkDef(filled=True, size=70)).encode(
        color=alt.Color("row:N", title="system / model"),
        strokeDash=alt.StrokeDash("row:N", scale=alt.Scale(range=DASHES), legend=None),
        shape=alt.Shape("row:N", scale=alt.Scale(range=SHAPES), legend=None),
        tooltip=["row:N", "k:O", alt.Tooltip("pass:Q", format=".3f")],
    )
    labels = base.transform_filter(f"datum.k == {last}").mark_text(align="left", dx=8).encode(text="row:N")
    chart = lines + labels
    chart = chart.properties(width=WIDTH, height=300, title="DAB pass@k (stratified average)")
    return Figure("pass_at_k", "pass@k curves", chart.to_dict())


def figures(data: ReportData) -> list[Figure]:
    built = [cost_quality(data), phase_latency(data), accuracy_by_difficulty(data), tool_scores(data)]
    built.append(pass_at_k_curves(data))
    return [figure for figure in built if figure is not None]


def export(figure: Figure, folder: Path) -> tuple[Path, Path]:
    """The figure as SVG and PNG (2× for sharp text) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    svg, png = folder / f"{figure.key}.svg", folder / f"{figure.key}.png"
    svg.write_text(vl_convert.vegalite_to_svg(figure.spec, vl_version=VEGA_LITE_VERSION), encoding="utf-8")
    png.write_bytes(vl_convert.vegalite_to_png(figure.spec, vl_version=VEGA_LITE_VERSION, scale=2))
    return svg, png


def javascript() -> str:
    """Vega, Vega-Lite and vega-embed in one script, for an HTML page that works offline. Bundling takes
    seconds and depends only on the versions, so the bundle is kept in the user's cache folder."""
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cached = cache_home / "data-agent-compare" / f"vega-{vl_convert.__version__}-vl{VEGA_LITE_VERSION}.js"
    with contextlib.suppress(OSError):
        return cached.read_text(encoding="utf-8")
    bundle = vl_convert.javascript_bundle(vl_version=VEGA_LITE_VERSION)
    with contextlib.suppress(OSError):  # no cache folder: bundle again next time
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
        partial.write_text(bundle, encoding="utf-8")
        partial.replace(cached)  # atomic: a reader never sees half a bundle
    return bundle
