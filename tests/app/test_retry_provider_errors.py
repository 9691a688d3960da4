"""A unit run again by `--retry-errors` keeps what the provider did to its earlier attempts: their provider errors,
retries and backoff stay in the record, so the summary's count is not reset to 0 (issue 25: "after
--retry-errors the retried units show provider errors 0 (was 3)")."""

from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.core.trace import Usage
from data_agent_compare.engine.runner import keep_earlier_spend
from data_agent_compare.reports import summarize


def _unit(status: str, provider_errors: int, retries: int, attempt: str) -> ResultRecord:
    return ResultRecord(
        task_id="T1",
        benchmark="bundled",
        system="s",
        model="m",
        epoch=1,
        question_type="factoid",
        status=status,
        answer={},
        scores={"exact_match": 1.0} if status == "completed" else {},
        usage=Usage(input_tokens=10, output_tokens=2, cost_usd=0.001, cost_source="provider"),
        latency_s=1.0,
        latency_by_phase={},
        model_calls=1,
        tool_calls=[],
        trace_file="traces/s/m/T1.json",
        provider_errors=provider_errors,
        retries=retries,
        backoff_s=1.5 * retries,
        attempt=attempt,
    )


def test_a_retried_unit_keeps_its_earlier_provider_errors_in_the_summary():
    earlier = _unit("infra_error", provider_errors=3, retries=2, attempt="a1")
    retried = _unit("completed", provider_errors=0, retries=0, attempt="a2")
    keep_earlier_spend(retried, earlier)
    (row,) = summarize([retried])
    assert (row.provider_errors, row.retries, row.backoff_s) == (3, 2, 3.0)
    assert row.total_cost_usd == 0.002  # and its spend, as before
