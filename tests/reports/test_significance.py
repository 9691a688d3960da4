"""How many tasks a difference needs (the normal approximation for a paired mean difference), and the pairwise
tests Holm-adjusted over the comparisons shown, with the tasks each side lost to infrastructure errors."""

import math
from statistics import NormalDist, stdev

import pytest

from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.core.trace import Usage
from data_agent_compare.evaluators.statistics import holm
from data_agent_compare.reports.runs import ReportData
from data_agent_compare.reports.significance import leader_line, ranked, shared_accuracy, tasks_needed
from data_agent_compare.reports.summary import pair_lines, pairwise


def test_tasks_needed_follows_the_paired_sample_size_formula():
    differences = [1.0] * 3 + [0.0] * 7  # a 0.3 gap in accuracy
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert tasks_needed(differences) == math.ceil((z * stdev(differences) / 0.3) ** 2)


def test_smaller_differences_need_more_tasks():
    large = [1.0] * 5 + [0.0] * 5
    small = [1.0] * 1 + [0.0] * 9
    assert tasks_needed(small) > tasks_needed(large)


def test_no_difference_needs_no_number():
    assert tasks_needed([0.0, 0.0, 0.0]) is None
    assert tasks_needed([1.0, -1.0]) is None
    assert tasks_needed([1.0]) is None


def test_a_difference_without_spread_needs_what_the_exact_test_needs():
    """Every task differs by the same amount: the exact test reaches p < 0.05 at 6 tasks (2·(1/2)^6), never
    at the 2 tasks there are; and no gap is said to need fewer tasks than that."""
    assert tasks_needed([1.0, 1.0]) == 6
    assert tasks_needed([0.75, 0.75, 0.75]) == 6
    assert tasks_needed([1.0] * 9 + [0.0]) == 6  # the normal approximation alone would say 1


def _record(system: str, task: str, correct: float | None, status: str = "completed"):
    return ResultRecord(
        task_id=task,
        benchmark="bundled",
        system=system,
        model="m",
        epoch=1,
        question_type="factoid",
        status=status,
        answer={},
        scores={} if correct is None else {"exact_match": correct},
        usage=Usage(),
        latency_s=1.0,
        latency_by_phase={},
        model_calls=1,
        tool_calls=[],
        trace_file=f"traces/{system}/{task}.json",
    )


def _three_systems():
    """a answers all 12 tasks, b 6 of them, c none; c lost 2 tasks to infrastructure errors."""
    tasks = [f"T{i}" for i in range(12)]
    records = [_record("a", t, 1.0) for t in tasks]
    records += [_record("b", t, float(i % 2)) for i, t in enumerate(tasks)]
    records += [_record("c", t, 0.0) for t in tasks[:10]]
    records += [_record("c", t, None, status="infra_error") for t in tasks[10:]]
    return records


def test_pairwise_p_values_are_holm_adjusted_over_the_pairs_compared():
    pairs = pairwise(_three_systems())
    assert [(p.first, p.second, p.tasks) for p in pairs] == [("a/m", "b/m", 12), ("a/m", "c/m", 10), ("b/m", "c/m", 10)]
    assert [p.exact_p_holm for p in pairs] == holm([p.exact_p for p in pairs])
    assert all(p.exact_p_holm >= p.exact_p for p in pairs)
    # fewer than 20 tasks: no bootstrap p-value (too few distinct resamples), the exact test alone
    assert all(math.isnan(p.bootstrap_p) and math.isnan(p.bootstrap_p_holm) for p in pairs)
    # a vs c: 10 discordant pairs, exact McNemar p = 2 / 2**10; the smallest of 3 → × 3
    assert pairs[1].exact_p == pytest.approx(2 / 2**10) and pairs[1].exact_p_holm == pytest.approx(6 / 2**10)
    assert {p.exact_test for p in pairs} == {"exact McNemar"}
    assert [(p.first_infra_lost, p.second_infra_lost) for p in pairs] == [(0, 0), (0, 2), (0, 2)]


def test_summary_states_the_number_of_comparisons_and_both_p_values():
    lines = pair_lines(pairwise(_three_systems()))
    assert lines[0] == "## Paired comparisons (3 comparisons, on the tasks both answered)"
    a_c = next(line for line in lines if line.startswith("| a/m | c/m |"))
    assert "| 10 | 0 / 2 |" in a_c and "| exact McNemar | 0.002 (0.006) |" in a_c  # raw, then Holm-adjusted
    assert any("adjusted over the 3 comparisons" in line for line in lines)


def test_rows_that_lost_different_tasks_are_ranked_on_the_tasks_all_have_a_verdict_for():
    """x lost 4 tasks to infra errors and is right on 6 of its 8 (0.75); y is right on 7 of the same 8 and
    wrong on the 4 x lost (own 0.583): on like-for-like tasks y leads."""
    tasks = [f"T{i}" for i in range(12)]
    records = [_record("x", t, 1.0 if i < 6 else 0.0) for i, t in enumerate(tasks[:8])]
    records += [_record("x", t, None, "infra_error") for t in tasks[8:]]
    records += [_record("y", t, 1.0 if i < 7 else 0.0) for i, t in enumerate(tasks)]
    data = ReportData(runs=[], records=records, common_tasks=tasks, left_out={}, benchmark="bundled")
    assert [(r.system, r.accuracy) for r in data.summary()] == [("x", 0.75), ("y", pytest.approx(7 / 12))]
    assert shared_accuracy(data) == (8, {"x/m": 0.75, "y/m": 0.875})
    assert [r.system for r in ranked(data)] == ["y", "x"]
    line = leader_line(data) or ""
    assert line.startswith("Ranked on the 8 tasks every row has a verdict for (y/m 0.875, x/m 0.750). y/m vs")
    assert "on 8 common tasks" in line and "tasks lost to infra errors: y/m 0, x/m 4" in line


def _epochs(system: str, task: str, verdicts: list[float]) -> list[ResultRecord]:
    return [_record(system, task, v).model_copy(update={"epoch": e}) for e, v in enumerate(verdicts, start=1)]


def test_the_two_task_leader_line_uses_the_exact_test_and_claims_no_more_than_two_tasks_show():
    """a is right on both tasks every time, b on 1 of 4 trials of each: +0.750 on 2 tasks. The line once said
    "bootstrap p 0.000; McNemar p 0.500; a gap this size needs about 2 tasks"."""
    records = [*_epochs("a", "T1", [1.0] * 4), *_epochs("a", "T2", [1.0] * 4)]
    records += [*_epochs("b", "T1", [1.0, 0.0, 0.0, 0.0]), *_epochs("b", "T2", [0.0, 0.0, 1.0, 0.0])]
    data = ReportData(runs=[], records=records, common_tasks=["T1", "T2"], left_out={}, benchmark="bundled")
    line = leader_line(data) or ""
    assert line.startswith("a/m vs runner-up b/m: +0.750")
    assert "on 2 common tasks, not significant" in line
    assert "no bootstrap p below 20 tasks" in line and "0.000" not in line
    assert "exact sign test p 0.500" in line and "McNemar" not in line  # per-task means: a sign test, named so
    assert line.endswith("a gap this size needs about 6 tasks")
