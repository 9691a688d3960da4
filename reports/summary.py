"""The comparison summary of a run directory: one row per system × model, and paired tests.

Built from the typed run log only (`compare.runlog`). Every number is an average over the
result records of that row. Accuracy
is the benchmark's correctness metric (`exact_match`, or `correct` for DABstep/DAB),
averaged over the records that have it, with a 95% bootstrap confidence interval. Paired
comparisons use the tasks both rows answered: McNemar's test on correctness and a paired
bootstrap of the accuracy difference.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from pydantic import BaseModel
from rich.table import Table

from ..compare.runlog import Manifest, ResultRecord
from ..evaluators.statistics import bootstrap_ci, mcnemar, paired_bootstrap

PHASES = ("decision", "execute", "retry", "generate", "queue", "other")


class SummaryRow(BaseModel):
    system: str
    model: str
    tasks: int
    completed: int
    errors: int
    unavailable: int
    stopped_by_budget: int
    accuracy: float | None
    accuracy_ci: tuple[float, float] | None
    accuracy_by_type: dict[str, float]
    accuracy_n: int
    tos: float | None  # tool orchestration score, over tasks with a gold DAG
    rs: float | None  # rubric score of reports (needs --judge)
    rouge_l: float | None
    mean_latency_s: float
    mean_latency_by_phase_s: dict[str, float]
    mean_model_calls: float
    mean_tool_calls: float
    mean_input_tokens: float
    mean_output_tokens: float
    mean_reasoning_tokens: float
    total_cost_usd: float
    cost_per_correct_usd: float | None  # total cost / correct answers


class PairRow(BaseModel):
    first: str  # "system/model"
    second: str
    tasks: int  # answered by both
    accuracy_difference: float  # first − second
    difference_ci: tuple[float, float]
    bootstrap_p: float
    mcnemar_p: float


def _mean(values: list[float]) -> float | None:
    return mean(values) if values else None


def summarize(records: list[ResultRecord]) -> list[SummaryRow]:
    groups: dict[tuple[str, str], list[ResultRecord]] = defaultdict(list)
    for record in records:
        groups[(record.system, record.model)].append(record)
    return [_row(system, model, rows) for (system, model), rows in sorted(groups.items())]


def correctness(record: ResultRecord) -> float | None:
    """The benchmark's correctness metric: `exact_match`, or `correct` (DABstep, DAB)."""
    return record.scores.get("exact_match", record.scores.get("correct"))


def _score_mean(rows: list[ResultRecord], metric: str) -> float | None:
    return _mean([v for v in (r.scores.get(metric) for r in rows) if v is not None])


def _phase_latency(record: ResultRecord, phase: str) -> float:
    totals = record.latency_by_phase.get(phase)
    return totals.latency_s if totals else 0.0


def _row(system: str, model: str, rows: list[ResultRecord]) -> SummaryRow:
    scored = [r for r in rows if correctness(r) is not None]
    by_type: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        by_type[r.question_type].append(correctness(r))
    statuses = [r.status for r in rows]
    accuracy = bootstrap_ci([correctness(r) for r in scored]) if len(scored) > 1 else None
    correct = sum(correctness(r) == 1.0 for r in scored)
    total_cost = sum(r.usage.cost_usd for r in rows)
    return SummaryRow(
        system=system,
        model=model,
        tasks=len(rows),
        completed=statuses.count("completed"),
        errors=statuses.count("error"),
        unavailable=statuses.count("data_unavailable"),
        stopped_by_budget=sum(s in ("max_steps", "max_tokens", "time_limit") for s in statuses),
        accuracy=_mean([correctness(r) for r in scored]),
        accuracy_ci=(accuracy.low, accuracy.high) if accuracy else None,
        accuracy_by_type={t: mean(v) for t, v in sorted(by_type.items())},
        accuracy_n=len(scored),
        tos=_score_mean(rows, "tos"),
        rs=_score_mean(rows, "rs"),
        rouge_l=_score_mean(rows, "rougeL_f"),
        mean_latency_s=mean(r.latency_s for r in rows),
        mean_latency_by_phase_s={p: mean(_phase_latency(r, p) for r in rows) for p in PHASES},
        mean_model_calls=mean(r.model_calls for r in rows),
        mean_tool_calls=mean(len(r.tool_calls) for r in rows),
        mean_input_tokens=mean(r.usage.input_tokens for r in rows),
        mean_output_tokens=mean(r.usage.output_tokens for r in rows),
        mean_reasoning_tokens=mean(r.usage.reasoning_tokens for r in rows),
        total_cost_usd=total_cost,
        cost_per_correct_usd=total_cost / correct if correct else None,
    )


