"""The comparison summary of a run directory: one row per system × model.

Every number is an average over the result records (results.jsonl) of that row;
exact match is averaged only over tasks that have a gold answer of a choice/factoid type.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from pydantic import BaseModel
from rich.table import Table

PHASES = ("decision", "execute", "retry", "generate", "other")


class SummaryRow(BaseModel):
    system: str
    model: str
    tasks: int
    completed: int
    errors: int
    unavailable: int
    stopped_by_budget: int
    exact_match: float | None
    exact_match_by_type: dict[str, float]
    exact_match_n: int
    rouge_l: float | None
    mean_latency_s: float
    mean_latency_by_phase_s: dict[str, float]
    mean_model_calls: float
    mean_tool_calls: float
    mean_input_tokens: float
    mean_output_tokens: float
    total_cost_usd: float


def _mean(values: list[float]) -> float | None:
    return mean(values) if values else None


def summarize(records: list[dict[str, Any]]) -> list[SummaryRow]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        groups[(record["system"], record["model"])].append(record)
    return [_row(system, model, rows) for (system, model), rows in sorted(groups.items())]


def _row(system: str, model: str, rows: list[dict[str, Any]]) -> SummaryRow:
    scored = [r for r in rows if r["scores"].get("exact_match") is not None]
    by_type: dict[str, list[float]] = defaultdict(list)
    for r in scored:
        by_type[r["question_type"]].append(r["scores"]["exact_match"])
    statuses = [r["status"] for r in rows]
    return SummaryRow(
        system=system,
        model=model,
        tasks=len(rows),
        completed=statuses.count("completed"),
        errors=statuses.count("error"),
        unavailable=statuses.count("data_unavailable"),
        stopped_by_budget=sum(s in ("max_steps", "max_tokens", "time_limit") for s in statuses),
        exact_match=_mean([r["scores"]["exact_match"] for r in scored]),
        exact_match_by_type={t: mean(v) for t, v in sorted(by_type.items())},
        exact_match_n=len(scored),
        rouge_l=_mean([r["scores"]["rougeL_f"] for r in rows if "rougeL_f" in r["scores"]]),
        mean_latency_s=mean(r["latency_s"] for r in rows),
        mean_latency_by_phase_s={
            p: mean(r["latency_by_phase"].get(p, {}).get("latency_s", 0.0) for r in rows) for p in PHASES
        },
        mean_model_calls=mean(r["model_calls"] for r in rows),
        mean_tool_calls=mean(len(r["tool_calls"]) for r in rows),
        mean_input_tokens=mean(r["usage"]["input_tokens"] for r in rows),
        mean_output_tokens=mean(r["usage"]["output_tokens"] for r in rows),
        total_cost_usd=sum(r["usage"]["cost_usd"] for r in rows),
    )


def _fmt(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


COLUMNS = [
    ("system", lambda r: r.system),
    ("model", lambda r: r.model),
    ("tasks", lambda r: str(r.tasks)),
    ("completed", lambda r: str(r.completed)),
    ("errors", lambda r: str(r.errors)),
    ("budget stops", lambda r: str(r.stopped_by_budget)),
    ("EM", lambda r: f"{_fmt(r.exact_match)} (n={r.exact_match_n})"),
    ("EM single", lambda r: _fmt(r.exact_match_by_type.get("single_choice"))),
    ("EM multi", lambda r: _fmt(r.exact_match_by_type.get("multiple_choice"))),
    ("EM factoid", lambda r: _fmt(r.exact_match_by_type.get("factoid"))),
    ("ROUGE-L", lambda r: _fmt(r.rouge_l)),
    ("latency s", lambda r: _fmt(r.mean_latency_s, 1)),
    ("model calls", lambda r: _fmt(r.mean_model_calls, 1)),
    ("tool calls", lambda r: _fmt(r.mean_tool_calls, 1)),
    ("tokens in/out", lambda r: f"{r.mean_input_tokens:.0f}/{r.mean_output_tokens:.0f}"),
    ("cost $", lambda r: f"{r.total_cost_usd:.4f}"),
]


# The terminal gets the headline numbers in short columns; summary.md has them all.
CONSOLE_COLUMNS = [
    ("system", lambda r: r.system),
    ("model", lambda r: r.model),
    ("tasks", lambda r: str(r.tasks)),
    ("done", lambda r: str(r.completed)),
    ("err", lambda r: str(r.errors)),
    ("EM", lambda r: _fmt(r.exact_match, 2)),
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


def markdown(rows: list[SummaryRow], manifest: dict[str, Any]) -> str:
    m, config = manifest, manifest.get("config", {})
    lines = [
        f"# Run summary: {m.get('benchmark', '?')}",
        "",
        f"- started {m.get('started_at')}, finished {m.get('finished_at')}, status {m.get('status')}",
        f"- suite {m.get('suite_version')}, git {m.get('git', {}).get('sha', 'unknown')[:12]}",
        f"- tasks {len(m.get('task_ids', []))}, epochs {config.get('epochs')}, budgets {m.get('budgets')}",
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
    lines += [
        "",
        "EM = exact match over tasks with a gold choice/factoid answer (rules: evaluators/exact_match.py).",
        "'other' = wall time outside any model or tool call.",
    ]
    return "\n".join(lines) + "\n"
