"""Ctrl-C or SIGTERM during a run: the process stops at once with its own exit status, keeps every finished
record, marks the manifest `interrupted`, and --resume finishes the run."""

import json
import signal
import subprocess
import time

import pytest

from data_agent_compare.core.runlog import read_run

from helpers import ROOT, FakeOpenAIServer, compare_command, tool_call_response

MODEL_LATENCY_S = 4.0


def compare(*flags: str) -> list[str]:
    # One unit at a time (an OpenAI-compatible model's default is 4): a unit is surely in flight at the signal.
    return compare_command("--models", "openai-compatible:m", "--concurrency", "1", *flags)


@pytest.mark.slow  # two real `compare` processes and a slow fake model: ~50 s
def test_ctrl_c_stops_without_waiting_for_the_call_in_flight_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')])
    with FakeOpenAIServer(latency_s=MODEL_LATENCY_S, default=answer) as fake:
        flags = ["--base-url", fake.base_url, "--limit", "4", "--task-ids", "BND001,BND005,BND009,BND013"]
        process = subprocess.Popen(compare(*flags, "--out", str(out)), cwd=ROOT, stderr=subprocess.PIPE, text=True)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while not (results.exists() and results.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.5)  # well inside the next model call
        interrupted_at = time.monotonic()
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        stopped_after = time.monotonic() - interrupted_at
        stderr = process.stderr.read()

        assert code == 130, stderr
        assert stopped_after < MODEL_LATENCY_S - 1, stopped_after  # did not wait for the call in flight
        assert "--resume" in stderr
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        kept = [json.loads(line) for line in results.read_text().splitlines()]
        assert 1 <= len(kept) < 4

        resumed = subprocess.run(
            compare_command("--resume", "--out", str(out)), cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert resumed.returncode == 0, resumed.stderr
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == ["BND001", "BND005", "BND009", "BND013"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "completed"
    # The call in flight at Ctrl-C was sent (and maybe paid for): the run's spend says so, apart from the results.
    assert [(a.model_calls, a.in_flight_calls) for a in read_run(out).interrupted] == [(0, 1)]
    assert "1 more call(s) were in flight when the run stopped" in (out / "summary.md").read_text()


@pytest.mark.slow  # two real `compare` processes and a slow fake model: ~15 s
def test_sigterm_stops_with_exit_143_and_one_line_and_resume_finishes(tmp_path):
    out = tmp_path / "run"
    tasks = "BND001,BND005,BND009"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')])
    with FakeOpenAIServer(latency_s=2.0, default=answer) as fake:
        flags = ["--base-url", fake.base_url, "--task-ids", tasks, "--out", str(out)]
        process = subprocess.Popen(compare(*flags), cwd=ROOT, stderr=subprocess.PIPE, text=True)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while not (results.exists() and results.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        last_line = process.stderr.read().strip().splitlines()[-1]

        assert code == 143, last_line
        assert last_line.startswith("stopped by SIGTERM;") and f"compare --resume --out {out}" in last_line
        assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
        assert not list(out.rglob("*.tmp"))
        resumed = subprocess.run(
            compare_command("--resume", "--out", str(out)), cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert resumed.returncode == 0, resumed.stderr
    records = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == tasks.split(",")
