"""Inputs an attacker found crashing or passing (issue 19) are refused before any model call: exit status 2,
one line naming the file, record, field or flag, no traceback; a report never writes over a running run's
files; `list_files` lists what it can and marks a dangling link."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core.runlog import RunDirLock
from data_agent_compare.tools.files import ListFilesTool

from helpers import FIXTURES, ROOT

runner = CliRunner()
# an endpoint nobody listens on: any model call would fail, so exit 2 proves none was made
NEVER_CALLED = ["--models", "openai-compatible:never-called", "--base-url", "http://127.0.0.1:9/v1"]


def refused(result, *named: str) -> None:
    """Exit 2, every name in the message, no traceback."""
    assert result.exit_code == 2, result.output
    for name in named:
        assert name in result.output, (name, result.output)
    assert "Traceback" not in result.output


def compare(*flags: str) -> object:
    return runner.invoke(app, list(flags))


def test_score_with_an_out_folder_is_refused_naming_it(tmp_path):
    dev = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]
    predictions = tmp_path / "predictions.jsonl"
    rows = [json.dumps({"task_id": t["task_id"], "agent_answer": t["answer"]}) for t in dev]
    predictions.write_text("\n".join(rows) + "\n")
    folder = tmp_path / "scores"
    folder.mkdir()
    result = compare("score", "--benchmark", "dabstep", "--tasks", str(FIXTURES / "dabstep"),
                     "--predictions", str(predictions), "--out", str(folder))  # fmt: skip
    refused(result, "--out", str(folder), "folder")


def test_a_plugin_that_raises_at_import_is_refused_naming_it(tmp_path):
    plugin = tmp_path / "broken_plugin.py"
    plugin.write_text("x = 1\nraise RuntimeError('the plugin is broken')\n")
    result = compare("--plugin", str(plugin), *NEVER_CALLED, "--out", str(tmp_path / "run"))
    refused(result, "broken_plugin.py", "failed at import", "the plugin is broken")
    refused(compare("systems", "--plugin", str(plugin)), "broken_plugin.py", "failed at import")
    assert not (tmp_path / "run").exists()


def models_config(tmp_path: Path, alias: str, models: str, extra: str = "") -> Path:
    table = tmp_path / "models.yaml"
    table.write_text(models)
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {table}\nmodels: [{alias}]\n{extra}")
    return config


@pytest.mark.parametrize(
    ("models", "named"),
    [
        ("models:\n  cheap: {provider: openrouter, model_id: x/y, price: {input_per_mtok: -1}}\n", "input_per_mtok"),
        ("models:\n  cheap: {provider: openai-compatible, model_id: m}\n", "base_url"),
        ("models:\n  cheap: {provider: openai-compatible, model_id: m, base_url: 'notaurl'}\n", "base_url"),
    ],
    ids=["negative price", "openai-compatible alias without base_url", "alias base_url no URL"],
)
def test_a_bad_model_alias_is_refused_naming_the_alias_and_field(tmp_path, models, named):
    config = models_config(tmp_path, "cheap", models)
    result = compare("--config", str(config), "--out", str(tmp_path / "run"))
    refused(result, "'cheap'", named)
    assert not (tmp_path / "run").exists()


def test_max_steps_true_is_no_number_of_steps(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("budgets: {max_steps: true}\n")
    refused(compare("--config", str(config), *NEVER_CALLED, "--out", str(tmp_path / "run")), "budgets.max_steps")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--models", "local", "--base-url", "http://127.0.0.1:9/v1"], "--base-url"),
        (["--models", "openai-compatible:m", "--base-url", "notaurl"], "--base-url"),
        (["--models", "openai-compatible:m", "--base-url", "ftp://127.0.0.1/v1"], "--base-url"),
    ],
    ids=["base-url with local", "base-url notaurl", "base-url not http"],
)
def test_a_base_url_that_serves_no_model_or_is_no_url_is_refused(tmp_path, flags, named):
    refused(compare(*flags, "--out", str(tmp_path / "run")), named)
    assert not (tmp_path / "run").exists()


def dbgorilla_copy(tmp_path: Path, edit) -> Path:
    records = json.loads((FIXTURES / "dbgorilla/queries-sample.json").read_text())
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(edit(records)))
    return path


def test_a_dbgorilla_file_with_a_duplicate_index_is_refused_naming_both_records(tmp_path):
    path = dbgorilla_copy(tmp_path, lambda records: [*records[:3], {**records[1]}])
    result = compare("--benchmark", "dbgorilla", "--tasks-path", str(path), *NEVER_CALLED, "--out", str(tmp_path / "r"))
    refused(result, "queries.json", "index", "duplicate")
    refused(compare("tasks", "--benchmark", "dbgorilla", "--path", str(path)), "queries.json", "index")


def test_a_30_mb_question_is_refused_before_any_model_call(tmp_path):
    def huge(records):
        records[0]["query"]["corresponding_natural_language_query"] = "How many? " * 3_000_000
        return records[:2]

    path = dbgorilla_copy(tmp_path, huge)
    result = compare("--benchmark", "dbgorilla", "--tasks-path", str(path), *NEVER_CALLED, "--out", str(tmp_path / "r"))
    refused(result, "dbgorilla-6", "'question'", "budgets.max_tokens")
    assert not (tmp_path / "r").exists()


def test_an_out_that_is_a_file_is_refused_without_suggesting_resume(tmp_path):
    file = tmp_path / "results.txt"
    file.write_text("not a run\n")
    result = compare(*NEVER_CALLED, "--out", str(file))
    refused(result, "--out", str(file), "is a file")
    assert "--resume" not in result.output and file.read_text() == "not a run\n"


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs setpriv to read as an unprivileged user")
def test_an_unreadable_dabstep_context_file_is_flagged_by_compare_tasks(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("runs `compare tasks` as root without its right to read any file: needs root")
    folder = tmp_path / "dabstep"
    shutil.copytree(FIXTURES / "dabstep", folder)
    try:
        (folder / "fees.json").chmod(0o000)
        # Root reads a mode-000 file anyway: `compare tasks` runs without the capabilities that let it (still
        # root, so a checkout in a private folder, such as mktemp's, stays importable).
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m",
                   "data_agent_compare.cli", "tasks", "--benchmark", "dabstep", "--path", str(folder)]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "fees.json" in done.stderr and "cannot be read" in done.stderr and "Traceback" not in done.stderr


def test_list_files_lists_what_it_can_and_marks_a_dangling_link(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data.csv").write_text("a,b\n1,2\n")
    (tmp_path / "gone.csv").symlink_to(tmp_path / "deleted.csv")
    result = ListFilesTool(tmp_path).run({})
    assert result.success
    assert "sub/data.csv (8 bytes)" in result.content
    assert "gone.csv (dangling link" in result.content


def test_a_report_of_a_running_run_never_writes_over_its_files(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "report_run", run)
    (run / "summary.md").write_text("the run's own summary\n")
    with RunDirLock(run):  # what a running `compare` holds
        busy = compare("report", str(run))
        refused(busy, str(run), "running compare", "--out")
        elsewhere = compare("report", str(run), "--out", str(tmp_path / "now"))
        assert elsewhere.exit_code == 0, elsewhere.output
    assert (run / "summary.md").read_text() == "the run's own summary\n"
    assert not (run / "report.html").exists()
    assert (tmp_path / "now" / "summary.md").is_file() and (tmp_path / "now" / "report.html").is_file()
