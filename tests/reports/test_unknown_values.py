"""Unknown is not zero: DAB's published trajectories record no cost, and two of the three fixture trials no
tokens. Their report says "–", averages tokens over the trials that recorded them (with their n), never names
such a row cheapest nor draws it on the cost frontier, and exports an empty cost (issue 25 item 1: the report
once showed $0.0000, "$ per correct 0.0000", tokens 0/0 and "Cheapest: dab-react/gemini-2.5-flash $0.00000")."""

import csv
import json
import shutil

from data_agent_compare.engine.importer import import_trajectories
from data_agent_compare.reports import build_report, markdown, summarize
from data_agent_compare.reports.plots import cost_quality
from data_agent_compare.reports.runs import load_runs
from data_agent_compare.reports.summary import COLUMNS
from data_agent_compare.tasks.dab import DataAgentBench

from helpers import FIXTURES, read_records

TRAJECTORIES = FIXTURES / "dab_trajectories"
BOOKREVIEW = FIXTURES / "dab_final/query_bookreview"


def imported(tmp_path):
    out = tmp_path / "imported"
    import_trajectories(TRAJECTORIES, out, benchmark=DataAgentBench(BOOKREVIEW))
    return out


def priced_copy(run_dir, out):
    """The same trials as a system whose every call's cost and tokens are known, answering correctly."""
    shutil.copytree(run_dir, out)
    lines = []
    for line in (out / "results.jsonl").read_text().splitlines():
        record = json.loads(line)
        record["system"] = "priced"
        record["usage"] = {"input_tokens": 100, "output_tokens": 10, "cost_usd": 0.002, "cost_source": "provider"}
        record["scores"]["correct"] = 1.0  # it earned its place: only a row with a correct answer is cheapest
        lines.append(json.dumps(record))
    (out / "results.jsonl").write_text("\n".join(lines) + "\n")
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["systems"] = {"priced": manifest["systems"]["dab-react"]}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def test_imported_trials_keep_unknown_usage_unknown(tmp_path):
    records = read_records(imported(tmp_path))
    assert all(r.usage.cost_usd is None and r.usage.cost_source == "unknown" for r in records)
    timed = [r for r in records if r.usage.input_tokens is not None]
    assert len(timed) == 1  # the one trial with llm_calls.jsonl
    untimed = [r for r in records if r.usage.input_tokens is None]
    assert all(r.usage.output_tokens is None for r in untimed)
    assert all(all(t.latency_s is None for t in r.latency_by_phase.values()) for r in untimed)


def test_the_summary_shows_unknown_as_unknown_and_means_over_what_is_known(tmp_path):
    records = read_records(imported(tmp_path))
    (row,) = summarize(records)
    assert row.total_cost_usd is None and row.cost_unknown == 3 and row.cost_per_correct_usd is None
    known = next(r for r in records if r.usage.input_tokens is not None)
    assert row.tokens_n == 1 and row.mean_input_tokens == known.usage.input_tokens
    cells = {column.name: column.cell(row) for column in COLUMNS}
    assert cells["cost $"] == "–" and cells["$ per correct"] == "–" and cells["$ per task"] == "–"
    assert cells["tokens in/out"].endswith("(n=1)")
    run = load_runs([tmp_path / "imported"])
    text = markdown(run.summary(), run.runs[0].manifest, records=run.records)
    assert "0.0000" not in text.split("## Mean latency")[0]  # no $0 anywhere in the table or its notes
    assert "3 unit(s) have no recorded cost (unknown, not $0)" in text


def test_a_row_of_unknown_cost_is_never_cheapest_nor_on_the_frontier(tmp_path):
    run = imported(tmp_path)
    priced = priced_copy(run, tmp_path / "priced")
    files = build_report([run, priced], tmp_path / "report")
    report = (tmp_path / "report" / "report.md").read_text()
    assert "Cheapest: priced/gemini-2.5-flash $0.00200 per task" in report
    assert "Cost unknown (not recorded; never counted as $0): dab-react/gemini-2.5-flash" in report
    figure = cost_quality(load_runs([run, priced]))
    drawn = [v["row"] for layer in figure.spec["layer"] for v in layer.get("data", {}).get("values", [])]
    assert "dab-react/gemini-2.5-flash" not in drawn and "priced/gemini-2.5-flash" in drawn
    assert "1 row(s) of unknown cost not drawn" in json.dumps(figure.spec)
    with files.files["csv"].open() as handle:
        rows = list(csv.DictReader(handle))
    assert {r["cost_usd"] for r in rows if r["system"] == "dab-react"} == {""}  # empty: unknown, not 0
    board = json.loads(files.files["leaderboard"].read_text())
    unknown = next(e for e in board["rows"] if e["system"] == "dab-react")
    assert unknown["total_cost_usd"] is None and unknown["cost_unknown_units"] == 3
