"""The report's charts as Vega-Lite specs (built with Altair), interactive in the HTML and exported as
static SVG/PNG with vl-convert for report.md. They stay legible at 30 rows and more:

- only the Pareto frontier is labelled directly, at positions placed here so that no two labels overlap
  (a label with no free place is left to the tooltip); every other number is on hover;
- a quantity spanning more than a decade (cost, seconds) gets a log scale;
- one panel per difficulty level or metric (small multiples), rows on a shared axis, instead of many
  series in one panel;
- legends and axis labels are never cut (no label limit).

Each is readable without colour: points differ by shape, lines by dash. The charts:

- cost vs quality, with the Pareto frontier (no other row is both cheaper and more accurate);
- latency per task (log scale) beside each phase's share of it;
- accuracy by difficulty with 95% intervals, one panel per level;
- tool F1 (TF) and TOS per system, one panel per metric;
- pass@k curves, one panel per system, for a benchmark that declares a pass@k table.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert

from ..core.benchmark import benchmark_class
from ..evaluators.dab import pass_at_k_table
from .cells import has_score, mean_cell, score
from .costs import amortised_cost_per_task, cost_per_task, index_shares
from .runs import ReportData
from .summary import PHASES, correctness, judged, per_task
from .tables import groups, levels

VEGA_LITE_VERSION = "6.4"  # the Vega-Lite inside vl-convert that renders these specs (Altair 6 writes 6.x)
WIDTH = 520
HEIGHT = 320
PANEL_WIDTH = 200  # one small multiple
ROW_STEP = 20  # pixels per system × model row: room for an 11 px label
FONT_SIZE = 11
CHAR_WIDTH = 7.2  # pixels per character at FONT_SIZE, generous (DejaVu Sans is wide) so estimates never undershoot
LABEL_GAP = 8  # pixels between a point and its label
SHAPES = ["circle", "square", "triangle-up", "diamond", "cross", "triangle-down", "triangle-right", "triangle-left"]
DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3], [10, 4]]


@dataclass
class Figure:
    key: str
    title: str
    spec: dict[str, Any]


def _row_name(system: str, model: str) -> str:
    return f"{system}/{model}"


def _finish(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The spec, with labels and legends that are never cut and a font size the placement assumes."""
    chart = chart.configure_legend(labelLimit=0, titleLimit=0, symbolLimit=0).configure_axis(
        labelLimit=0, titleLimit=0, labelFontSize=FONT_SIZE - 1
    )
    return chart.configure_header(labelLimit=0, labelFontSize=FONT_SIZE).to_dict()


def spans_decades(values: list[float]) -> bool:
    """True when the positive values span more than a factor of ten: a log scale shows them all."""
    positive = [v for v in values if v > 0]
    return bool(positive) and len(positive) == len(values) and max(positive) > 10 * min(positive)


# ---------------------------------------------------------------- cost vs quality


