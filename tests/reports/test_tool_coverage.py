"""Tool coverage beside TOS (evaluators/dag.py): TOS gives credit for little work on a gold DAG with an answer
node, so the report shows, beside it, the share of the gold's required steps a system did."""

from __future__ import annotations

import json
import shutil

import pytest

from data_agent_compare.reports import tables
from data_agent_compare.reports.runs import load_runs
from data_agent_compare.reports.summary import confidence_lines
from data_agent_compare.tasks.bundled.loader import BundledBenchmark

from helpers import FIXTURES


def test_the_difficulty_table_and_summary_show_tool_coverage_beside_tos(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "report_run", run)
    lines = (run / "results.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:  # planning answers without its steps: coverage 0 whatever its TOS
        record["scores"]["coverage"] = 0.0 if record["system"] == "planning" else 1.0
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    data = load_runs([run])

    (spec,) = [s for s in BundledBenchmark.report_tables if s.kind == "by_difficulty"]  # its declared table
    table = tables.by_difficulty(data, spec)
    assert table.columns.index("tool coverage") == table.columns.index("TOS") + 1
    column = table.columns.index("tool coverage")
    by_system = {row[0].text: row[column].value for row in table.rows}
    assert by_system["planning"] == 0.0 and by_system["tool_use"] == pytest.approx(1.0)
    header = confidence_lines(data.records)[0]
    assert "| TOS | tool coverage |" in header
