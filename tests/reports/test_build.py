"""`compare report`: the files it writes, several runs combined on their common tasks, old runs re-rendered,
and bad input named with exit status 2."""

import csv
import json
import shutil

import duckdb
import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.reports import ReportError, build_report
from data_agent_compare.reports.runs import load_runs

from helpers import FIXTURES, load_tasks

RUN = FIXTURES / "report_run"
runner = CliRunner()


def copy_run(tmp_path, name="run"):
    target = tmp_path / name
    shutil.copytree(RUN, target)
    return target


def records_of(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def write_records(run_dir, records):
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def embedded_data(report_html):
    text = report_html.read_text()
    start = text.index('<script type="application/json" id="report-data">') + len(
        '<script type="application/json" id="report-data">'
    )
    return json.loads(text[start : text.index("</script>", start)])


def test_every_report_file_is_written_from_the_run_log(tmp_path):
    out = tmp_path / "report"
    files = build_report([RUN], out)
    expected = {"report.html", "report.md", "results.csv", "results.parquet", "leaderboard.json", "figures"}
    assert expected <= {p.name for p in out.iterdir()}
    records = records_of(RUN)
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(records)
    assert {(r["task_id"], r["system"], r["model"]) for r in rows} == {
        (r["task_id"], r["system"], r["model"]) for r in records
    }
    parquet = duckdb.sql(f"SELECT task_id, system, model, status FROM read_parquet('{out / 'results.parquet'}')")
    assert sorted(parquet.fetchall()) == sorted((r["task_id"], r["system"], r["model"], r["status"]) for r in records)
    board = json.loads((out / "leaderboard.json").read_text())
    accuracies = [row["accuracy"]["mean"] for row in board["rows"]]
    assert accuracies == sorted(accuracies, reverse=True)
    assert all(row["tasks"] == len({r["task_id"] for r in records}) for row in board["rows"])
    markdown = (out / "report.md").read_text()
    for png in (p for key, p in files.files.items() if key.startswith("figure:")):
        assert png.stat().st_size > 0 and f"figures/{png.name}" in markdown
        assert f"figures/{png.stem}.svg" in markdown and png.with_suffix(".svg").exists()
    assert "| tool_use | beta | 6 | 6 | 5 |" in markdown  # the overview's counts: tasks, units, completed


def test_the_drill_down_has_each_task_with_every_system_side_by_side(tmp_path):
    build_report([RUN], tmp_path)
    data = embedded_data(tmp_path / "report.html")
    records = records_of(RUN)
    assert sorted(t["id"] for t in data["tasks"]) == sorted({r["task_id"] for r in records})
    task = next(t for t in data["tasks"] if t["id"] == "BND001")
    gold_task = next(t for t in load_tasks("bundled") if t.id == "BND001")
    assert task["question"] == gold_task.question and task["sources"]
    assert len(task["entries"]) == len([r for r in records if r["task_id"] == "BND001"])
    failed = next(e for e in task["entries"] if e["status"] == "infra_error")
    assert failed["failure"] == "provider error" and failed["steps"] is not None
    steps = next(e for e in task["entries"] if e["system"] == "tool_use")["steps"]
    assert {s["kind"] for s in steps} == {"model_call", "tool_call"}
    assert all("in" in s and "cost" in s for s in steps if s["kind"] == "model_call")


def test_runs_of_a_system_and_model_with_the_same_settings_are_one_row_when_merged(tmp_path):
    first, second = copy_run(tmp_path, "first"), copy_run(tmp_path, "second")
    write_records(second, [r for r in records_of(second) if r["task_id"] != "BND029"])
    data = load_runs([first, second], merge_runs=True)
    assert {(r.system, r.model) for r in data.records} == {
        (s, m) for s in ("planning", "reflection", "tool_use") for m in ("alpha", "beta")
    }
    # the second run's trials of a task are numbered after the first's: more epochs of one row
    assert {r.epoch for r in data.records if r.task_id == "BND001"} == {1, 2}
    assert {r.epoch for r in data.records if r.task_id == "BND029"} == {1} and len(data.common_tasks) == 6
    both = ["report", str(first), str(second), "--out", str(tmp_path / "both"), "--merge-runs"]
    result = runner.invoke(app, both)
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "both" / "summary.md").read_text()
    assert "runs merged (--merge-runs)" in summary
    assert "| tool_use | beta | 6 | 11 |" in summary  # 6 tasks; 11 units: 6 from the first run, 5 from the second
    assert "bundled: comparison" in result.output and "summary.md" in result.output  # the terminal table too