def cost_quality(data: ReportData) -> Figure | None:
    """Cost vs accuracy of the rows whose cost is known (a row of unknown cost is neither drawn at $0 nor on
    the frontier: the subtitle names how many are left out)."""
    shares = index_shares(data)
    accurate = [r for r in data.summary() if r.accuracy is not None]
    rows = [r for r in accurate if amortised_cost_per_task(r, shares) is not None]
    if not rows:
        return None
    points = []
    for r in rows:
        cost = amortised_cost_per_task(r, shares)  # index building amortised (reports/costs.py)
        point = {"row": _row_name(r.system, r.model), "model": r.model, "cost": cost, "accuracy": r.accuracy}
        points.append({**point, "tasks_only": cost_per_task(r)})
    frontier = pareto(points)
    for point in points:
        point["frontier"] = "on the Pareto frontier" if point in frontier else "dominated"
    logarithmic = spans_decades([p["cost"] for p in points])
    domain = _cost_domain([p["cost"] for p in points], logarithmic)
    scale = alt.Scale(type="log", domain=domain, nice=False) if logarithmic else alt.Scale(domain=domain, nice=False)
    unit = "USD, log scale" if logarithmic else "USD"
    x = alt.X("cost:Q", title=f"mean cost per task incl. index building ({unit})", scale=scale)
    y = alt.Y("accuracy:Q", title="accuracy (share of tasks correct)", scale=alt.Scale(domain=[0, 1]))
    shape = alt.Shape("model:N", scale=alt.Scale(range=SHAPES), title="model")
    tooltip = ["row:N", alt.Tooltip("cost:Q", format=".5f")]
    tooltip += [alt.Tooltip("tasks_only:Q", title="per task only", format=".5f")]
    tooltip += [alt.Tooltip("accuracy:Q", format=".3f"), "frontier:N"]
    marks = (
        alt.Chart(alt.Data(values=points))
        .mark_point(size=110, filled=True, opacity=0.85)
        .encode(x=x, y=y, shape=shape, color="model:N", tooltip=tooltip)
    )
    ordered = sorted(frontier, key=lambda p: p["cost"])
    line = (
        alt.Chart(alt.Data(values=ordered))
        .mark_line(strokeDash=[5, 3], color="#444")
        .encode(x="cost:Q", y="accuracy:Q", order="cost:Q")
    )
    placed = place_labels(ordered, domain, logarithmic)
    labels = (
        alt.Chart(alt.Data(values=placed))
        .mark_text(align="left", baseline="middle", fontSize=FONT_SIZE)
        .encode(x="label_cost:Q", y="label_accuracy:Q", text="row:N", tooltip=["row:N"])
    )
    unlabelled = len(frontier) - len(placed)
    subtitle = "dashed: Pareto frontier, its rows labelled; hover any point for its row"
    if unlabelled:
        subtitle += f" ({unlabelled} frontier label(s) left to hover: no room)"
    if len(rows) < len(accurate):
        subtitle += f"; {len(accurate) - len(rows)} row(s) of unknown cost not drawn"
    chart = (line + marks + labels).properties(
        width=WIDTH, height=HEIGHT, title=alt.Title("Cost vs quality", subtitle=subtitle)
    )
    return Figure("cost_quality", "Cost vs quality", _finish(chart))


def _cost_domain(costs: list[float], logarithmic: bool) -> list[float]:
    low, high = min(costs), max(costs)
    if logarithmic:
        return [low / 1.6, high * 1.6]
    pad = (high - low) * 0.08 or max(high * 0.1, 1e-6)
    return [max(0.0, low - pad), high + pad]


def _pixels(cost: float, accuracy: float, domain: list[float], logarithmic: bool) -> tuple[float, float]:
    scale = math.log10 if logarithmic else float
    low, high = scale(domain[0]), scale(domain[1])
    return (scale(cost) - low) / (high - low) * WIDTH, (1 - accuracy) * HEIGHT


def _data(x: float, y: float, domain: list[float], logarithmic: bool) -> tuple[float, float]:
    if logarithmic:
        low, high = math.log10(domain[0]), math.log10(domain[1])
        cost = 10 ** (low + x / WIDTH * (high - low))
    else:
        cost = domain[0] + x / WIDTH * (domain[1] - domain[0])
    return cost, 1 - y / HEIGHT


