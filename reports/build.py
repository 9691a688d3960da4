"""`build_report`: run directories in, report files out (report.html, report.md with its figures,
results.csv, results.parquet, leaderboard.json). Everything comes from the typed run log, so a run written
by an older suite re-renders with this one; every text file passes `exports.scrub` on its way to disk."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..core.benchmark import ReportTableSpec, benchmark_class
from ..core.model import ModelConfig
from ..core.runlog import RunLog
from ..core.trace import Trace
from . import exports, failures, html, plots, tables
from .cells import ReportTable
from .costs import amortised_cost_per_task, cost_per_task, index_shares
from .drilldown import drilldown
from .judged import JudgedFailures, judge_failures, judged_table
from .runs import ReportData, ReportError, describe_sources, load_comparison
from .significance import leader_line, ranked, ranking_figures, significance_table
from .summary import SummaryRow, comparison_markdown, cost_check_lines, denominator_lines, markdown_safe, sandbox_lines
from .trajectories import trajectory_table

FIGURES_DIR = "figures"


@dataclass
class ReportFiles:
    out: Path
    files: dict[str, Path] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    rows: dict[str, list[SummaryRow]] = field(default_factory=dict)  # benchmark -> its summary rows


@dataclass
class Report:
    """Everything a report shows, before it is written; `parts` has one ReportData per benchmark."""

    data: ReportData
    title: str
    headline: list[str]
    notes: list[str]
    tables: dict[str, ReportTable]
    sections: list[tuple[str, str, list[ReportTable]]]
    figures: list[plots.Figure]
    traces: dict[tuple, Trace | None]
    judged: JudgedFailures | None = None
    parts: list[tuple[ReportData, dict[str, ReportTable], JudgedFailures | None]] = field(default_factory=list)

    def verdicts(self) -> dict | None:
        found = [judged.verdicts for _, _, judged in self.parts if judged is not None]
        return {key: v for verdicts in found for key, v in verdicts.items()} if found else None


def _headline(data: ReportData) -> list[str]:
    rows = data.summary()
    pairs = len(rows)
    lines = [
        f"{len(data.common_tasks)} tasks compared"
        + (f" (common to all {len(data.runs)} runs)" if len(data.runs) > 1 else "")
        + f" · {pairs} system × model rows · {len(data.records)} units (task runs)"
    ]
    lines += _accuracy_lines(data)
    lines += _cost_lines(data, rows)
    lines += [f"Cost sources differ: {line.removeprefix('- ')}" for line in cost_check_lines(data.records)]
    counts = {
        "errors": sum(r.errors for r in rows),
        "infrastructure errors": sum(r.infra_errors for r in rows),
        "budget stops": sum(r.stopped_by_budget for r in rows),
        "unavailable": sum(r.unavailable for r in rows),
    }
    lines.append("Counted apart: " + ", ".join(f"{n} {name}" for name, n in counts.items()))
    return lines


def _accuracy_lines(data: ReportData) -> list[str]:
    """The most accurate row by the figure the ranking reads (the tasks every row has a verdict for), "tied"
    meaning equal on those tasks, and its test against the runner-up."""
    scored = ranked(data)
    if not scored:
        return []
    figures = ranking_figures(data)
    best = f"{scored[0].system}/{scored[0].model}"
    accuracy, n, interval = figures[best]
    if accuracy <= 0:  # a 0-vs-0 tie crowns nobody
        return [f"Most accurate: none: no row answered correctly (accuracy 0.000 for all {len(scored)} rows, n={n})"]
    ci = "" if interval is None else f" [{interval[0]:.3f}, {interval[1]:.3f}]"
    tied = [f"{r.system}/{r.model}" for r in scored[1:] if figures[f"{r.system}/{r.model}"][0] == accuracy]
    shared = any(r.accuracy_n != n for r in scored)
    on = f" on the {n} tasks every row has a verdict for" if shared else ""
    lines = [
        f"Most accurate{on}: {best} {accuracy:.3f}{ci} (n={n} tasks)"
        + (f", tied with {_some(tied)} (the cheaper per task is named first)" if tied else "")
    ]
    leader = leader_line(data)
    return lines + ([leader] if leader else [])


def _cost_lines(data: ReportData, rows: list[SummaryRow]) -> list[str]:
    """Cheapest and fastest among the rows that answered at least one task correctly (a row that earned nothing
    is crowned for nothing), the cheapest among those whose every unit has a known cost (a row of unknown cost
    is never cheapest); a tie names every tied row."""
    spent, shares = [r for r in rows if r.units > r.unavailable], index_shares(data)
    earned = [r for r in spent if (r.accuracy or 0.0) > 0]
    priced = [r for r in spent if amortised_cost_per_task(r, shares) is not None]
    lines = []
    candidates = [r for r in priced if r in earned]
    if candidates:
        per_task = min(amortised_cost_per_task(r, shares) or 0.0 for r in candidates)  # index building amortised
        cheapest = [r for r in candidates if amortised_cost_per_task(r, shares) == per_task]
        own = cost_per_task(cheapest[0])
        beside = f" (with its index building; ${own:.5f} for the tasks alone)" if per_task != own else ""
        tied = " (tied)" if len(cheapest) > 1 else ""
        names = ", ".join(f"{r.system}/{r.model}" for r in cheapest)
        lines.append(f"Cheapest: {names}{tied} ${per_task:.5f} per task{beside}")
    elif priced:
        lines.append("Cheapest: none: no row of known cost answered any task correctly")
    unpriced = [f"{r.system}/{r.model}" for r in spent if r not in priced]
    if unpriced:
        lines.append(f"Cost unknown (not recorded; never counted as $0): {_some(unpriced)}")
    timed = [r for r in earned if r.mean_latency_s is not None]
    if timed:
        seconds = min(r.mean_latency_s or 0.0 for r in timed)
        fastest = ", ".join(f"{r.system}/{r.model}" for r in timed if r.mean_latency_s == seconds)
        lines.append(f"Fastest: {fastest} {seconds:.3f} s per task")
    return lines


def _declared(data: ReportData, kind: str) -> list[ReportTableSpec]:
    """The benchmark's declared tables of this kind."""
    return [spec for spec in benchmark_class(data.benchmark).report_tables if spec.kind == kind]


