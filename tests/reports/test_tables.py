"""The report's tables from the recorded run in tests/fixtures/report_run (tests/fixtures/make_report_run.py
says how it was made): what its scripted models did is known, so every expected number below follows
from that construction, not from running the code under test."""

import math

import pytest

from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.failures import MODES
from data_agent_compare.reports.runs import load_runs
from data_agent_compare.reports.summary import PHASES

from helpers import FIXTURES

RUN = FIXTURES / "report_run"
SYSTEMS = ["planning", "reflection", "tool_use"]
TASKS = 6  # two per level


@pytest.fixture(scope="module")
def report():
    return assemble(load_runs([RUN]))


def rows_by_pair(table):
    return {(row[0].text, row[1].text): row for row in table.rows}


def cell(table, pair, column):
    return rows_by_pair(table)[pair][table.columns.index(column)]


def test_overview_counts_beside_every_mean(report):
    table = report.tables["overview"]
    assert sorted(rows_by_pair(table)) == [(s, m) for s in SYSTEMS for m in ("alpha", "beta")]
    for system in SYSTEMS:
        for model in ("alpha", "beta"):
            assert cell(table, (system, model), "tasks").n == TASKS
    assert cell(table, ("reflection", "beta"), "infra errors").n == 1  # the provider failed once
    assert cell(table, ("tool_use", "beta"), "budget stops").n == 1  # the schema loop hit the step budget
    assert cell(table, ("tool_use", "beta"), "completed").n == TASKS - 1
    assert sum(c.n for c in table.column("errors")) == 0


def test_accuracy_cells_follow_the_scripted_models(report):
    table = report.tables["overview"]
    for system in SYSTEMS:
        alpha = cell(table, (system, "alpha"), "accuracy [95% CI]")
        assert (alpha.value, alpha.n, alpha.text) == (1.0, TASKS, "1.000 [1.000, 1.000] (n=6)")
    # beta: wrong on both hard tasks; tool_use also on its budget stop, planning on its no-tool-call task
    assert cell(table, ("tool_use", "beta"), "accuracy [95% CI]").value == pytest.approx(3 / 6)
    assert cell(table, ("planning", "beta"), "accuracy [95% CI]").value == pytest.approx(3 / 6)
    reflection = cell(table, ("reflection", "beta"), "accuracy [95% CI]")
    assert (reflection.value, reflection.n) == (pytest.approx(3 / 5), 5)  # the infra error is left out
    assert reflection.low < reflection.value < reflection.high
    assert reflection.link == {"system": "reflection", "model": "beta"}


def test_model_by_workflow_and_workflow_by_difficulty(report):
    table = report.tables["model_workflow"]
    assert table.columns == ["workflow", "alpha", "beta"]
    assert [row[0].text for row in table.rows] == SYSTEMS
    assert all(row[1].value == 1.0 for row in table.rows)
    by_level = report.tables["workflow_difficulty"]
    assert by_level.columns == ["workflow", "model", "easy", "medium", "hard"]
    for row in by_level.rows:
        hard = row[by_level.columns.index("hard")]
        assert hard.value == (1.0 if row[1].text == "alpha" else 0.0)
        assert hard.link["level"] == "hard"


def test_difficulty_table_has_only_the_metrics_the_benchmark_scored(report):
    table = report.tables["difficulty"]
    assert "TOS" in table.columns and "EX_SC" in table.columns and "EX_MC" in table.columns
    assert "RS" not in table.columns  # no judge in this run: no rubric score
    assert len(table.rows) == len(SYSTEMS) * 2 * 3


def test_phase_shares_add_up_to_the_total(report):
    table = report.tables["phases"]
    for row in table.rows:
        seconds = [row[table.columns.index(p)].value for p in PHASES]
        assert math.isclose(sum(seconds), row[table.columns.index("total s")].value, rel_tol=1e-9)
        shares = [float(row[table.columns.index(p)].text.split("(")[1].rstrip("%)")) for p in PHASES]
        assert sum(shares) == pytest.approx(100, abs=0.1 * len(PHASES))