def place_labels(points: list[dict[str, Any]], domain: list[float], logarithmic: bool) -> list[dict[str, Any]]:
    """Each point's label at the first of right, left, above, below where it overlaps no label placed
    before it and stays inside the plot; a point with no such place gets no label (its tooltip has it).
    Boxes are estimated generously (CHAR_WIDTH), so labels that fit here do not touch in the browser."""
    boxes: list[tuple[float, float, float, float]] = []
    placed = []
    height = FONT_SIZE + 4
    for point in points:
        px, py = _pixels(point["cost"], point["accuracy"], domain, logarithmic)
        width = CHAR_WIDTH * len(point["row"]) + 4
        candidates = [  # right, left, then diagonally (a point on the plot's top or bottom edge), above, below
            (px + LABEL_GAP, py),
            (px - LABEL_GAP - width, py),
            (px + LABEL_GAP, py + height / 2 + 2),
            (px - LABEL_GAP - width, py + height / 2 + 2),
            (px + LABEL_GAP, py - height / 2 - 2),
            (px - LABEL_GAP - width, py - height / 2 - 2),
            (px - width / 2, py - height),
            (px - width / 2, py + height),
        ]
        for left, middle in candidates:
            box = (left, middle - height / 2, left + width, middle + height / 2)
            inside = box[0] >= 0 and box[2] <= WIDTH and box[1] >= 0 and box[3] <= HEIGHT
            if inside and not any(_overlap(box, other) for other in boxes):
                boxes.append(box)
                cost, accuracy = _data(left, middle, domain, logarithmic)
                placed.append({**point, "label_cost": cost, "label_accuracy": accuracy})
                break
    return placed