def _some(names: list[str], shown: int = 3) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def _notes(data: ReportData) -> list[str]:
    rows = data.summary()
    notes = [line.removeprefix("- ") for line in denominator_lines(rows, data.infra_errors_as_failures)]
    for run in data.runs:
        notes += [line.removeprefix("- ") for line in sandbox_lines(run.manifest, rows)]
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
    extra += [trajectory_table(data, traces, spec) for spec in _declared(data, "trajectory_statistics")]
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
        parts=[(data, found, judged)],
    )


def assemble_all(parts: list[ReportData], *, judge: ModelConfig | None = None, out: Path | None = None) -> Report:
    """One report over the runs of several benchmarks: the overview across them, then each benchmark's own
    section (its tables, significance, failures and charts, titled by the benchmark)."""
    if len(parts) == 1:
        return assemble(parts[0], judge=judge, out=out)
    each = [assemble(part, judge=judge, out=out) for part in parts]
    names = [part.benchmark for part in parts]
    headline = ["; ".join(f"{r.data.benchmark}: {r.headline[0]}" for r in each)]
    headline += [f"{r.data.benchmark}: {line}" for r in each for line in r.headline[1:-1]]
    sections, figures, found = [], [], {"overview": tables.across_benchmarks(parts)}
    for report in each:
        name = report.data.benchmark
        own = [report.tables["overview"], *[table for _, _, section in report.sections for table in section]]
        own = [_titled(table, name) for table in own]
        found |= {table.key: table for table in own}
        sections.append((f"benchmark-{name}", f"{name}", own))
        figures += [plots.titled(figure, name) for figure in report.figures]
    return Report(
        data=parts[0],
        title=f"Comparison report: {', '.join(names)} ({', '.join(r.run_dir.name for p in parts for r in p.runs)})",
        headline=headline,
        notes=_shared_notes(each),
        tables=found,
        sections=sections,
        figures=figures,
        traces={key: trace for r in each for key, trace in r.traces.items()},
        parts=[part for r in each for part in r.parts],
    )


