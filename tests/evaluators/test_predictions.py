"""Predictions made elsewhere given twice for one task, in the three forms a file can say it (issue 25): the
same task twice, a task without a run beside the same task with `run: 1`, and `run: 1` beside `epoch: 1.0`.
Each refuses the file naming both lines, as a plain duplicate always did; distinct runs still score."""

from __future__ import annotations

import json
import re

import pytest

from data_agent_compare.core.benchmark import create_benchmark
from data_agent_compare.evaluators.predictions import check_duplicates, read_predictions, run_label
from data_agent_compare.evaluators.submissions import SubmissionError

from helpers import FIXTURES, by_id, load_tasks


def predictions_of(tmp_path, rows: list[dict]) -> list:
    path = tmp_path / "predictions.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    benchmark = create_benchmark("dabstep", FIXTURES / "dabstep")
    return path, list(read_predictions(path, benchmark, by_id(load_tasks("dabstep", FIXTURES / "dabstep"))))


@pytest.mark.parametrize(
    ("first", "second", "message"),
    [
        ({}, {}, "task '5' is given twice: line 1 and line 2"),
        ({}, {"run": 1}, "task '5' is given twice: without a run (line 1) and with one (line 2)"),
        ({"run": 1}, {"epoch": 1.0}, "task '5' run '1' is given twice: line 1 and line 2"),
    ],
    ids=["same-task", "no-run-and-run-1", "run-1-and-epoch-1.0"],
)
def test_a_task_given_twice_in_any_form_refuses_the_file_naming_both_lines(tmp_path, first, second, message):
    rows = [{"task_id": "5", "agent_answer": "NL", **first}, {"task_id": "5", "agent_answer": "BE", **second}]
    path, predictions = predictions_of(tmp_path, rows)
    with pytest.raises(SubmissionError, match=re.escape(message)):
        check_duplicates(path, predictions)


def test_distinct_runs_of_a_task_are_scored_as_runs(tmp_path):
    rows = [{"task_id": "5", "agent_answer": "NL", "run": 1}, {"task_id": "5", "agent_answer": "BE", "epoch": 2.0}]
    path, predictions = predictions_of(tmp_path, rows)
    check_duplicates(path, predictions)
    assert [p.run for p in predictions] == ["1", "2"]


def test_run_labels_are_compared_as_numbers():
    assert [run_label(v) for v in (1, 1.0, "1", " 1.0", 2.5, "a", None)] == ["1", "1", "1", "1", "2.5", "a", None]