def _overlap(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def pareto(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The points no other point beats on both cost (lower) and accuracy (higher); a point of unknown cost, or
    of no correct answer (accuracy 0: the cheapest way to earn nothing is no trade-off), is on no frontier."""
    points = [p for p in points if p["cost"] is not None and p["accuracy"] > 0]

    def dominated(p: dict[str, Any]) -> bool:
        return any(
            q["cost"] <= p["cost"]
            and q["accuracy"] >= p["accuracy"]
            and (q["cost"], q["accuracy"]) != (p["cost"], p["accuracy"])
            for q in points
        )

    return [p for p in points if not dominated(p)]


# ---------------------------------------------------------------- latency


def phase_latency(data: ReportData) -> Figure | None:
    """Two panels on the rows' shared axis: seconds per task (log scale when they span a decade), and how
    each row's time divides into phases (shares, so a slow row does not flatten the others)."""
    rows = data.summary()
    values = [
        {"row": _row_name(r.system, r.model), "phase": phase, "order": i, "seconds": r.mean_latency_by_phase_s[phase]}
        for r in rows
        for i, phase in enumerate(PHASES)
        if (r.mean_latency_by_phase_s[phase] or 0.0) > 0  # None: not timed, not drawn
    ]
    if not values:
        return None
    totals = [
        {"row": _row_name(r.system, r.model), "seconds": r.mean_latency_s}
        for r in rows
        if r.mean_latency_s is not None and r.mean_latency_s > 0
    ]
    order = sorted({v["row"] for v in values})
    y = alt.Y("row:N", title=None, sort=order, scale=alt.Scale(domain=order))
    seconds = [t["seconds"] for t in totals]
    logarithmic = spans_decades(seconds)
    low = min(seconds, default=1.0) / 1.5 if logarithmic else 0.0
    domain = [low, max(seconds, default=1.0) * (1.5 if logarithmic else 1.05)]
    scale = alt.Scale(type="log" if logarithmic else "linear", domain=domain, nice=False)
    title = "mean seconds per task" + (" (log scale)" if logarithmic else "")
    x = alt.X("seconds:Q", title=title, scale=scale)
    base = alt.Chart(alt.Data(values=[{**t, "from": low} for t in totals])).encode(y=y)
    # a lollipop, not a bar: a bar on a log scale has no zero to start from
    total = (
        base.mark_rule(color="#4c78a8", strokeWidth=2).encode(
            x=alt.X("from:Q", scale=scale, title=title), x2="seconds:Q"
        )
        + base.mark_point(filled=True, size=50, color="#4c78a8").encode(
            x=x, tooltip=["row:N", alt.Tooltip("seconds:Q", format=".3f")]
        )
    ).properties(width=PANEL_WIDTH + 40, height=alt.Step(ROW_STEP), title="Latency per task")
    shares = (
        alt.Chart(alt.Data(values=values))
        .mark_bar(stroke="white", strokeWidth=1)
        .encode(
            y=alt.Y("row:N", sort=order, scale=alt.Scale(domain=order), axis=None),
            x=alt.X("seconds:Q", title="share of the task's time", stack="normalize", axis=alt.Axis(format="%")),
            order=alt.Order("order:Q"),
            color=alt.Color("phase:N", sort=list(PHASES), scale=alt.Scale(domain=list(PHASES)), title="phase"),
            tooltip=["row:N", "phase:N", alt.Tooltip("seconds:Q", format=".3f")],
        )
        .properties(width=WIDTH - 120, height=alt.Step(ROW_STEP), title="Share of each phase")
    )
    chart = alt.hconcat(total, shares, spacing=12).properties(
        title=alt.Title(
            "Latency by phase",
            subtitle="rows: system / model; segments left to right: " + " → ".join(PHASES) + "; hover for seconds",
        )
    )
    return Figure("phase_latency", "Latency by phase", _finish(chart))


# ---------------------------------------------------------------- accuracy by difficulty


def accuracy_by_difficulty(data: ReportData) -> Figure | None:
    """One panel per difficulty level; in each, a row per system × model: accuracy and its 95% interval."""
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
                {"row": _row_name(system, model), "model": model, "level": level, "accuracy": cell.value}
                | {"low": low, "high": high, "n": cell.n}
            )
    order = sorted({v["row"] for v in values})
    y = alt.Y("row:N", title=None, sort=order)
    x = alt.X("low:Q", title="accuracy (95% CI)", scale=alt.Scale(domain=[0, 1]))
    base = alt.Chart().encode(y=y)
    colour = alt.Color("model:N", legend=None)  # one legend, the points': colour and shape together
    intervals = base.mark_rule(strokeWidth=2, opacity=0.6).encode(x=x, x2="high:Q", color=colour)
    points = base.mark_point(size=60, filled=True).encode(
        x="accuracy:Q",
        shape=alt.Shape("model:N", scale=alt.Scale(range=SHAPES), title="model"),
        color=alt.Color("model:N", title="model"),
        tooltip=["row:N", "level:N", alt.Tooltip("accuracy:Q", format=".3f"), "low:Q", "high:Q", "n:Q"],
    )
    chart = (
        alt.layer(intervals, points, data=alt.Data(values=values))
        .properties(width=PANEL_WIDTH, height=alt.Step(ROW_STEP))
        .facet(column=alt.Column("level:N", sort=found, title="difficulty"), spacing=16)
        .properties(
            title=alt.Title(
                "Accuracy by difficulty", subtitle="rows: system / model, one panel per level; bars: 95% bootstrap CI"
            )
        )
    )
    return Figure("accuracy_difficulty", "Accuracy by difficulty", _finish(chart))


# ---------------------------------------------------------------- tool scores


def tool_scores(data: ReportData) -> Figure | None:
    metrics = [(name, key) for name, key in (("tool F1 (TF)", "tf"), ("TOS", "tos")) if has_score(data.records, key)]
    if not metrics:
        return None
    values = []
    for (system, model), rows in groups(data.records, lambda r: r.system, lambda r: r.model).items():
        for name, key in metrics:
            by_task = per_task(judged(rows, data.infra_errors_as_failures), score(key))  # the mean: no interval drawn
            if by_task:
                value = sum(by_task.values()) / len(by_task)
                values.append({"row": _row_name(system, model), "model": model, "metric": name, "value": value})
    if not values:
        return None
    order = sorted({v["row"] for v in values})
    chart = (
        alt.Chart(alt.Data(values=values))
        .mark_point(size=70, filled=True)
        .encode(
            y=alt.Y("row:N", title=None, sort=order),
            x=alt.X("value:Q", title="score (0–1, mean over tasks)", scale=alt.Scale(domain=[0, 1])),
            shape=alt.Shape("model:N", scale=alt.Scale(range=SHAPES), title="model"),
            color=alt.Color("model:N", title="model"),
            tooltip=["row:N", "metric:N", alt.Tooltip("value:Q", format=".3f")],
        )
        .properties(width=PANEL_WIDTH, height=alt.Step(ROW_STEP))
        .facet(column=alt.Column("metric:N", title=None), spacing=16)
        .properties(
            title=alt.Title(
                "Tool F1 and TOS per system", subtitle="rows: system / model, one panel per metric; hover for values"
            )
        )
    )
    return Figure("tool_scores", "Tool F1 and TOS", _finish(chart))


# ---------------------------------------------------------------- pass@k


def pass_at_k_curves(data: ReportData) -> Figure | None:
    """pass@k per system × model: one panel per system, a line per model (dash and shape tell them apart)."""
    declared = [s for s in benchmark_class(data.benchmark).report_tables if s.kind == "pass_at_k"]
    if not declared:
        return None
    values = []
    for (system, model), rows in groups(data.records, lambda r: r.system, lambda r: r.model).items():
        table = pass_at_k_table([r.model_dump() for r in rows])
        values += [{"system": system, "model": model, "k": k, "pass": v} for k, v in table.overall.items()]
    if not values:
        return None
    lines = (
        alt.Chart(alt.Data(values=values))
        .mark_line(point=alt.OverlayMarkDef(filled=True, size=50))
        .encode(
            x=alt.X("k:O", title="k (trials drawn)", axis=alt.Axis(labelAngle=0)),
            y=alt.Y("pass:Q", title="pass@k (datasets weighted equally)", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("model:N", title="model"),
            strokeDash=alt.StrokeDash("model:N", scale=alt.Scale(range=DASHES), title="model"),
            shape=alt.Shape("model:N", scale=alt.Scale(range=SHAPES), legend=None),  # the legend: colour and dash
            tooltip=["system:N", "model:N", "k:O", alt.Tooltip("pass:Q", format=".3f")],
        )
        .properties(width=PANEL_WIDTH, height=160)
    )
    systems = sorted({v["system"] for v in values})
    widest = max(len(s) for s in systems) * CHAR_WIDTH
    chart = lines.facet(facet=alt.Facet("system:N", title=None), columns=3, spacing=max(16, widest - PANEL_WIDTH + 16))
    title = f"{declared[0].title}: stratified average"
    chart = chart.properties(title=alt.Title(title, subtitle="one panel per system"))
    return Figure("pass_at_k", "pass@k curves", _finish(chart))


def titled(figure: Figure, benchmark: str) -> Figure:
    """The figure in a benchmark's section of a report over several benchmarks: key and title name it."""
    spec = dict(figure.spec)
    title = spec.get("title")
    if isinstance(title, dict):
        spec["title"] = {**title, "text": f"{benchmark}: {title.get('text', '')}"}
    elif isinstance(title, str):
        spec["title"] = f"{benchmark}: {title}"
    return Figure(f"{benchmark}-{figure.key}", f"{benchmark}: {figure.title}", spec)


def figures(data: ReportData) -> list[Figure]:
    built = [cost_quality(data), phase_latency(data), accuracy_by_difficulty(data), tool_scores(data)]
    built.append(pass_at_k_curves(data))
    return [figure for figure in built if figure is not None]


def export(figure: Figure, folder: Path) -> tuple[Path, Path]:
    """The figure as SVG and PNG (2× for sharp text) in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    svg, png = folder / f"{figure.key}.svg", folder / f"{figure.key}.png"
    drawn = vl_convert.vegalite_to_svg(figure.spec, vl_version=VEGA_LITE_VERSION)
    svg.write_text(drawn, encoding="utf-8")
    png.write_bytes(vl_convert.svg_to_png(drawn, scale=2))  # the SVG rasterised: Vega runs once per figure
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
