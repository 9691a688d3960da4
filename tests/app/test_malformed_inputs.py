"""Malformed benchmark files stop `compare` before any model call: exit status 2, an error naming
the file, the record and the field, and no run directory."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.app.cli import app

from helpers import FIXTURES, postgres_bin_dir_or_skip

runner = CliRunner()


def run_compare(benchmark: str, tasks_path: Path, out: Path):
    flags = ["--benchmark", benchmark, "--tasks-path", str(tasks_path), "--out", str(out)]
    # an endpoint nobody listens on: any model call would fail, so exit 2 proves none was made
    model = ["--models", "openai-compatible:never-called", "--base-url", "http://127.0.0.1:9/v1"]
    return runner.invoke(app, [*flags, *model])


def fdabench_copy(tmp_path: Path, edit) -> Path:
    folder = tmp_path / "fdabench"
    folder.mkdir()
    lines = (FIXTURES / "fdabench/test_multichoice.jsonl").read_text().splitlines()
    (folder / "test_multichoice.jsonl").write_text("\n".join(edit(lines)) + "\n")
    return folder


def with_field(line: str, field: str, value) -> str:
    record = json.loads(line)
    if value is None:
        del record[field]
    else:
        record[field] = value
    return json.dumps(record)


CASES = {
    "truncated JSONL line": lambda lines: [lines[0], lines[1][:80]],
    "wrong literal": lambda lines: [lines[0], with_field(lines[1], "correct_answer", "['C'")],
    "missing field": lambda lines: [with_field(lines[0], "query", None)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_fdabench_file_exits_2_naming_file_line_and_field(tmp_path, case):
    folder = fdabench_copy(tmp_path, CASES[case])
    result = run_compare("fdabench", folder, tmp_path / "run")
    assert result.exit_code == 2, result.output
    assert "test_multichoice.jsonl:" in result.output
    if case != "truncated JSONL line":
        assert {"wrong literal": "correct_answer", "missing field": "query"}[case] in result.output
    assert not (tmp_path / "run").exists()


def dab_copy(tmp_path: Path) -> Path:
    dataset = tmp_path / "query_bookreview"
    shutil.copytree(FIXTURES / "dab/query_bookreview", dataset)
    return dataset


def test_unknown_db_type_exits_2(tmp_path):
    dataset = dab_copy(tmp_path)
    config = dataset / "db_config.yaml"
    config.write_text(config.read_text().replace("db_type: sqlite", "db_type: oracle"))
    result = run_compare("dab", dataset, tmp_path / "run")
    assert result.exit_code == 2
    assert "db_config.yaml" in result.output and "db_type" in result.output
    assert not (tmp_path / "run").exists()


def test_unreadable_dump_exits_2_naming_the_dump_and_its_line(tmp_path):
    postgres_bin_dir_or_skip()
    dataset = dab_copy(tmp_path)
    dump = dataset / "query_dataset/books_info.sql"
    dump.write_text(dump.read_text().replace("CREATE TABLE", "CREATE TABLEX", 1))
    result = run_compare("dab", dataset, tmp_path / "run")
    assert result.exit_code == 2, result.output
    assert "books_info.sql:" in result.output and "could not be restored" in result.output
    assert not (tmp_path / "run").exists()
