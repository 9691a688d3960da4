"""The summary of a run directory: accuracy with a CI, cost per correct answer, paired tests."""

from data_agent_compare.core import BENCHMARKS, ResultRecord
from data_agent_compare.reports import pairwise, summarize


def record(system, task, correct, cost=0.01, **fields):
    return ResultRecord.model_validate(
        {
            "benchmark": "bundled",
            "system": system,
            "model": "m",
            "task_id": task,
            "epoch": 1,
            "question_type": "single_choice",
            "status": "completed",
            "answer": {},
            "scores": {"exact_match": correct},
            "latency_s": 1.0,
            "latency_by_phase": {"decision": {"latency_s": 0.6}, "other": {"latency_s": 0.4}},
            "model_calls": 2,
            "tool_calls": [],
            "usage": {"input_tokens": 10, "output_tokens": 5, "reasoning_tokens": 1, "cost_usd": cost},
            "trace_file": f"traces/{system}/m/{task}.json",
            **fields,
        }
    )


def test_rows_report_accuracy_ci_and_cost_per_correct():
    records = [record("a", f"T{i}", 1.0 if i < 6 else 0.0) for i in range(10)]
    (row,) = summarize(records)
    assert row.accuracy == 0.6 and row.accuracy_n == 10
    low, high = row.accuracy_ci
    assert low < 0.6 < high
    assert abs(row.cost_per_correct_usd - 0.10 / 6) < 1e-12
    assert row.mean_latency_by_phase_s["decision"] == 0.6


def test_pairwise_compares_systems_on_common_tasks():
    # b01 = 1 (a wrong, b right), b10 = 9 (a right, b wrong): exact McNemar p = 2·P(X ≤ 1 | 10, ½) = 0.0215
    a = [record("a", f"T{i}", 1.0 if i < 9 else 0.0) for i in range(10)]
    b = [record("b", f"T{i}", 1.0 if i == 9 else 0.0) for i in range(10)]
    (pair,) = pairwise(a + b + [record("b", "only-b", 1.0)])
    assert (pair.first, pair.second, pair.tasks) == ("a/m", "b/m", 10)
    assert abs(pair.accuracy_difference - 0.8) < 1e-12
    assert abs(pair.exact_p - 22 / 1024) < 1e-9 and pair.exact_test == "exact McNemar"
    assert pair.difference_ci[0] > 0


def test_dab_rows_get_pass_at_k_over_epochs_with_datasets_weighted_equally():
    def trial(task, epoch, correct):
        return record("s", task, None, benchmark="dab", epoch=epoch, scores={"correct": correct})

    # books/q1 passes 1 of 2 trials, books/q2 2 of 2, crm/q1 0 of 2:
    # pass@1 books = (0.5 + 1) / 2 = 0.75, crm = 0; stratified = 0.375
    records = [
        trial("books/q1", 1, 1.0),
        trial("books/q1", 2, 0.0),
        trial("books/q2", 1, 1.0),
        trial("books/q2", 2, 1.0),
        trial("crm/q1", 1, 0.0),
        trial("crm/q1", 2, 0.0),
    ]
    lines = BENCHMARKS.load("dab").report_lines(records)
    assert lines[0] == "## DAB pass@k"
    assert "pass@1 0.375 [0.250, 0.500]" in lines[2] and "pass@2 0.500" in lines[2]  # queries resampled per dataset
    assert any("books: pass@1 0.750" in line for line in lines)


def test_unavailable_tasks_are_left_out_of_every_mean_and_counted():
    ran = [record("a", f"T{i}", 1.0, cost=0.02) for i in range(3)]
    unavailable = record("a", "T9", 0.0, cost=0.0, status="data_unavailable", latency_s=0.0, model_calls=0)
    (row,) = summarize([*ran, unavailable])
    assert row.unavailable == 1 and row.tasks == 4
    assert row.accuracy == 1.0 and row.accuracy_n == 3
    assert row.mean_latency_s == 1.0 and row.mean_model_calls == 2  # the unavailable task's zeros are not averaged


def test_infra_errors_are_left_out_of_quality_by_default_and_counted_as_failures_on_request():
    ok = [record("a", f"T{i}", 1.0) for i in range(3)]
    provider_failed = record("a", "T9", 0.0, status="infra_error")
    (default,) = summarize([*ok, provider_failed])
    assert default.infra_errors == 1 and default.accuracy == 1.0 and default.accuracy_n == 3
    assert default.mean_latency_s == 1.0 and default.total_cost_usd == 0.04  # what it spent still counts
    (strict,) = summarize([*ok, provider_failed], infra_errors_as_failures=True)
    assert strict.accuracy == 0.75 and strict.accuracy_n == 4


def test_epochs_are_averaged_per_task_so_repeats_add_no_evidence():
    # 3 tasks, a always right, b always wrong, each run 10 times: 3 tasks of evidence, not 30 pairs
    a = [record("a", f"T{i}", 1.0, epoch=e) for i in range(3) for e in range(1, 11)]
    b = [record("b", f"T{i}", 0.0, epoch=e) for i in range(3) for e in range(1, 11)]
    (pair,) = pairwise(a + b)
    assert pair.tasks == 3 and pair.accuracy_difference == 1.0
    assert pair.exact_p == 0.25 and pair.exact_test == "exact sign test"  # 3 of 3 tasks favour a: 2 · (1/2)^3
    row_a, _ = summarize(a + b)
    assert row_a.accuracy_n == 3  # tasks, not trials


def test_a_scorer_failure_and_the_left_out_records_are_said_beside_the_table():
    from data_agent_compare.core.runlog import Manifest
    from data_agent_compare.reports import markdown

    records = [
        record("a", "T1", 1.0),
        record("a", "T2", 0.0, scoring_error="exact_match: InvalidOperation: bad number"),
        record("a", "T3", 0.0, status="infra_error"),
        record("a", "T4", 0.0, status="data_unavailable"),
    ]
    manifest = Manifest.model_validate(
        {
            "suite_version": "0.1.0",
            "started_at": "now",
            "config": {"epochs": 1},
            "models": [],
            "budgets": {},
            "systems": {},
            "benchmark": "bundled",
            "task_ids": ["T1", "T2", "T3", "T4"],
            "units": 4,
        }
    )
    text = markdown(summarize(records), manifest, records=records)
    assert "1 unit(s) with unavailable data are left out of every mean" in text
    assert "1 infrastructure error(s)" in text and "--infra-errors-as-failures" in text
    assert "1 record(s) had a scorer fail" in text
    assert "| 0.500 (n=2) |" in text  # T1 right, T2 scored a failure; T3 and T4 left out