def _shared_notes(each: list[Report]) -> list[str]:
    """Notes every benchmark's part has are said once; the others name their benchmark."""
    common = set.intersection(*(set(r.notes) for r in each))
    own = [f"{r.data.benchmark}: {note}" for r in each for note in r.notes if note not in common]
    return own + [note for note in each[0].notes if note in common]


def _titled(table: ReportTable, benchmark: str) -> ReportTable:
    """The table in a benchmark's section: its key and title name the benchmark."""
    return table.model_copy(update={"key": f"{benchmark}-{table.key}", "title": f"{benchmark}: {table.title}"})


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
    lines += ["## Run directories", "", *[f"- {line}" for line in _sources(report)], ""]
    return markdown_safe("\n".join(lines))


def _sources(report: Report) -> list[str]:
    return [line for data, _, _ in report.parts for line in describe_sources(data)]


def _verdicts(judged: JudgedFailures | None) -> dict | None:
    return judged.verdicts if judged else None


def _leaderboard(report: Report) -> dict:
    boards = [exports.leaderboard(data, tables) for data, tables, _ in report.parts]
    return boards[0] if len(boards) == 1 else {"benchmarks": boards}


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
        sources=_sources(report),
        main=report.tables["overview"],
        sections=report.sections,
        figures=report.figures,
        tasks=[task for data, _, judged in report.parts for task in drilldown(data, report.traces, _verdicts(judged))],
        vega_js=plots.javascript(),
    )
    files.files["html"] = _write(out / "report.html", page, secrets)
    files.files["markdown"] = _write(out / "report.md", markdown(report, figure_files, out), secrets)
    records = [record for data, _, _ in report.parts for record in data.records]
    files.files["csv"] = _write(out / "results.csv", exports.results_csv(records, report.verdicts()), secrets)
    files.files["parquet"] = out / "results.parquet"
    exports.write_parquet(files.files["csv"], files.files["parquet"])
    board = _leaderboard(report)
    board["generated_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    text = json.dumps(board, indent=2, ensure_ascii=False, default=str)
    files.files["leaderboard"] = _write(out / "leaderboard.json", text, secrets)
    rows = {data.benchmark: data.summary() for data, _, _ in report.parts}
    if len(report.parts) > 1 or len(report.data.runs) > 1:  # one run's summary.md is in its run directory
        summary = comparison_markdown(report.title, rows, _sources(report))
        files.files["summary"] = _write(out / "summary.md", summary, secrets)
    files.warnings = [warning for data, _, _ in report.parts for warning in data.warnings]
    files.rows = rows
    return files


def build_report(
    run_dirs: Iterable[str | Path | RunLog],
    out: str | Path | None = None,
    *,
    infra_errors_as_failures: bool = False,
    judge: ModelConfig | None = None,
    merge_runs: bool = False,
) -> ReportFiles:
    """Build the report of one or several run directories into `out` (default: the only run directory);
    with `judge`, wrong answers get their judged failure modes; with `merge_runs`, runs of a system × model run
    alike are one row (`runs.row_names`). Raises ReportError for input it cannot read.
    A run log already read (the end of a run hands over the one its summary read) is not read again."""
    given = list(run_dirs)
    dirs = [run.run_dir if isinstance(run, RunLog) else Path(run) for run in given]
    if out is None and len(dirs) != 1:
        raise ReportError("several run directories make one report: say where with --out DIR")
    parts = load_comparison(given, infra_errors_as_failures=infra_errors_as_failures, merge_runs=merge_runs)
    for data in parts:
        if not data.records:
            raise ReportError(f"{data.runs[0].run_dir}: the run has no results yet (results.jsonl is empty)")
    target = Path(out) if out is not None else dirs[0]
    return write(assemble_all(parts, judge=judge, out=target), target)