def test_failure_modes_one_per_record(report):
    table = report.tables["failures"]
    assert table.columns[3:] == list(MODES)
    expected = {
        ("tool_use", "beta"): {"correct": 3, "wrong answer": 2, "budget stop": 1},
        ("planning", "beta"): {"correct": 3, "wrong answer": 2, "no tool call": 1},
        ("reflection", "beta"): {"correct": 3, "wrong answer": 2, "provider error": 1},
    }
    for pair, row in rows_by_pair(table).items():
        counts = {mode: int(row[3 + i].value) for i, mode in enumerate(MODES) if row[3 + i].value}
        assert counts == expected.get(pair, {"correct": TASKS})
        assert sum(counts.values()) == row[2].n


def test_exploring_share_counts_schema_listing(report):
    table = report.tables["exploring"]
    # tool_use and reflection list the schema once per task before one analysing query; planning never does
    assert cell(table, ("planning", "alpha"), "exploring").n == 0
    assert cell(table, ("tool_use", "alpha"), "exploring share").value == pytest.approx(0.5)
    beta = rows_by_pair(table)[("tool_use", "beta")]
    explored, calls = beta[3].n, beta[2].n
    assert explored > calls - explored  # the budget-stop loop only listed the schema


def test_tool_profile_counts_calls_per_tool(report):
    table = report.tables["tools"]
    rows = {(r[0].text, r[1].text, r[2].text): r for r in table.rows}
    assert rows[("planning", "alpha", "execute_sql")][3].n == TASKS
    assert ("planning", "alpha", "get_schema_info") not in rows
    assert all(r[table.columns.index("error rate")].value == 0 for r in table.rows)


def test_significance_pairs_among_the_top_systems(report):
    table = report.tables["significance"]
    pairs = {(r[0].text, r[1].text): r for r in table.rows}
    column = {name: i for i, name in enumerate(table.columns)}
    difference, significant = column["accuracy difference [95% CI]"], column["significant (Holm p<0.05)"]
    needed = column["tasks needed (80% power)"]
    same = pairs[("planning/alpha", "reflection/alpha")]
    assert same[difference].value == 0 and same[significant].text == "no" and same[needed].text == "–"
    differing = next(r for r in table.rows if r[difference].value and r[difference].value != 0)
    assert int(differing[needed].text.replace(",", "")) > differing[2].value  # six tasks cannot show a 0.5 gap
    assert "comparisons)" in table.title  # the number of comparisons is stated


def test_index_building_is_reported_apart_from_the_tasks_and_only_when_a_system_built_one(report, tmp_path):
    import json
    import shutil

    from data_agent_compare.reports.summary import index_builds, markdown

    assert "indexing" not in report.tables  # the recorded run has no RAG system
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    manifest = json.loads((run / "manifest.json").read_text())
    built = {"index": "entity_graph", "corpus": "2708c57d36c8dd0e", "model": "alpha", "passages": 46, "cached": False}
    built |= {"model_calls": 10, "input_tokens": 7907, "output_tokens": 1197, "cost_usd": 0.25, "seconds": 3.5}
    read = {**built, "index": "communities", "cached": True, "model_calls": 0, "cost_usd": 0.0, "built": {}}
    failed = {"corpus": "99aa", "model": "beta", "error": "ModelError: every indexing call failed"}
    manifest["systems"]["planning"]["indexing"] = [built, read, failed]
    (run / "manifest.json").write_text(json.dumps(manifest))

    data = load_runs([run])
    table = assemble(data).tables["indexing"]
    assert [[c.text for c in row[1:8]] for row in table.rows] == [
        ["planning", "alpha", "entity_graph", "2708c57d36c8dd0e", "46", "no", "10"],
        ["planning", "alpha", "communities", "2708c57d36c8dd0e", "46", "yes", "0"],
        ["planning", "beta", "", "99aa", "–", "failed: ModelError: every indexing call failed", "0"],
    ]
    summary = markdown(data.summary(), data.runs[0].manifest)
    assert "## Index building (before the tasks; not in the per-task means above)" in summary
    row = "| planning | alpha | entity_graph | 2708c57d36c8dd0e | 46 | no | 10 | 7,907/1,197 | 0.2500 | 3.5 |"
    assert row in summary
    assert "Spent on indexes in this run: 10 model calls, $0.2500" in summary  # the cached read cost nothing now
    assert len(index_builds(data.runs[0].manifest)) == 3