def pairwise(records: list[ResultRecord]) -> list[PairRow]:
    """Every pair of system/model rows, compared on the tasks (and epochs) both have a verdict for."""
    verdicts: dict[str, dict[tuple[str, int], float]] = defaultdict(dict)
    for r in records:
        verdict = correctness(r)
        if verdict is not None:
            verdicts[f"{r.system}/{r.model}"][(r.task_id, r.epoch)] = verdict
    pairs = []
    names = sorted(verdicts)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            common = sorted(verdicts[first].keys() & verdicts[second].keys())
            if len(common) < 2:
                continue
            a = [verdicts[first][k] for k in common]
            b = [verdicts[second][k] for k in common]
            paired = paired_bootstrap(a, b)
            pairs.append(
                PairRow(
                    first=first,
                    second=second,
                    tasks=len(common),
                    accuracy_difference=paired.mean_difference,
                    difference_ci=(paired.low, paired.high),
                    bootstrap_p=paired.p_value,
                    mcnemar_p=mcnemar([x == 1.0 for x in a], [y == 1.0 for y in b]).p_value,
                )
            )
    return pairs


def _num(value: float) -> str:
    return "–" if value != value else f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"  # NaN → –


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


COLUMNS = [
    ("system", lambda r: r.system),
    ("model", lambda r: r.model),
    ("tasks", lambda r: str(r.tasks)),
    ("completed", lambda r: str(r.completed)),
    ("errors", lambda r: str(r.errors)),
    ("budget stops", lambda r: str(r.stopped_by_budget)),
    ("accuracy", lambda r: f"{_fmt(r.accuracy)} (n={r.accuracy_n})"),
    ("95% CI", lambda r: "–" if r.accuracy_ci is None else f"[{r.accuracy_ci[0]:.3f}, {r.accuracy_ci[1]:.3f}]"),
    ("EX single", lambda r: _fmt(r.accuracy_by_type.get("single_choice"))),
    ("EX multi", lambda r: _fmt(r.accuracy_by_type.get("multiple_choice"))),
    ("factoid", lambda r: _fmt(r.accuracy_by_type.get("factoid"))),
    ("TOS", lambda r: _fmt(r.tos)),
    ("RS", lambda r: _fmt(r.rs)),
    ("ROUGE-L", lambda r: _fmt(r.rouge_l)),
    ("latency s", lambda r: _fmt(r.mean_latency_s, 1)),
    ("model calls", lambda r: _fmt(r.mean_model_calls, 1)),
    ("tool calls", lambda r: _fmt(r.mean_tool_calls, 1)),
    ("tokens in/out", lambda r: f"{r.mean_input_tokens:.0f}/{r.mean_output_tokens:.0f}"),
    ("cost $", lambda r: f"{r.total_cost_usd:.4f}"),
    ("$ per correct", lambda r: "–" if r.cost_per_correct_usd is None else f"{r.cost_per_correct_usd:.4f}"),
]


# The terminal gets the headline numbers in short columns; summary.md has them all.
CONSOLE_COLUMNS = [
    ("system", lambda r: r.system),
    ("model", lambda r: r.model),
    ("tasks", lambda r: str(r.tasks)),
    ("done", lambda r: str(r.completed)),
    ("err", lambda r: str(r.errors)),
    ("acc", lambda r: _fmt(r.accuracy, 2)),
    ("s/task", lambda r: _fmt(r.mean_latency_s, 1)),
    ("calls", lambda r: _fmt(r.mean_model_calls, 1)),
    ("$", lambda r: f"{r.total_cost_usd:.4f}"),
]


