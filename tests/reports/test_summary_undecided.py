"""A DAB validator that could not decide: the record has a scoring error and no verdict, and the summary says
how many such records are out of the mean instead of counting them as wrong answers."""

from __future__ import annotations

from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.reports.summary import denominator_lines, summarize


def record(task: str, correct: float | None, error: str | None = None) -> ResultRecord:
    return ResultRecord.model_validate(
        {
            "task_id": task,
            "benchmark": "dab",
            "system": "s",
            "model": "m",
            "epoch": 1,
            "question_type": "factoid",
            "status": "completed",
            "answer": {"text": "the 2020s"},
            "scores": {} if correct is None else {"correct": correct},
            "scoring_error": error,
            "usage": {},
            "latency_s": 1.0,
            "latency_by_phase": {},
            "model_calls": 1,
            "tool_calls": [],
            "trace_file": f"traces/s/m/{task.replace('/', '_')}.json",
        }
    )


def test_an_undecided_validator_leaves_its_task_out_of_accuracy_and_the_summary_says_so():
    rows = summarize([record("a/query1", 1.0), record("a/query2", 0.0), record("a/query3", None, "dab: timed out")])
    assert rows[0].accuracy == 0.5 and rows[0].scoring_errors == 1 and rows[0].undecided == 1
    lines = denominator_lines(rows, infra_errors_as_failures=False)
    assert any("1 record(s) had a scorer fail" in line and "not in those means" in line for line in lines)
