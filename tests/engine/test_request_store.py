"""A run keeps every model call's request in conversations.sqlite as the call finishes: under threads and worker
processes alike, one stored request per call of each record, a `kill -9` losing at most the calls in flight, and
the store small beside the traces on a 1,000-unit run."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from data_agent_compare.core.conversations import read_requests, store_sizes

from helpers import compare_command, quiz_questions, read_records, write_quiz_run


def run(tmp_path: Path, questions: int, settings: str, **environment: str) -> subprocess.CompletedProcess[str]:
    files = write_quiz_run(tmp_path, quiz_questions(questions), settings, kill_at_call="exactly")
    command = compare_command("run", "--config", str(files["config"]), "--out", str(tmp_path / "run"))
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, cwd=tmp_path, env={**os.environ, **environment}
    )


def finished_calls(run_dir: Path) -> list[dict]:
    """calls.jsonl's lines of finished calls (not a request being sent, not the calls left in flight)."""
    lines = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text().splitlines() if line.strip()]
    return [line for line in lines if not line.get("sent") and not line.get("in_flight")]


@pytest.mark.parametrize("executor", ["thread", "process"])
def test_every_call_of_every_record_has_its_request_stored_scripted(tmp_path: Path, executor: str) -> None:
    done = run(tmp_path, 4, f"systems: [tool_use, planning]\nconcurrency: 2\nexecutor: {executor}\n")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "run"
    for record in read_records(run_dir):
        stored = read_requests(run_dir, record.key, record.attempt) or []
        trace = json.loads((run_dir / record.trace_file).read_text())
        call_steps = [step["index"] for step in trace["steps"] if step["kind"] == "model_call"]
        assert [call.step for call in stored] == call_steps and len(stored) == record.model_calls
        assert stored[0].messages[-1]["role"] == "user" and record.question in stored[0].messages[-1]["content"]


def test_a_kill_mid_run_loses_no_finished_calls_request_scripted(tmp_path: Path) -> None:
    killed = run(tmp_path, 6, "systems: [tool_use]\nconcurrency: 1\nexecutor: thread\n", KILL_AT_CALL="7")
    assert killed.returncode == -9, killed.stderr  # killed at its 7th call, before the reply
    run_dir = tmp_path / "run"
    finished = finished_calls(run_dir)
    assert len(finished) == 6  # six calls answered before the kill
    assert store_sizes(run_dir)["calls"] == len(finished)
    for line in finished:  # each finished call's request is there, under its attempt
        unit = (line["task_id"], line["system"], line["model"], line["epoch"])
        assert read_requests(run_dir, unit, line["attempt"])


@pytest.mark.slow
def test_the_store_of_a_1000_unit_run_is_a_fraction_of_its_traces_scripted(tmp_path: Path) -> None:
    done = run(tmp_path, 500, "systems: [tool_use, planning]\nconcurrency: 8\n")
    assert done.returncode == 0, done.stderr
    run_dir = tmp_path / "run"
    traces = sum(path.stat().st_size for path in (run_dir / "traces").rglob("*.json"))
    sizes = store_sizes(run_dir)
    assert sizes["calls"] == sum(record.model_calls for record in read_records(run_dir)) >= 2000
    assert sizes["file_bytes"] < 0.5 * traces, (sizes, traces)  # the bound docs/results.md states
