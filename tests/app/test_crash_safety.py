"""Crash safety with real processes: `compare` killed with SIGKILL at three moments, then resumed, runs
every unit exactly once with the results of an uninterrupted run, and counts what the killed units spent;
a second process is kept out of a run directory in use; a changed alias or flag is refused.

The children run a scripted test model from a --plugin file (provider "scripted", an alias in a
`models_file`) on a small plugin benchmark over the fixtures' SQLite database; the plugin kills its own
process (SIGKILL, as `kill -9` would) at the model call or while scoring the task its environment names.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from data_agent_compare.core.runlog import read_run

from helpers import ROOT, compare_command, write_quiz_run

QUESTIONS = [
    {"id": "Q1", "question": "How many sales teams are there?", "answer": "Q1-3"},
    {"id": "Q2", "question": "How many sales teams are there, again?", "answer": "nope"},
    {"id": "Q3", "question": "And once more?", "answer": "Q3-3"},
]
UNITS = 6  # 3 tasks × 1 system × 1 model × 2 epochs, one at a time: unit 2 makes model calls 3 and 4


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    """The plugin, its alias table, the quiz and a --config naming them (what a user would write)."""
    return write_quiz_run(
        tmp_path, QUESTIONS, "epochs: 2\nconcurrency: 1\n", kill_at_call="exactly", kill_while_scoring=True
    )


def compare(*flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    return subprocess.run(
        compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=240, env=environment
    )


def start(*flags: str, **env: str) -> subprocess.Popen[str]:
    environment = {**os.environ, **env}
    return subprocess.Popen(compare_command(*flags), cwd=ROOT, stderr=subprocess.PIPE, text=True, env=environment)


def outcome(run_dir: Path) -> dict[tuple[str, str, str, int], tuple]:
    """Each unit's result as a comparison sees it (timings aside)."""
    return {
        r.key: (r.status, r.answer, r.scores, r.usage.input_tokens, r.usage.output_tokens, r.usage.cost_usd)
        for r in read_run(run_dir).records
    }


def lines_of(run_dir: Path) -> list[tuple[str, int]]:
    return [(r["task_id"], r["epoch"]) for r in map(json.loads, (run_dir / "results.jsonl").read_text().splitlines())]


@pytest.mark.slow  # nine `compare` processes: ~40 s
def test_killed_at_three_moments_then_resumed_every_unit_runs_once_as_uninterrupted_with_a_scripted_model(
    tmp_path, setup
):
    baseline = tmp_path / "uninterrupted"
    done = compare("--config", str(setup["config"]), "--out", str(baseline))
    assert done.returncode == 0, done.stderr
    expected = outcome(baseline)
    assert len(expected) == UNITS and {status for status, *_ in expected.values()} == {"completed"}

    # Where the kill lands, what it leaves, and the killed attempt's (task, epoch, finished calls, calls sent
    # and never answered): a request is journaled before it is sent, so the call the kill cut counts too.
    moments = {
        "first model call": ({"KILL_AT_CALL": "1"}, 0, ("Q1", 1, 0, 1)),
        "middle of the second unit": ({"KILL_AT_CALL": "4"}, 1, ("Q2", 1, 1, 1)),
        "scoring the second unit": ({"KILL_WHILE_SCORING": "Q2"}, 1, ("Q2", 1, 2, 0)),
    }
    for moment, (kill, kept, killed_attempt) in moments.items():
        out = tmp_path / moment.replace(" ", "-")
        killed = compare("--config", str(setup["config"]), "--out", str(out), **kill)
        assert killed.returncode == -9, (moment, killed.stderr)
        assert len(lines_of(out)) == kept, moment
        resumed = compare("--resume", "--out", str(out))
        assert resumed.returncode == 0, (moment, resumed.stderr)

        units = lines_of(out)
        assert len(units) == len(set(units)) == UNITS, moment  # every unit exactly once
        assert outcome(out) == expected, moment
        run = read_run(out)
        assert run.manifest.status == "completed" and run.warnings == []
        spent = [(a.task_id, a.epoch, a.model_calls, a.in_flight_calls) for a in run.interrupted]
        assert spent == [killed_attempt], moment
        if killed_attempt[2] == 2:  # the killed unit had made all its calls: it spent what the finished one did
            assert run.interrupted_usage().input_tokens == expected[("Q2", "tool_use", "scripted", 1)][3]
            assert "Spent on interrupted units" in (out / "summary.md").read_text()


@pytest.mark.slow  # three `compare` processes: ~15 s
def test_killed_with_units_running_concurrently_then_resumed_every_unit_runs_once_with_a_scripted_model(
    tmp_path, setup
):
    baseline, out = tmp_path / "uninterrupted", tmp_path / "killed"
    config = setup["config"]
    config.write_text(config.read_text().replace("concurrency: 1", "concurrency: 3"))
    assert compare("--config", str(config), "--out", str(baseline)).returncode == 0
    killed = compare("--config", str(config), "--out", str(out), KILL_AT_CALL="7", MODEL_DELAY_S="0.2")
    assert killed.returncode == -9, killed.stderr
    resumed = compare("--resume", "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr
    units = lines_of(out)
    assert len(units) == len(set(units)) == UNITS and outcome(out) == outcome(baseline)


def lock_is_held(run_dir: Path) -> bool:
    path = run_dir / ".lock"
    if not path.exists():
        return False
    with path.open("a") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(file, fcntl.LOCK_UN)
        return False


@pytest.mark.slow  # five `compare` processes: ~35 s
def test_a_second_process_is_refused_while_a_resume_runs_and_changes_are_refused_with_a_scripted_model(tmp_path, setup):
    out = tmp_path / "run"
    killed = compare("--config", str(setup["config"]), "--out", str(out), KILL_AT_CALL="3")
    assert killed.returncode == -9 and len(lines_of(out)) == 1

    first = start("--resume", "--out", str(out), MODEL_DELAY_S="1.5")  # 10 calls left: ~15 s to refuse in
    deadline = time.monotonic() + 60
    while not lock_is_held(out) and time.monotonic() < deadline:
        time.sleep(0.05)
    second = compare("--resume", "--out", str(out))
    into_the_same_out = compare("--config", str(setup["config"]), "--out", str(out))
    assert first.wait(timeout=120) == 0, first.stderr.read()

    for refused in (second, into_the_same_out):
        assert refused.returncode == 2, refused.stderr
        assert f"{out} is in use by another compare process (pid {first.pid}" in refused.stderr
    units = lines_of(out)
    assert len(units) == len(set(units)) == UNITS

    flag = compare("--resume", "--out", str(out), "--epochs", "3")
    assert flag.returncode == 2 and "takes no --epochs" in flag.stderr
    setup["models"].write_text(setup["models"].read_text().replace("model_id: v1", "model_id: v2"))
    alias = compare("--resume", "--out", str(out))
    assert alias.returncode == 2 and "model 'scripted' model_id: 'v1' → 'v2'" in alias.stderr
    assert lines_of(out) == units
