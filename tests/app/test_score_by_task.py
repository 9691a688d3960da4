"""`compare score` with several runs per task: its means are over tasks (runs averaged first, the interval over
tasks), it says how they relate to the benchmark's aggregate, and a metric of our own runs (`sr`, the share of
tool calls that succeeded) is not shown for predictions made elsewhere (issue 25 item 7: "correct n=115" beside
pass@1 0.268, unexplained, and an `sr` row)."""

import json

from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import FIXTURES

DEV = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]


def test_runs_of_a_task_count_as_one_task_and_no_run_metric_is_shown(tmp_path):
    # 10 tasks, 5 runs each: task 0 right in every run, the others right in run 0 only
    records = [
        {"task_id": t["task_id"], "run": run, "agent_answer": t["answer"] if (i == 0 or run == 0) else "wrong"}
        for i, t in enumerate(DEV)
        for run in range(5)
    ]
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("".join(json.dumps(r) + "\n" for r in records))
    flags = ["score", "--benchmark", "dabstep", "--tasks-path", str(FIXTURES / "dabstep")]
    result = CliRunner().invoke(app, [*flags, "--predictions", str(predictions)], terminal_width=200)
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if line.strip("│ ").startswith("correct"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    # tasks 10, predictions 50; mean over tasks: (1 + 9 × 0.2) / 10 = 0.28
    assert cells[:4] == ["correct", "10", "50", "0.280"]
    assert "Means are over 10 tasks (50 predictions: each task's runs averaged first" in result.output
    assert not any(line.strip("│ ").startswith("sr ") for line in result.output.splitlines())
