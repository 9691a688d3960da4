"""`compare report` over runs of several benchmarks: one overview across them, a section per benchmark titled
by it, summary.md and the terminal table; the papers' table titles only on their own benchmark; a headline
that names the same leader as its significance line on a tie."""

import json
import re

from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.reports import build_report
from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.runs import load_runs

runner = CliRunner()


def test_a_report_over_two_benchmarks_has_both_in_the_overview_and_a_section_each(tmp_path, wide_run):
    bundled = wide_run("bundled", systems=3, tasks=6)
    dabstep = wide_run("dabstep", benchmark="dabstep", systems=2, tasks=6)
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(bundled), str(dabstep), "--out", str(out)])
    assert result.exit_code == 0, result.output

    markdown = (out / "report.md").read_text()
    overview = markdown.split("### Overview: every system × model × benchmark", 1)[1].split("\n\n")[1]
    rows = [line.split(" | ") for line in overview.splitlines()[2:]]
    assert {row[2] for row in rows} == {"bundled", "dabstep"}
    assert len(rows) == 3 * 2 + 2 * 2  # system × model × benchmark
    assert all(re.match(r"\d\.\d{3} \[\d\.\d{3}, \d\.\d{3}\] \(n=6\)", row[4]) for row in rows)
    assert "## bundled" in markdown and "## dabstep" in markdown
    assert "### dabstep: DABstep accuracy by level, with cost" in markdown
    assert "### bundled: By difficulty" in markdown and "FDABench" not in markdown

    page = (out / "report.html").read_text()
    assert 'id="benchmark-bundled"' in page and 'id="benchmark-dabstep"' in page
    summary = (out / "summary.md").read_text()
    assert "## bundled" in summary and "## dabstep" in summary
    assert "| easy | hard |" in summary  # DABstep's level split
    assert "bundled: comparison" in result.output and "dabstep: comparison" in result.output
    terminal = {word.strip("│┃") for line in result.output.splitlines() for word in line.split()}
    assert {"langgraph_plan_execute", "qwen3-30b-a3b-instruct"} <= terminal  # whole, even at 80 columns
    board = json.loads((out / "leaderboard.json").read_text())
    assert [b["benchmark"] for b in board["benchmarks"]] == ["bundled", "dabstep"]


def test_only_fdabench_runs_get_the_paper_table_numbers(wide_run):
    bundled = assemble(load_runs([wide_run("bundled", systems=2, tasks=3)]))
    assert "FDABench" not in " ".join(t.title for t in bundled.tables.values())
    fdabench = assemble(load_runs([wide_run("fda", benchmark="fdabench", systems=2, tasks=3)]))
    assert fdabench.tables["difficulty"].title == "By difficulty (FDABench Tables 3–5)"


def test_the_headline_names_the_same_leader_as_its_test_on_a_tie(wide_run):
    # the wide run's first two systems are both right on every task, with different costs
    report = assemble(load_runs([wide_run(systems=6, tasks=8)]))
    most = next(line for line in report.headline if line.startswith("Most accurate:"))
    versus = next(line for line in report.headline if " vs runner-up " in line)
    leader = most.removeprefix("Most accurate: ").split(" ")[0]
    assert "tied with" in most and versus.startswith(f"{leader} vs runner-up ")


def test_dabstep_level_split_is_in_the_summary_and_the_report(wide_run, tmp_path):
    run = wide_run("d", benchmark="dabstep", systems=2, tasks=6)
    assert runner.invoke(app, ["report", str(run)]).exit_code == 0
    summary = (run / "summary.md").read_text()
    assert "## Accuracy by level (n = tasks)" in summary
    assert re.search(r"\| langgraph_react \| gpt-5-mini \| \d\.\d{3} \(n=3\) \| \d\.\d{3} \(n=3\) \|", summary)
    files = build_report([run], tmp_path / "r")
    markdown = files.files["markdown"].read_text()
    assert "| system | model | easy accuracy | hard accuracy |" in markdown.replace(" | cost $/task | total cost $", "")
