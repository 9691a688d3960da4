"""Runs of one system × model with different benchmark settings (DAB's hints, now under
config.benchmark_settings.dab) are different rows of the comparison, labelled with what differs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from data_agent_compare.core.runlog import read_run
from data_agent_compare.reports.runs import row_names

from helpers import FIXTURES


def run_with(tmp_path: Path, name: str, config: dict[str, object]) -> Path:
    run_dir = tmp_path / name
    shutil.copytree(FIXTURES / "report_run", run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config"] = {k: v for k, v in manifest["config"].items() if k != "hints"} | config
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_runs_with_and_without_hints_are_different_rows(tmp_path: Path) -> None:
    benchmark = json.loads((FIXTURES / "report_run" / "manifest.json").read_text())["benchmark"]
    with_hints = run_with(tmp_path, "hints", {"benchmark_settings": {benchmark: {"hints": True}}})
    without = run_with(tmp_path, "plain", {"benchmark_settings": {benchmark: {"hints": False}}})
    old_style = run_with(tmp_path, "old", {"hints": True})  # a manifest written before the settings moved
    names = row_names([read_run(with_hints), read_run(without), read_run(old_style)])
    labels = {index: name for (index, _, _), name in names.items()}
    assert "hints=true" in labels[0] and "hints=false" in labels[1] and "hints=true" in labels[2]
