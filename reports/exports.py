"""The machine-readable side of a report: results.csv and results.parquet (one row per record, flat),
leaderboard.json (one entry per system × model with counts, means and intervals), and the scrubbing every
report file passes through so that no credential reaches it."""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path
from typing import Any

import duckdb

from ..core.runlog import ResultRecord, UnitKey, redact_credentials, secret_forms
from ..core.sanitize import spreadsheet_cell
from .cells import ReportTable, answer_text
from .failures import failure_mode
from .judged import Verdict
from .runs import ReportData
from .summary import PHASES, correctness, phase_latency

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
MIN_SECRET_LENGTH = 8  # shorter values ("1", "true") would mask ordinary text


def secret_values(environ: dict[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names look like credentials, longest first."""
    environ = dict(os.environ if environ is None else environ)
    found = {v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(found, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """`text` with URL passwords and credential parameters masked, and every secret value replaced."""
    text = redact_credentials(text)
    for secret in secrets:
        for form in secret_forms(secret):  # as JSON, CSV and HTML escape it too
            text = text.replace(form, "***")
    return text


def result_row(record: ResultRecord) -> dict[str, Any]:
    row: dict[str, Any] = {
        "task_id": record.task_id,
        "benchmark": record.benchmark,
        "system": record.system,
        "model": record.model,
        "epoch": record.epoch,
        "level": record.level,
        "question_type": record.question_type,
        "status": record.status,
        "failure_mode": failure_mode(record),
        "correct": correctness(record),
        "answer": answer_text(record),
        "gold": ", ".join(record.gold) if isinstance(record.gold, list) else record.gold,
        "cost_usd": record.usage.cost_usd,  # empty when unknown (null in Parquet), never 0
        "input_tokens": record.usage.input_tokens,
        "output_tokens": record.usage.output_tokens,
        "reasoning_tokens": record.usage.reasoning_tokens,
        "latency_s": record.latency_s,
        "setup_s": record.setup_s,
        "model_calls": record.model_calls,
        "tool_calls": len(record.tool_calls),
        "failed_tool_calls": sum(not call.success for call in record.tool_calls),
        "error": record.error,
        "scoring_error": record.scoring_error,
        "trace_file": record.trace_file,
    }
    for phase in PHASES:  # empty (null in Parquet) when the phases were not timed: unknown, not 0
        row[f"latency_{phase}_s"] = phase_latency(record, phase)
    return row


def results_csv(records: list[ResultRecord], verdicts: dict[UnitKey, Verdict] | None = None) -> str:
    """One row per record; score columns (`score.<name>`) are the union over the records; with a
    judge's verdicts, `judged_mode` (DAB's modes for wrong answers)."""
    rows = [result_row(r) for r in records]
    if verdicts is not None:
        for row, record in zip(rows, records, strict=True):
            verdict = verdicts.get(record.key)
            row["judged_mode"] = (verdict.mode or "not judged") if verdict else None
    score_names = sorted({name for r in records for name in r.scores})
    for row, record in zip(rows, records, strict=True):
        row |= {f"score.{name}": record.scores.get(name) for name in score_names}
    columns = list(rows[0]) if rows else []
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows({name: spreadsheet_cell(value) for name, value in row.items()} for row in rows)  # no formulas
    return buffer.getvalue()


def write_parquet(csv_path: Path, parquet_path: Path) -> None:
    """Parquet from the (scrubbed) CSV through DuckDB: pyarrow cannot load beside numpy 1.x, which
    lotus-ai pins, and DuckDB is already the suite's."""
    connection = duckdb.connect()
    try:
        source = str(csv_path).replace("'", "''")
        target = str(parquet_path).replace("'", "''")
        connection.execute(
            f"COPY (SELECT * FROM read_csv('{source}', header=true, all_varchar=false, sample_size=-1)) "
            f"TO '{target}' (FORMAT parquet)"
        )
    finally:
        connection.close()


def leaderboard(data: ReportData, tables: dict[str, ReportTable]) -> dict[str, Any]:
    """Rows ranked by accuracy, with their denominators and intervals (the overview table's numbers)."""
    overview = tables["overview"]
    cells = {(row[0].text, row[1].text): row for row in overview.rows}
    index = {name: i for i, name in enumerate(overview.columns)}
    entries = []
    for row in data.summary():
        table_row = cells[(row.system, row.model)]

        def interval(column: str, table_row=table_row) -> dict[str, Any]:
            cell = table_row[index[column]]
            return {"mean": cell.value, "ci95": [cell.low, cell.high] if cell.low is not None else None, "n": cell.n}

        entries.append(
            {
                **row.model_dump(include={"system", "model", "tasks", "units", "completed", "errors", "infra_errors"}),
                "budget_stops": row.stopped_by_budget,
                "unavailable": row.unavailable,
                "scoring_errors": row.scoring_errors,
                "accuracy": interval("accuracy [95% CI]"),
                "cost_usd_per_task": interval("cost $/task [95% CI]"),
                "latency_s": interval("latency s [95% CI]"),
                "total_cost_usd": row.total_cost_usd if row.cost_complete else None,  # null: some cost unknown
                "cost_unknown_units": row.cost_unknown,
                "tos": row.tos,
                "rs": row.rs,
            }
        )
    entries.sort(key=lambda e: (-(e["accuracy"]["mean"] or -1.0), e["system"], e["model"]))
    return {
        "benchmark": data.benchmark,
        "runs": [str(run.run_dir) for run in data.runs],
        "common_tasks": len(data.common_tasks),
        "infra_errors_as_failures": data.infra_errors_as_failures,
        "ranking": "accuracy (mean over tasks), then system and model",
        "rows": entries,
    }