def rich_table(rows: list[SummaryRow]) -> Table:
    table = Table(title="Comparison (means per task; $ is the total)")
    for name, _ in CONSOLE_COLUMNS:
        table.add_column(name, justify="left" if name in ("system", "model") else "right")
    for row in rows:
        table.add_row(*(cell(row) for _, cell in CONSOLE_COLUMNS))
    return table


CI_METRICS: dict[str, Any] = {
    "latency s": lambda r: r.latency_s,
    "model calls": lambda r: r.model_calls,
    "input tokens": lambda r: r.usage.input_tokens,
    "output tokens": lambda r: r.usage.output_tokens,
    "cost $": lambda r: r.usage.cost_usd,
    "TOS": lambda r: r.scores.get("tos"),
    "RS": lambda r: r.scores.get("rs"),
}


def confidence_lines(records: list[ResultRecord]) -> list[str]:
    """Mean [95% bootstrap CI] of every per-task metric of every row."""
    groups: dict[str, list[ResultRecord]] = defaultdict(list)
    for r in records:
        groups[f"{r.system}/{r.model}"].append(r)
    lines = ["| row | " + " | ".join(CI_METRICS) + " |", "|" + "---|" * (len(CI_METRICS) + 1)]
    for name, rows in sorted(groups.items()):
        cells = []
        for metric in CI_METRICS.values():
            values = [v for v in (metric(r) for r in rows) if v is not None]
            mean_, low, high = bootstrap_ci(values)
            cells.append("–" if not values else f"{_num(mean_)} [{_num(low)}, {_num(high)}]")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def markdown(
    rows: list[SummaryRow],
    manifest: Manifest,
    pairs: list[PairRow] | None = None,
    records: list[ResultRecord] | None = None,
    benchmark_lines: list[str] | None = None,
) -> str:
    """summary.md; `benchmark_lines` is the benchmark's own section (`Benchmark.report_lines`)."""
    m = manifest
    budgets = m.budgets.model_dump()
    lines = [
        f"# Run summary: {m.benchmark}",
        "",
        f"- started {m.started_at}, finished {m.finished_at}, status {m.status}",
        f"- suite {m.suite_version}, git {m.git.sha[:12]}",
        f"- tasks {len(m.task_ids)}, epochs {m.config.get('epochs')}, budgets {budgets}",
        "",
        "| " + " | ".join(name for name, _ in COLUMNS) + " |",
        "|" + "|".join("---" for _ in COLUMNS) + "|",
    ]
    lines += ["| " + " | ".join(cell(row) for _, cell in COLUMNS) + " |" for row in rows]
    lines += ["", "## Mean latency by phase (seconds per task)", "", "| system | model | " + " | ".join(PHASES) + " |"]
    lines.append("|" + "|".join("---" for _ in range(len(PHASES) + 2)) + "|")
    for row in rows:
        phases = " | ".join(_fmt(row.mean_latency_by_phase_s[p], 2) for p in PHASES)
        lines.append(f"| {row.system} | {row.model} | {phases} |")
    if records:
        lines += ["", "## Means with 95% bootstrap confidence intervals (per task)", "", *confidence_lines(records)]
    if benchmark_lines:
        lines += ["", *benchmark_lines]
    if pairs:
        lines += ["", "## Paired comparisons (tasks both answered)", ""]
        lines += [
            "| first | second | tasks | accuracy difference | 95% CI | bootstrap p | McNemar p |",
            "|---|---|---|---|---|---|---|",
        ]
        for p in pairs:
            ci = f"[{p.difference_ci[0]:+.3f}, {p.difference_ci[1]:+.3f}]"
            lines.append(
                f"| {p.first} | {p.second} | {p.tasks} | {p.accuracy_difference:+.3f} | {ci} | "
                f"{p.bootstrap_p:.3f} | {p.mcnemar_p:.3f} |"
            )
    lines += [
        "",
        "accuracy = the benchmark's correctness metric (exact match; `correct` for DABstep/DAB), with a 95%",
        "bootstrap CI. TOS = tool orchestration score against the gold DAG. RS = rubric score (needs --judge).",
        "'queue' = waiting for the model (the embedded model runs one call at a time); 'other' = wall time",
        "outside any model or tool call. Overlapping steps share their time (no instant counts twice).",
    ]
    return "\n".join(lines) + "\n"
