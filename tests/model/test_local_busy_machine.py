"""The embedded model on a machine made busy by the test: its calls are slow, not failed. Its deadline is
the task's time and its own pace (`providers/local.py`: `PaceWatch`), not a per-call wall time, so a call
that takes longer than the run's call timeouts still completes the task (slow: real weights)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

COMPARE = Path(sys.executable).with_name("compare")


@contextmanager
def busy_machine(spinners_per_core: int = 2) -> Iterator[None]:
    """Processes that spin on every core until the block ends (load ≈ twice the cores, on top of the rest)."""
    count = spinners_per_core * (os.cpu_count() or 1)
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


@pytest.mark.slow
def test_embedded_model_completes_a_bundled_task_on_a_busy_machine_past_the_call_timeouts(tmp_path: Path) -> None:
    config = tmp_path / "busy.yaml"
    # Timeouts no call of the embedded model meets on a busy machine: they are for network peers that hang.
    config.write_text("retries: {attempt_timeout_s: 0.5, call_timeout_s: 1.0}\nbudgets: {wall_time_s: 900}\n")
    out = tmp_path / "run"
    command = [str(COMPARE), "--config", str(config), "--workflows", "tool_use", "--models", "local"]
    command += ["--benchmark", "bundled", "--task-ids", "BND001", "--out", str(out)]
    with busy_machine():
        finished = subprocess.run(command, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    [record] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert record["status"] == "completed", (record["status"], record["error"], finished.stderr[-2000:])
    [call] = json.loads((out / record["trace_file"]).read_text())["steps"][:1]
    assert call["success"] and call["duration_s"] > 1.0  # longer than the call timeout, and not cut by it