def test_two_runs_of_one_system_and_model_are_two_rows_named_by_their_label_or_folder(tmp_path):
    """A before/after comparison: the same settings, other answers; never averaged into one row unasked."""
    first, second = copy_run(tmp_path, "first"), copy_run(tmp_path, "second")
    manifest = json.loads((first / "manifest.json").read_text())
    manifest["config"]["label"] = "before"  # `compare run --label before`
    (first / "manifest.json").write_text(json.dumps(manifest))
    write_records(second, [{**r, "scores": {**r["scores"], "exact_match": 1.0}} for r in records_of(second)])
    data = load_runs([first, second])
    rows = {(r.system, r.model): r for r in data.summary()}
    before, after = rows[("tool_use@before", "beta")], rows[("tool_use@second", "beta")]
    assert before.units == after.units == 6 and after.accuracy == 1.0 and before.accuracy != after.accuracy
    assert "tool_use" not in {system for system, _ in rows}
    result = runner.invoke(app, ["report", str(first), str(second), "--out", str(tmp_path / "both")])
    assert result.exit_code == 0, result.output
    summary = (tmp_path / "both" / "summary.md").read_text()
    assert "| tool_use@before | beta | 6 | 6 |" in summary and "| tool_use@second | beta | 6 | 6 |" in summary
    assert "runs kept apart" in summary


def test_runs_with_other_settings_stay_apart_labelled_by_what_differs_on_common_tasks(tmp_path):
    first, second = copy_run(tmp_path, "first"), copy_run(tmp_path, "second")
    write_records(second, [r for r in records_of(second) if r["task_id"] != "BND029"])
    manifest = json.loads((second / "manifest.json").read_text())
    manifest["budgets"]["max_steps"] = 10
    (second / "manifest.json").write_text(json.dumps(manifest))
    data = load_runs([first, second])
    systems = {r.system for r in data.records}
    assert "tool_use [max_steps=6]" in systems and "tool_use [max_steps=10]" in systems
    assert "tool_use" not in systems
    assert "BND029" not in data.common_tasks and len(data.common_tasks) == 5
    assert data.left_out == {str(first): ["BND029"]}
    result = runner.invoke(app, ["report", str(first), str(second), "--out", str(tmp_path / "both")])
    assert result.exit_code == 0, result.output
    assert "BND029" in (tmp_path / "both" / "report.md").read_text()  # said to be left out


def test_rows_without_a_common_task_are_refused_and_split_runs_of_one_row_are_joined(tmp_path):
    first, second = copy_run(tmp_path, "first"), copy_run(tmp_path, "second")
    write_records(second, [{**r, "task_id": "X" + r["task_id"]} for r in records_of(second)])
    with pytest.raises(ReportError, match="--merge-runs joins"):  # apart, two rows of one system share no task
        load_runs([first, second])
    assert len(load_runs([first, second], merge_runs=True).common_tasks) == 12  # one run's tasks, then the other's
    manifest = json.loads((second / "manifest.json").read_text())
    (second / "manifest.json").write_text(json.dumps({**manifest, "budgets": {**manifest["budgets"], "max_steps": 9}}))
    with pytest.raises(ReportError, match="share no task"):
        load_runs([first, second], merge_runs=True)


def test_a_run_written_before_records_kept_their_question_re_renders(tmp_path):
    old = copy_run(tmp_path)
    manifest = json.loads((old / "manifest.json").read_text())
    manifest.pop("schema_version")
    (old / "manifest.json").write_text(json.dumps(manifest))
    legacy = [
        {k: v for k, v in r.items() if k not in ("schema_version", "question", "data_sources")} for r in records_of(old)
    ]
    write_records(old, legacy)
    build_report([old], tmp_path / "report")
    task = next(t for t in embedded_data(tmp_path / "report" / "report.html")["tasks"] if t["id"] == "BND002")
    assert task["question"] == next(t.question for t in load_tasks("bundled") if t.id == "BND002")


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        (lambda run: run.joinpath("results.jsonl").write_text('{"task_id": 1}\n'), "results.jsonl:1"),
        (lambda run: run.joinpath("manifest.json").write_text("{not json"), "manifest.json:1"),
        (
            lambda run: next(run.glob("traces/tool_use/alpha/*.json")).write_text('{"steps": 3}'),
            "traces/tool_use/alpha",
        ),
    ],
)
def test_bad_input_is_named_with_exit_status_2(tmp_path, damage, named):
    run = copy_run(tmp_path)
    damage(run)
    result = runner.invoke(app, ["report", str(run), "--out", str(tmp_path / "report")])
    assert result.exit_code == 2, result.output
    assert named in result.output.replace("\n", "") and "Traceback" not in result.output


def test_a_missing_trace_is_a_warning_and_the_rest_is_reported(tmp_path):
    run = copy_run(tmp_path)
    missing = next(run.glob("traces/planning/beta/*.json"))
    missing.unlink()
    files = build_report([run], tmp_path / "report")
    assert any(missing.name in warning for warning in files.warnings)
    assert (tmp_path / "report" / "report.html").exists()


def test_several_runs_need_an_out_folder(tmp_path):
    result = runner.invoke(app, ["report", str(copy_run(tmp_path, "a")), str(copy_run(tmp_path, "b"))])
    assert result.exit_code == 2 and "--out" in result.output
