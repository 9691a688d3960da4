"""What users look for on the command line: registered names never cut (piped or in a narrow terminal),
task ids (`compare tasks --json` and `--ids`), one name for the task files (`--tasks-path`, the old names
hidden aliases), and why failed units failed, grouped, at the end of a run."""

import io
import json
import os
import re
import shlex
import socket
import subprocess

import pytest
from rich.console import Console
from typer.testing import CliRunner

from data_agent_compare.cli.commands import common
from data_agent_compare.cli.commands.systems import SystemsOptions, systems
from data_agent_compare.cli.main import app, failure_causes

from helpers import FIXTURES, compare_command, load_tasks, read_records

runner = CliRunner()


@pytest.mark.parametrize(("command", "key"), [("systems", "name"), ("benchmarks", "name"), ("models", "alias")])
def test_listing_piped_through_cat_keeps_every_name_whole(command, key):
    names = [row[key] for row in json.loads(runner.invoke(app, [command, "--json"]).output)]
    shell = " ".join(shlex.quote(part) for part in compare_command(command)) + " | cat"
    env = {**os.environ, "COLUMNS": "80"}
    piped = subprocess.run(shell, shell=True, capture_output=True, text=True, env=env, timeout=120)
    assert piped.returncode == 0, piped.stderr
    words = {word.strip("│┃|") for line in piped.stdout.splitlines() for word in line.split()}
    assert [name for name in names if name not in words] == []
    assert "langgraph_plan_execute" in words or command != "systems"
    if command == "systems":  # a row is one line, as wide as it is
        described = [row["description"] for row in json.loads(runner.invoke(app, [command, "--json"]).output)]
        assert all(description in piped.stdout for description in described)


def test_listing_in_a_narrow_terminal_keeps_every_name_whole(monkeypatch):
    names = [row["name"] for row in json.loads(runner.invoke(app, ["systems", "--json"]).output)]
    screen = io.StringIO()
    monkeypatch.setattr(common, "output", Console(file=screen, force_terminal=True, width=40, color_system=None))
    systems(SystemsOptions())
    words = {word.strip("│┃|") for line in screen.getvalue().splitlines() for word in line.split()}
    assert [name for name in names if name not in words] == []


def test_tasks_lists_every_task_id_in_json_and_one_a_line_with_ids():
    ids = [task.id for task in load_tasks("bundled")]
    listed = runner.invoke(app, ["tasks", "--benchmark", "bundled", "--json"])
    assert listed.exit_code == 0 and json.loads(listed.output)["ids"] == ids
    lines = runner.invoke(app, ["tasks", "--benchmark", "bundled", "--ids"]).output.splitlines()
    assert [line.split("\t")[0] for line in lines] == ids
    assert lines[0].split("\t")[1:] == [load_tasks("bundled")[0].level or "-", load_tasks("bundled")[0].question_type]


def test_task_files_are_given_with_tasks_path_everywhere_and_the_old_names_still_work():
    for command in ("tasks", "score"):
        shown = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output
        assert "--tasks-path" in shown and "--path " not in shown and "--tasks " not in shown
    folder = str(FIXTURES / "dabstep")
    new = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--tasks-path", folder, "--json"])
    old = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--path", folder, "--json"])
    assert new.exit_code == old.exit_code == 0 and json.loads(new.output) == json.loads(old.output)


def test_failed_units_are_grouped_by_their_first_error_line():
    (base,) = read_records(FIXTURES / "report_run")[:1]
    refused = "Connection refused (http://127.0.0.1:9/v1/chat/completions)\nTraceback follows"
    failed = [base.model_copy(update={"status": "infra_error", "error": refused, "task_id": f"T{i}"}) for i in range(5)]
    failed.append(base.model_copy(update={"status": "error", "error": "KeyError: 'rows'"}))
    assert failure_causes(failed, {base.model: "http://127.0.0.1:9/v1"}) == [
        "5 units: infra_error: Connection refused (http://127.0.0.1:9/v1/chat/completions) (http://127.0.0.1:9/v1)",
        "1 unit: error: KeyError: 'rows'",
    ]
    many = [base.model_copy(update={"status": "error", "error": f"problem {i}"}) for i in range(7)]
    assert failure_causes(many)[-1] == "… and 2 other cause(s) in results.jsonl"


def test_a_run_against_an_unreachable_base_url_ends_by_naming_why_with_the_url(tmp_path):
    with socket.socket() as probe:  # a loopback port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = tmp_path / "once.yaml"
    config.write_text("retries:\n  max_attempts: 1\n")
    url = f"http://127.0.0.1:{port}/v1"
    flags = ["--models", "openai-compatible:x", "--base-url", url, "--workflows", "tool_use", "--limit", "2"]
    result = runner.invoke(app, [*flags, "--config", str(config), "--out", str(tmp_path / "run")])
    assert result.exit_code == 1
    said = result.output.replace("\n", " ")
    assert re.search(rf"2 units: infra_error: .*Connection refused.* \({re.escape(url)}\)", said), said
