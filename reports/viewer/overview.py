"""A run's overview as the viewer shows it: the report's headline, notes, tables and charts, assembled by the
very code `compare report` runs (`reports.build.assemble`: the same figures, one code path), and one row per
unit for the filters (system, model, status, verdict, failure mode, warning, level, task)."""

from __future__ import annotations

from typing import Any

from ...core.runlog import ResultRecord, RunLog
from ..build import Report, assemble
from ..cells import ReportTable, answer_text, cut
from ..failures import failure_mode
from ..runs import load_comparison
from ..transcript import verdict


def overview(run: RunLog) -> dict[str, Any]:
    """Everything the run page draws, as JSON-ready values; raises ReportError for a run it cannot read."""
    run_dir = run.run_dir
    data = load_comparison([run])[0]
    if not data.records:
        return {
            "title": f"{data.benchmark} ({run_dir.name})",
            "headline": ["no results yet"],
            "notes": data.warnings,
            "main": None,
            "sections": [],
            "figures": [],
            "units": [],
        }
    report = assemble(data)
    return {
        "title": report.title,
        "headline": report.headline,
        "notes": report.notes,
        "main": table_json(report.tables["overview"]),
        "sections": _sections(report),
        "figures": [{"key": figure.key, "title": figure.title, "spec": figure.spec} for figure in report.figures],
        "units": [unit_row(record) for record in data.records],
    }


def _sections(report: Report) -> list[dict[str, Any]]:
    return [
        {"anchor": anchor, "heading": heading, "tables": [table_json(table) for table in tables]}
        for anchor, heading, tables in report.sections
    ]


def table_json(table: ReportTable) -> dict[str, Any]:
    """A table as texts; each row also says the system and model its cells link to, for the filters."""
    rows = []
    for row in table.rows:
        link = next((cell.link for cell in row if cell.link), None) or {}
        rows.append({"cells": [cell.text for cell in row], "system": link.get("system"), "model": link.get("model")})
    return {"key": table.key, "title": table.title, "columns": table.columns, "rows": rows, "note": table.note}


def unit_row(record: ResultRecord) -> dict[str, Any]:
    """One unit as the run page's units table lists it."""
    return {
        "task": record.task_id,
        "level": record.level,
        "system": record.system,
        "model": record.model,
        "epoch": record.epoch,
        "status": record.status,
        "verdict": verdict(record),
        "failure": failure_mode(record),
        "warnings": [warning.code for warning in record.warnings],
        "answer": cut(answer_text(record), 160),
        "latency_s": record.latency_s,
        "cost_usd": record.usage.cost_usd,
        "model_calls": record.model_calls,
    }
