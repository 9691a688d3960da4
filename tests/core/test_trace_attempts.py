"""Failed attempts and backoff in the trace: backoff is its own phase bucket (never model latency), the
buckets still add up to the wall time, and traces and records written before these fields still load."""

from __future__ import annotations

import json

import pytest

from data_agent_compare.core import Phase
from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.core.trace import FailedAttempt, ModelCallStep, ToolCallStep, Trace, Usage, phase_seconds


def retried_call(start: float = 0.0) -> ModelCallStep:
    """A call from `start`: attempt 1 fails after 0.5 s, 1 s of backoff, attempt 2 succeeds in 0.5 s."""
    failed = FailedAttempt(attempt=1, kind="rate_limit", status_code=429, error="HTTP 429", start_s=start,
                           duration_s=0.5, wait_s=1.0)  # fmt: skip
    return ModelCallStep(
        index=0, phase=Phase.DECISION, model="m", provider="p", provider_model="p/m", started_at="", duration_s=2.0,
        start_s=start, usage=Usage(), success=True, attempts=2, backoff_s=1.0, failed_attempts=[failed],
    )  # fmt: skip


def test_backoff_is_a_bucket_of_its_own_and_not_model_latency() -> None:
    step = retried_call()

    seconds = phase_seconds([step], wall_time_s=3.0)

    assert seconds == pytest.approx({"decision": 1.0, "backoff": 1.0, "other": 1.0})
    assert step.model_latency_s == pytest.approx(1.0)


def test_a_tool_running_during_another_calls_backoff_shares_that_time() -> None:
    tool = ToolCallStep(index=1, phase=Phase.EXECUTE, tool="t", arguments={}, started_at="", duration_s=1.0,
                        start_s=0.5, success=True)  # fmt: skip

    seconds = phase_seconds([retried_call(), tool], wall_time_s=2.0)

    assert seconds == pytest.approx({"decision": 1.0, "backoff": 0.5, "execute": 0.5, "other": 0.0})
    assert sum(seconds.values()) == pytest.approx(2.0)


def test_traces_written_before_attempts_were_recorded_still_load() -> None:
    old_step = {
        "kind": "model_call", "index": 0, "phase": "decision", "model": "m", "provider": "p", "provider_model": "p/m",
        "started_at": "", "duration_s": 1.5, "usage": {"input_tokens": 3, "output_tokens": 1}, "success": True,
        "attempts": 2, "start_s": 0.0, "queue_s": 0.5,
    }  # fmt: skip
    trace = Trace.model_validate({"task_id": "t", "system": "s", "model": "m", "wall_time_s": 2.0, "steps": [old_step]})

    (step,) = trace.model_calls
    assert (step.backoff_s, step.failed_attempts, step.usage.cached_tokens) == (0.0, [], 0)
    assert step.model_latency_s == pytest.approx(1.0)
    assert trace.retries() == 1 and trace.provider_errors() == 0  # an old trace knows its attempts, not their errors
    again = Trace.model_validate_json(trace.model_dump_json())  # model_latency_s is written, and read back
    assert again == trace and json.loads(trace.model_dump_json())["steps"][0]["model_latency_s"] == 1.0


def test_records_written_before_the_retry_counts_read_as_zero() -> None:
    old = {
        "task_id": "t", "benchmark": "b", "system": "s", "model": "m", "epoch": 1, "question_type": "factoid",
        "status": "completed", "answer": {}, "scores": {}, "usage": {}, "latency_s": 1.0, "latency_by_phase": {},
        "model_calls": 1, "tool_calls": [], "trace_file": "x.json",
    }  # fmt: skip

    record = ResultRecord.model_validate(old)

    assert (record.retries, record.backoff_s, record.provider_errors) == (0, 0.0, 0)
