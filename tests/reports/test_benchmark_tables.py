"""The benchmark-specific tables (DAB, DABstep, DBGorilla) from run directories written through the run
log's writer, with outcomes chosen so that every expected number is worked out by hand below."""

import pytest

from data_agent_compare.core.runlog import Manifest, ResultRecord, RunLogWriter, ToolCallSummary
from data_agent_compare.core.trace import Budgets, Trace, Usage
from data_agent_compare.reports import build_report
from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.runs import load_runs


def write_run(run_dir, benchmark, rows):
    """rows: (task_id, epoch, level, scores, tools) of one system/model ("s"/"m")."""
    writer = RunLogWriter(run_dir)
    manifest = Manifest(
        suite_version="0.1.0",
        started_at="2026-01-01T00:00:00Z",
        config={"epochs": max(r[1] for r in rows)},
        models=[],
        budgets=Budgets(),
        systems={"s": {}},
        benchmark=benchmark,
        task_ids=sorted({r[0] for r in rows}),
        units=len(rows),
        status="completed",
    )
    writer.write_manifest(manifest)
    for task_id, epoch, level, scores, tools in rows:
        trace_file = f"traces/s/m/{task_id.replace('/', '_')}.e{epoch}.json"
        record = ResultRecord(
            task_id=task_id,
            benchmark=benchmark,
            system="s",
            model="m",
            epoch=epoch,
            question_type="factoid",
            level=level,
            status="completed",
            answer={"text": "x"},
            scores=scores,
            usage=Usage(cost_usd=0.01),
            latency_s=2.0,
            latency_by_phase={},
            model_calls=3,
            tool_calls=[ToolCallSummary(tool=tool, success=True, duration_s=0.1) for tool in tools],
            trace_file=trace_file,
        )
        writer.append(record, Trace(task_id=task_id, system="s", model="m", wall_time_s=2.0))
    writer.close_with(manifest)
    return run_dir


def cells(table, column):
    return [cell.text for cell in table.column(column)]


def test_dab_pass_at_k_per_dataset_and_stratified(tmp_path):
    # books/q1 passes 2 of 2 trials, books/q2 1 of 2, crm/q1 0 of 2:
    # pass@1 books (1 + 0.5) / 2 = 0.75, crm 0, stratified 0.375; pass@2 books 1.0, crm 0, stratified 0.5
    outcomes = {"books/query1": (1, 1), "books/query2": (1, 0), "crm/query1": (0, 0)}
    tools = ["list_db", "query_db", "query_db", "execute_python"]
    rows = [
        (task, epoch, None, {"correct": float(outcomes[task][epoch - 1])}, tools)
        for task in outcomes
        for epoch in (1, 2)
    ]
    report = assemble(load_runs([write_run(tmp_path / "run", "dab", rows)]))
    table = report.tables["pass_at_k"]
    assert cells(table, "dataset") == ["books", "crm", "stratified average"]
    assert [cell.value for cell in table.column("pass@1")] == [0.75, 0.0, 0.375]
    assert [cell.value for cell in table.column("pass@2")] == [1.0, 0.0, 0.5]
    # books' resampled mean is 1, 0.75 or 0.5 (¼, ½, ¼); crm's single query adds 0: stratified 0.5, 0.375 or 0.25
    assert table.column("pass@1")[-1].text == "0.375 [0.250, 0.500] (n=3)"
    trajectory = report.tables["per_trajectory"]
    assert [cell.value for cell in trajectory.column("DB queries")] == [2.0]
    assert [cell.value for cell in trajectory.column("Python executions")] == [1.0]
    assert [cell.value for cell in trajectory.column("iterations")] == [3.0]
    assert "pass_at_k" in [figure.key for figure in report.figures]
    assert "difficulty" not in report.tables  # FDABench's tables are not DAB's


def test_dabstep_accuracy_easy_and_hard_with_cost(tmp_path):
    rows = [(f"e{i}", 1, "easy", {"correct": float(i < 3)}, []) for i in range(4)]
    rows += [(f"h{i}", 1, "hard", {"correct": float(i < 1)}, []) for i in range(4)]
    report = assemble(load_runs([write_run(tmp_path / "run", "dabstep", rows)]))
    table = report.tables["accuracy_by_level"]
    assert table.column("easy accuracy")[0].value == 0.75 and table.column("easy accuracy")[0].n == 4
    assert table.column("hard accuracy")[0].value == 0.25
    assert table.column("total cost $")[0].value == pytest.approx(0.08)


def test_dbgorilla_metrics_per_component_and_by_argument_count(tmp_path):
    def scores(ast, exact, search=None, groupby=None):
        return {
            "ast_score": ast,
            "exact_match": exact,
            "collection_routing": 1.0,
            "no_tool_call": 0.0,
            "component_exact_match.search_query": search,
            "component_exact_match.groupby_property": groupby,
        }

    rows = [
        ("dbgorilla-0", 1, None, scores(1.0, 1.0, search=1.0), ["query_database"]),  # one gold argument
        ("dbgorilla-1", 1, None, scores(0.55, 0.0, search=1.0, groupby=0.0), ["query_database"]),  # two
        ("dbgorilla-2", 1, None, scores(0.7, 0.0, search=0.0, groupby=1.0), ["query_database"]),  # two
    ]
    report = assemble(load_runs([write_run(tmp_path / "run", "dbgorilla", rows)]))
    metrics = report.tables["metrics"]
    assert metrics.column("search_query EM")[0].value == pytest.approx(2 / 3)
    assert metrics.column("groupby_property EM")[0].n == 2  # only the queries whose gold groups
    assert metrics.column("exact_match")[0].value == pytest.approx(1 / 3)
    by_arguments = report.tables["by_argument_count"]
    assert cells(by_arguments, "gold arguments") == ["1", "2"]
    assert [cell.value for cell in by_arguments.column("AST")] == [pytest.approx(1.0), pytest.approx(0.625)]


def test_a_dab_report_renders_its_pass_at_k_chart(tmp_path):
    rows = [(f"books/query{i}", e, None, {"correct": float(i == e)}, []) for i in (1, 2) for e in (1, 2)]
    files = build_report([write_run(tmp_path / "run", "dab", rows)], tmp_path / "report")
    assert files.files["figure:pass_at_k"].stat().st_size > 0
    assert "DAB pass@k per dataset" in (tmp_path / "report" / "report.md").read_text()
