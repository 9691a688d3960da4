"""Rows that differ only in run settings carry the difference in their label everywhere: the terminal's table,
summary.md and the report (issue 25 item 6: max_steps 1 vs 3 looked like one system twice); and the terminal's
table shows budget stops."""

import json

from typer.testing import CliRunner

from data_agent_compare.cli.main import app


def with_budget(run, max_steps: int, stopped: int = 0):
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["budgets"]["max_steps"] = max_steps
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = []
    for number, line in enumerate((run / "results.jsonl").read_text().splitlines()):
        record = json.loads(line)
        if number < stopped:
            record["status"] = "max_steps"
        lines.append(json.dumps(record))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    return run


def test_rows_of_different_budgets_are_labelled_in_the_terminal_summary_and_report(tmp_path, wide_run):
    one = with_budget(wide_run("one", systems=1, models=("m1",), tasks=4), 1, stopped=2)
    three = with_budget(wide_run("three", systems=1, models=("m1",), tasks=4), 3)
    flags = ["report", str(one), str(three), "--out", str(tmp_path / "r")]
    result = CliRunner().invoke(app, flags, terminal_width=250)
    assert result.exit_code == 0, result.output
    for text in (result.output, (tmp_path / "r/summary.md").read_text(), (tmp_path / "r/report.md").read_text()):
        assert "langgraph_react [max_steps=1]" in text and "langgraph_react [max_steps=3]" in text
    header = next(line for line in result.output.splitlines() if "system" in line and "model" in line)
    assert "budget" in header  # the terminal's table shows budget stops when there are some
    labelled = next(line for line in result.output.splitlines() if "[max_steps=1]" in line)
    assert " 2 " in labelled
