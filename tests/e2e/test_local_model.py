"""End to end: the `compare` command with the embedded local model, all four workflows, two bundled tasks each."""

import json
import subprocess
import sys

import pytest

from helpers import ROOT


@pytest.mark.slow
def test_compare_all_workflows_with_local_model_writes_a_complete_run_directory(tmp_path):
    out = tmp_path / "run"
    command = [
        sys.executable,
        "-m",
        "data_agent_compare.cli",
        "--workflows",
        "all",
        "--models",
        "local",
        "--benchmark",
        "bundled",
        "--limit",
        "2",
        "--max-steps",
        "4",
        "--out",
        str(out),
    ]
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert finished.returncode == 0, finished.stderr[-3000:]

    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["config"]["models"] == ["local"] and manifest["config"]["limit"] == 2
    assert manifest["budgets"]["max_steps"] == 4
    assert manifest["models"][0]["provider"] == "local"
    assert len(manifest["task_ids"]) == 2 and manifest["git"]["sha"]
    workflows = ["multi_agent", "planning", "reflection", "tool_use"]
    assert sorted(manifest["systems"]) == workflows
    hashes = [manifest["systems"][w]["prompt_hash"] for w in workflows]
    assert len(set(hashes)) == 4

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["system"], r["task_id"]) for r in records) == [
        (w, t) for w in workflows for t in manifest["task_ids"]
    ]
    for record in records:
        assert record["model"] == "local"
        assert record["status"] not in {"error", "data_unavailable"}, record["error"]
        assert record["model_calls"] >= 1 and record["usage"]["input_tokens"] > 0
        assert record["usage"]["cost_usd"] == 0.0
        assert "exact_match" in record["scores"] or "rougeL_f" in record["scores"]
        trace = json.loads((out / record["trace_file"]).read_text())
        model_steps = [s for s in trace["steps"] if s["kind"] == "model_call"]
        assert len(model_steps) == record["model_calls"]
        assert all(s["duration_s"] > 0 and s["provider"] == "local" for s in model_steps)
        phase_sum = sum(p["latency_s"] for k, p in record["latency_by_phase"].items() if k != "other")
        assert phase_sum <= record["latency_s"] + 1e-6
    summary = (out / "summary.md").read_text()
    assert all(w in summary and w in finished.stdout for w in workflows)  # the table was written and printed
