"""`build_report`: run directories in, report files out (report.html, report.md with its figures,
results.csv, results.parquet, leaderboard.json). Everything comes from the typed run log, so a run written
by an older suite re-renders with this one; every text file passes `exports.scrub` on its way to disk."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..compare.model import ModelConfig
from ..compare.trace import Trace
from . import exports, failures, html, plots, tables
from .cells import ReportTable
from .costs import amortised_cost_per_task, cost_per_task, index_shares
from .drilldown import drilldown
from .judged import JudgedFailures, judge_failures, judged_table
from .runs import ReportData, ReportError, describe_sources, load_runs
from .significance import leader_line, significance_table
from .summary import denominator_lines
from .trajectories import trajectory_table

FIGURES_DIR = "figures"


@dataclass
class ReportFiles:
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


@dataclass
class Report:
    """Everything a report shows, before it is written."""

    data: ReportData
    title: str
    headline: list[str]
    notes: list[str]
    tables: dict[str, ReportTable]
    sections: list[tuple[str, str, list[ReportTable]]]
    figures: list[plots.Figure]
    traces: dict[tuple, Trace | None]
    judged: JudgedFailures | None = None


def _headline(data: ReportData) -> list[str]:
    rows = data.summary()
    pairs = len(rows)
    lines = [
        f"{len(data.common_tasks)} tasks compared"
        + (f" (common to all {len(data.runs)} runs)" if len(data.runs) > 1 else "")
        + f" · {pairs} system × model rows · {len(data.records)} records"
    ]
    scored = [r for r in rows if r.accuracy is not None]
    if scored:
        best = max(scored, key=lambda r: (r.accuracy, -r.total_cost_usd))
        ci = "" if best.accuracy_ci is None else f" [{best.accuracy_ci[0]:.3f}, {best.accuracy_ci[1]:.3f}]"
        lines.append(f"Most accurate: {best.system}/{best.model} {best.accuracy:.3f}{ci} (n={best.accuracy_n} tasks)")
        leader = leader_line(data)
        if leader:
            lines.append(leader)
    spent, shares = [r for r in rows if r.tasks > r.unavailable], index_shares(data)
    if spent:
        cheapest = min(spent, key=lambda r: amortised_cost_per_task(r, shares))  # index building amortised
        per_task, own = amortised_cost_per_task(cheapest, shares), cost_per_task(cheapest)
        beside = f" (with its index building; ${own:.5f} for the tasks alone)" if per_task != own else ""
        lines.append(f"Cheapest: {cheapest.system}/{cheapest.model} ${per_task:.5f} per task{beside}")
        timed = [r for r in spent if r.mean_latency_s is not None]
        fastest = min(timed, key=lambda r: r.mean_latency_s or 0.0) if timed else None
        if fastest is not None:
            lines.append(f"Fastest: {fastest.system}/{fastest.model} {fastest.mean_latency_s:.3f} s per task")
    counts = {
        "errors": sum(r.errors for r in rows),
        "infrastructure errors": sum(r.infra_errors for r in rows),
        "budget stops": sum(r.stopped_by_budget for r in rows),
        "unavailable": sum(r.unavailable for r in rows),
    }
    lines.append("Counted apart: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    return lines


def _notes(data: ReportData) -> list[str]:
    rows = data.summary()
    notes = [line.removeprefix("- ") for line in denominator_lines(rows, data.infra_errors_as_failures)]
    for run, tasks in data.left_out.items():
        shown = ", ".join(tasks[:10]) + (" …" if len(tasks) > 10 else "")
        notes.append(f"{run}: {len(tasks)} task(s) not in every run are left out: {shown}")
    notes.append(
        "Means are over tasks (a task's epochs averaged first) with 95% bootstrap intervals [low, high]; "
        "n = tasks behind the mean. Click any number to see its tasks."
    )
    return notes + data.warnings


def assemble(data: ReportData, *, judge: ModelConfig | None = None, out: Path | None = None) -> Report:
    """Every table and chart; with a judge, wrong answers are judged too (its traces go to `out`)."""
    traces = {record.key: data.trace(record) for record in data.records}
    judged = judge_failures(data, traces, judge, out or data.runs[0].run_dir) if judge else None
    found = {t.key: t for t in tables.benchmark_tables(data)}
    extra = [tables.indexing(data), significance_table(data), failures.failure_table(data)]
    extra += [judged_table(data, judged) if judged else None]
    extra += [failures.exploring_table(data, traces), failures.tool_profile(data)]
    extra += [trajectory_table(data, traces)]  # DAB's Tables 5 and 6, when a run used DAB's tools
    found |= {t.key: t for t in extra if t is not None}
    main_keys = [key for key in found if key not in ("overview", "phases", "significance")]
    failure_keys = ("failures", "judged_failures", "exploring", "tools")
    main_keys = [key for key in main_keys if key not in failure_keys]
    sections = [
        ("tables", "Tables", [found[k] for k in main_keys] + [found["phases"]]),
        ("significance", "Significance", [found[k] for k in ("significance",) if k in found]),
        ("failures", "How systems fail", [found[k] for k in failure_keys if k in found]),
    ]
    sections = [section for section in sections if section[2]]
    runs = ", ".join(run.run_dir.name for run in data.runs)
    return Report(
        data=data,
        title=f"Comparison report: {data.benchmark} ({runs})",
        headline=_headline(data),
        notes=_notes(data),
        tables=found,
        sections=sections,
        figures=plots.figures(data),
        traces=traces,
        judged=judged,
    )


def markdown_table(table: ReportTable) -> list[str]:
    def escape(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = [f"### {table.title}", "", "| " + " | ".join(escape(c) for c in table.columns) + " |"]
    lines.append("|" + "---|" * len(table.columns))
    lines += ["| " + " | ".join(escape(cell.text) for cell in row) + " |" for row in table.rows]
    return [*lines, *(["", table.note] if table.note else []), ""]


def markdown(report: Report, figure_files: dict[str, tuple[Path, Path]], out: Path) -> str:
    lines = [f"# {report.title}", "", *[f"- {line}" for line in report.headline], ""]
    notes = [
        note.replace(" Click any number to see its tasks.", " report.html links every number to its tasks.")
        for note in report.notes
    ]
    lines += [*[f"> - {note}" for note in notes], "", *markdown_table(report.tables["overview"])]
    if figure_files:
        lines += ["## Charts", ""]
        for figure in report.figures:
            svg, png = figure_files[figure.key]
            lines += [
                f"![{figure.title}]({svg.relative_to(out).as_posix()})",
                f"([PNG]({png.relative_to(out).as_posix()}))",
                "",
            ]
    for _, heading, section_tables in report.sections:
        lines += [f"## {heading}", ""]
        for table in section_tables:
            lines += markdown_table(table)
    lines += ["## Run directories", "", *[f"- {line}" for line in describe_sources(report.data)], ""]
    return "\n".join(lines)


def _write(path: Path, text: str, secrets: list[str]) -> Path:
    path.write_text(exports.scrub(text, secrets), encoding="utf-8")
    return path


def write(report: Report, out: Path) -> ReportFiles:
    """Write every report file into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    secrets = exports.secret_values()
    files = ReportFiles(out=out)
    figure_files = {f.key: plots.export(f, out / FIGURES_DIR) for f in report.figures}
    for key, (svg, png) in figure_files.items():
        _write(svg, svg.read_text(encoding="utf-8"), secrets)
        files.files[f"figure:{key}"] = png
    page = html.page(
        title=report.title,
        headline=report.headline,
        notes=report.notes,
        sources=describe_sources(report.data),
        main=report.tables["overview"],
        sections=report.sections,
        figures=report.figures,
        tasks=drilldown(report.data, report.traces, report.judged.verdicts if report.judged else None),
        vega_js=plots.javascript(),
    )
    files.files["html"] = _write(out / "report.html", page, secrets)
    files.files["markdown"] = _write(out / "report.md", markdown(report, figure_files, out), secrets)
    verdicts = report.judged.verdicts if report.judged else None
    files.files["csv"] = _write(out / "results.csv", exports.results_csv(report.data.records, verdicts), secrets)
    files.files["parquet"] = out / "results.parquet"
    exports.write_parquet(files.files["csv"], files.files["parquet"])
    board = exports.leaderboard(report.data, report.tables)
    board["generated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(board, indent=2, ensure_ascii=False, default=str)
    files.files["leaderboard"] = _write(out / "leaderboard.json", text, secrets)
    files.warnings = report.data.warnings
    return files


def build_report(
    run_dirs: Iterable[str | Path],
    out: str | Path | None = None,
    *,
    infra_errors_as_failures: bool = False,
    judge: ModelConfig | None = None,
) -> ReportFiles:
    """Build the report of one or several run directories into `out` (default: the only run directory);
    with `judge`, wrong answers get DAB's judged failure modes. Raises ReportError for input it cannot read."""
    dirs = [Path(d) for d in run_dirs]
    if out is None and len(dirs) != 1:
        raise ReportError("several run directories make one report: say where with --out DIR")
    data = load_runs(dirs, infra_errors_as_failures=infra_errors_as_failures)
    if not data.records:
        raise ReportError(f"{dirs[0]}: the run has no results yet (results.jsonl is empty)")
    target = Path(out) if out is not None else dirs[0]
    return write(assemble(data, judge=judge, out=target), target)
