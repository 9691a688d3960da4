"""FDABench's published results (`fdabench-results`): the reference harness's result rows
(`FDABench/utils/test_utils.py`, `create_query_row`): its DuckDB file (table `query_results`) or the rows as
JSON / JSON Lines, matched to a task by (`instance_id`, `question_type`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..core.published import Entry, PublishedFormat, Sample, Submission, SubmissionError, load_json, text_lines
from ..core.safe_load import DocumentTooComplex
from ..core.safe_load import load_json as load_json_text


def recognizes(sample: Sample) -> bool:
    if sample.head.startswith(b"DUCK", 8):  # DuckDB's file header: 8 bytes of checksum, then the magic
        return True
    if {"instance_id", "question_type"} <= sample.first_keys:
        return True
    line = sample.first_line
    return '"instance_id"' in line and '"question_type"' in line and '"design_pattern"' in line


def read_results(path: Path) -> Submission:
    rows = _rows(path)
    entries = []
    for number, row in enumerate(rows):
        where = f"row {number}"
        if not isinstance(row, dict) or not row.get("instance_id") or not row.get("question_type"):
            raise SubmissionError(f"{path}: {where}: expected a result row with instance_id and question_type")
        record = {"instance_id": str(row["instance_id"]), "question_type": str(row["question_type"])}
        if row["question_type"] in ("single_choice", "multiple_choice"):
            record["selected_answer"] = _text_field(path, where, row, "selected_answer")
        else:
            record["generated_report"] = _text_field(path, where, row, "report")
        tools = row.get("tools_executed")
        if tools:
            record["tools_executed"] = tools
        model = str(row["model"]) if row.get("model") else None
        run = "/".join(str(row[k]) for k in ("design_pattern", "model") if row.get(k)) or None
        published = {k: row[k] for k in ("rouge1", "rouge2", "rougeL", "tool_recall") if isinstance(row.get(k), float)}
        entries.append(Entry(where, record, run=run, model=model, published=published))
    if not entries:
        raise SubmissionError(f"{path}: no result rows")
    return Submission("fdabench-results", entries)


def _text_field(path: Path, where: str, row: dict[str, Any], name: str) -> str:
    value = row.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise SubmissionError(f"{path}: {where}: field {name!r}: expected text, got {type(value).__name__}")
    return value


def _rows(path: Path) -> list[Any]:
    with path.open("rb") as file:
        head = file.read(16)
    if head[8:12] == b"DUCK":
        import duckdb

        try:
            with duckdb.connect(str(path), read_only=True) as con:
                cursor = con.execute("SELECT * FROM query_results")
                names = [column[0] for column in cursor.description]
                return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
        except duckdb.Error as bad:
            raise SubmissionError(f"{path}: not a FDABench result database (table query_results): {bad}") from None
    text = path.read_text(encoding="utf-8").lstrip("\ufeff")
    if text.lstrip().startswith("["):
        return load_json(path)
    rows = []
    for number, line in text_lines(path):
        try:
            rows.append(load_json_text(line))
        except json.JSONDecodeError as bad:
            raise SubmissionError(f"{path}: line {number}: not valid JSON ({bad.msg})") from None
        except DocumentTooComplex as bad:
            raise SubmissionError(f"{path}: line {number}: refused: {bad}") from None
    return rows


FDABENCH_RESULTS = PublishedFormat("fdabench-results", recognizes, read_results, has_runs=False)
