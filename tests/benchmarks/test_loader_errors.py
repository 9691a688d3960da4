"""A malformed benchmark file is reported in full: every bad record with its file, line and field."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from data_agent_compare.core import TaskLoadError, TaskLoadErrors
from data_agent_compare.tasks.dab import load_dab
from data_agent_compare.tasks.dbgorilla import load_dbgorilla
from data_agent_compare.tasks.fdabench import load_fdabench

from helpers import FIXTURES

FDA_SINGLE = FIXTURES / "fdabench" / "test_singlechoice.jsonl"
GORILLA = FIXTURES / "dbgorilla" / "queries-sample.json"
BOOKREVIEW = FIXTURES / "dab" / "query_bookreview"


def fda_records() -> list[dict[str, Any]]:
    lines = FDA_SINGLE.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()][:3]


def write_fda(tmp_path: Path, rows: list[dict[str, Any] | str]) -> Path:
    file = tmp_path / "test_singlechoice.jsonl"
    file.write_text("\n".join(row if isinstance(row, str) else json.dumps(row) for row in rows) + "\n")
    return file


def located(error: TaskLoadErrors) -> list[tuple[str, int | None, str | None]]:
    return [(e.file, e.line, e.field) for e in error.errors]


def test_fdabench_reports_every_bad_record(tmp_path):
    first, second, third = fda_records()
    no_query = {key: value for key, value in second.items() if key != "query"}
    file = write_fda(tmp_path, [first, no_query, json.dumps(third)[:200]])
    with pytest.raises(TaskLoadErrors) as raised:
        load_fdabench(tmp_path)
    assert located(raised.value) == [(str(file), 2, "query"), (str(file), 3, None)]
    lines = str(raised.value).splitlines()
    assert lines[0] == "2 problems:"
    assert lines[1].startswith(f"{file}:2: field 'query'") and lines[2].startswith(f"{file}:3: invalid JSON")


def test_fdabench_duplicate_ids_are_collected_with_the_other_errors(tmp_path):
    first, second, _ = fda_records()
    file = write_fda(tmp_path, [first, first, second | {"question_type": "ranking"}])
    with pytest.raises(TaskLoadErrors) as raised:
        load_fdabench(tmp_path)
    assert located(raised.value) == [(str(file), 2, "task_id"), (str(file), 3, "question_type")]


def test_dbgorilla_reports_every_bad_record(tmp_path):
    records = json.loads(GORILLA.read_text(encoding="utf-8"))[:4]
    del records[1]["query"]
    records[3]["database_schema"] = "{"
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    with pytest.raises(TaskLoadErrors) as raised:
        load_dbgorilla(path)
    assert located(raised.value) == [(str(path), 1, "query"), (str(path), 3, "database_schema")]


def test_dab_reports_every_bad_query_folder(tmp_path):
    folder = tmp_path / "query_bookreview"
    shutil.copytree(BOOKREVIEW, folder, ignore=shutil.ignore_patterns("*.sql", "*.json"))
    shutil.copy(BOOKREVIEW / "query2" / "query.json", folder / "query2" / "query.json")
    with pytest.raises(TaskLoadErrors) as raised:
        load_dab(folder)
    assert [Path(e.file).parent.name for e in raised.value.errors] == ["query1", "query3"]
    assert all(e.message == "file not found" for e in raised.value.errors)


def test_a_single_bad_record_raises_the_old_error_unchanged(tmp_path):
    first, second, _ = fda_records()
    file = write_fda(tmp_path, [first, {key: value for key, value in second.items() if key != "query"}])
    with pytest.raises(TaskLoadError) as raised:
        load_fdabench(tmp_path)
    assert type(raised.value) is TaskLoadError
    assert str(raised.value) == f"{file}:2: field 'query': required field is missing"
