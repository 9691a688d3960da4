"""The headline names the most accurate row by the figure it ranks by: each row's accuracy on the tasks every
row has a verdict for, and "tied" means equal on those tasks (issue 25: it once showed each row's own-task
accuracy beside a ranking on the shared set, and called rows tied that were 0.5 vs 1.0 on it)."""

from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.core.trace import Usage
from data_agent_compare.reports.build import _headline
from data_agent_compare.reports.runs import ReportData

TASKS = ["T1", "T2", "T3", "T4"]


def _record(system: str, task: str, correct: float | None, status: str = "completed") -> ResultRecord:
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
        usage=Usage(cost_usd=0.001),
        latency_s=1.0,
        latency_by_phase={},
        model_calls=1,
        tool_calls=[],
        trace_file=f"traces/{system}/{task}.json",
    )


def _rows(system: str, verdicts: list[float | None]) -> list[ResultRecord]:
    return [
        _record(system, task, v) if v is not None else _record(system, task, None, "infra_error")
        for task, v in zip(TASKS, verdicts, strict=True)
    ]


def test_the_headline_shows_and_ties_on_the_tasks_every_row_has_a_verdict_for():
    # y lost T3 and T4 to infrastructure errors: the shared tasks are T1 and T2
    records = _rows("w", [1.0, 1.0, 0.0, 1.0])  # own 0.75, shared 1.0
    records += _rows("x", [1.0, 0.0, 1.0, 1.0])  # own 0.75, shared 0.5
    records += _rows("y", [1.0, 1.0, None, None])  # own 1.0, shared 1.0
    data = ReportData(runs=[], records=records, common_tasks=TASKS, left_out={}, benchmark="bundled")
    most = next(line for line in _headline(data) if line.startswith("Most accurate"))
    assert most.startswith("Most accurate on the 2 tasks every row has a verdict for: w/m 1.000")
    assert "(n=2 tasks), tied with y/m (the cheaper per task is named first)" in most
    assert "x/m" not in most and "0.750" not in most  # x is 0.5 on those tasks; 0.75 is no ranked figure


def test_rows_on_the_same_tasks_show_their_own_accuracy_without_a_task_set_said():
    records = _rows("w", [1.0, 1.0, 0.0, 1.0]) + _rows("x", [1.0, 0.0, 0.0, 1.0])
    data = ReportData(runs=[], records=records, common_tasks=TASKS, left_out={}, benchmark="bundled")
    most = next(line for line in _headline(data) if line.startswith("Most accurate"))
    assert most.startswith("Most accurate: w/m 0.750") and "(n=4 tasks)" in most and "tied" not in most
