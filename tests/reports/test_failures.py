"""Failure modes read from a record, and which tool calls count as exploring."""

import pytest

from data_agent_compare.core import ResultRecord
from data_agent_compare.reports.failures import failure_mode, is_exploring


def record(status="completed", correct=0.0, calls=1, question_type="factoid", answer=None, **scores):
    return ResultRecord.model_validate(
        {
            "task_id": "T1",
            "benchmark": "bundled",
            "system": "s",
            "model": "m",
            "epoch": 1,
            "question_type": question_type,
            "status": status,
            "answer": {"text": "42"} if answer is None else answer,
            "scores": {"exact_match": correct, **scores},
            "usage": {},
            "latency_s": 1.0,
            "latency_by_phase": {},
            "model_calls": 1,
            "tool_calls": [{"tool": "execute_sql", "success": True, "duration_s": 0.1}] * calls,
            "trace_file": "traces/s/m/T1.json",
        }
    )


@pytest.mark.parametrize(
    ("fields", "mode"),
    [
        ({"status": "data_unavailable"}, "unavailable"),
        ({"status": "infra_error"}, "provider error"),
        ({"status": "error"}, "runtime error"),
        ({"status": "max_steps"}, "budget stop"),
        ({"status": "time_limit", "calls": 0}, "budget stop"),
        ({"calls": 0}, "no tool call"),
        ({"status": "no_tool_call", "calls": 0}, "no tool call"),
        ({"answer": {"text": "  "}}, "malformed answer"),
        ({"question_type": "single_choice", "answer": {"text": "maybe"}}, "malformed answer"),
        ({"status": "no_answer"}, "malformed answer"),
        ({}, "wrong answer"),
        ({"correct": 1.0}, "correct"),
        ({"correct": 1.0, "calls": 0}, "correct"),
        ({"correct": None}, "unscored"),
    ],
)
def test_the_first_mode_that_applies(fields, mode):
    assert failure_mode(record(**fields)) == mode


@pytest.mark.parametrize(
    ("tool", "arguments", "exploring"),
    [
        ("get_schema_info", {"database": "db"}, True),
        ("list_db", {"db_name": "books"}, True),
        ("execute_sql", {"sql": "SELECT name FROM sqlite_master WHERE type='table'"}, True),
        ("execute_sql", {"sql": 'SELECT * FROM "Sales Orders" LIMIT 5'}, True),
        ("query_db", {"query": "select * from information_schema.columns"}, True),
        ("execute_sql", {"sql": "SELECT COUNT(*) FROM orders WHERE year = 2019"}, False),
        ("execute_sql", {"sql": "SELECT a, SUM(b) FROM t GROUP BY a"}, False),
        ("execute_python", {"code": "print(1)"}, False),
    ],
)
def test_exploring_means_listing_introspection_or_samples(tool, arguments, exploring):
    assert is_exploring(tool, arguments) is exploring
