"""Malformed benchmark files stop `compare` before any model call: exit status 2, an error naming
the file, the record and the field, and no run directory."""

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app

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


# ---------------------------------------------------------------- settings and files named in the error

NEVER_CALLED = ["--models", "openai-compatible:never-called", "--base-url", "http://127.0.0.1:9/v1"]


def config_file(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "run.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--max-steps", "0"], "budgets.max_steps"),
        (["--wall-time", "-1"], "budgets.wall_time_s"),
        (["--level", "bogus"], "--level bogus selects no task"),
        (["--question-type", "bogus"], "--question-type bogus selects no task"),
    ],
)
def test_bad_flags_exit_2_naming_the_setting(tmp_path, flags, named):
    result = runner.invoke(app, [*flags, *NEVER_CALLED, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("budgets: {max_step: 3}\n", "budgets.max_step"),
        ("tools: {sql_max_row: 5}\n", "tools.sql_max_row"),
        (b"limit: 3\n# caf\xe9\n", "not UTF-8 text: byte 0xe9 at offset 14"),
    ],
)
def test_bad_config_files_exit_2_naming_the_file_and_setting(tmp_path, text, named):
    path = config_file(tmp_path, text)
    result = runner.invoke(app, ["--config", str(path), *NEVER_CALLED, "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and named in result.output and "run.yaml" in result.output


@pytest.mark.parametrize(
    ("content", "named"),
    [(b"", "no tasks: the file is empty"), (b'{"id": "X"}\n\xc4\xff\n', "not UTF-8 text: byte 0xc4 at offset 12")],
)
def test_empty_or_binary_task_files_exit_2_naming_the_file(tmp_path, content, named):
    folder = tmp_path / "bundled"
    folder.mkdir()
    (folder / "tasks.jsonl").write_bytes(content)
    result = run_compare("bundled", folder, tmp_path / "run")
    assert result.exit_code == 2 and named in result.output and "tasks.jsonl" in result.output


def test_a_model_alias_with_a_misspelt_or_malformed_entry_is_named(tmp_path):
    from data_agent_compare.engine.config import ConfigError, load_model_table

    models = tmp_path / "models.yaml"
    models.write_text("models:\n  fast:\n    provider: openrouter\n    model_id: x/y\n    temprature: 0.2\n")
    with pytest.raises(ConfigError, match=r"model 'fast': field 'temprature': Extra inputs are not permitted"):
        load_model_table(models)
    models.write_text("models:\n  fast: openrouter/x\n")
    with pytest.raises(ConfigError, match=r"model 'fast': expected a mapping"):
        load_model_table(models)


def test_resume_of_a_corrupt_manifest_exits_2_naming_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "manifest.json").write_text('{"suite_version": "0.1.0", "config": ')
    result = runner.invoke(app, ["--resume", "--out", str(run)])
    assert result.exit_code == 2 and "manifest.json" in result.output and "Traceback" not in result.output


def test_score_writes_every_row_it_can_and_names_the_bad_lines(tmp_path):
    dev = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]
    lines = [json.dumps({"task_id": t["task_id"], "agent_answer": t["answer"]}).encode() for t in dev]
    lines.insert(1, b'{"task_id": "5", "agent_answer": "caf\xe9"}')
    predictions, out = tmp_path / "predictions.jsonl", tmp_path / "scores.jsonl"
    predictions.write_bytes(b"\n".join(lines) + b"\n")
    flags = ["score", "--benchmark", "dabstep", "--tasks", str(FIXTURES / "dabstep")]
    result = runner.invoke(app, [*flags, "--predictions", str(predictions), "--out", str(out)])
    assert result.exit_code == 1
    assert f"{predictions}:2" in result.output and "byte 0xe9 at offset" in result.output
    assert len(out.read_text().splitlines()) == len(dev)  # every readable record scored and written

    predictions.write_text("")
    empty = runner.invoke(app, [*flags, "--predictions", str(predictions)])
    assert empty.exit_code == 2 and "no predictions" in empty.output
