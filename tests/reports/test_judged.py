"""`compare report --judge`: DAB's judged modes for wrong answers, with the judge metered apart."""

import csv
import json

from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import Message, ModelConfig, Price
from data_agent_compare.reports import build_report
from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.judged import JUDGED_MODES
from data_agent_compare.reports.runs import load_runs

from helpers import FIXTURES

RUN = FIXTURES / "report_run"
JUDGE = ModelConfig(alias="judge", provider="scripted", model_id="judge", price=Price(input_per_mtok=1.0))


def verdicts(request, context):
    """Planning's trajectories never list the schema: its verdicts come back malformed. Otherwise BND028
    is a wrong plan and BND029 a wrong data selection."""
    prompt = request.messages[-1].content
    if "get_schema_info" not in prompt:
        return Message(role="assistant", content="not JSON")
    mode = JUDGED_MODES[0] if context.task_id == "BND028" else JUDGED_MODES[1]
    return Message(role="assistant", content=json.dumps({"mode": mode, "justification": "because"}))


def test_wrong_answers_are_judged_apart_from_the_systems(tmp_path, scripted_model):
    scripted_model(verdicts)
    files = build_report([RUN], tmp_path, judge=JUDGE)
    report = assemble(load_runs([RUN]), judge=JUDGE, out=tmp_path / "again")
    table = report.tables["judged_failures"]
    rows = {(r[0].text, r[1].text): r for r in table.rows}
    # by construction beta answers both hard tasks wrongly with every system; alpha never errs
    assert sorted(rows) == [("planning", "beta"), ("reflection", "beta"), ("tool_use", "beta")]
    for system in ("tool_use", "reflection"):
        counts = [int(cell.value) for cell in rows[(system, "beta")][3:]]
        assert counts == [1, 1, 0, 0]
    assert [int(c.value) for c in rows[("planning", "beta")][3:]] == [0, 0, 0, 2]  # malformed: not judged
    assert "6 calls" in table.note and "metered apart" in table.note
    assert len(list((tmp_path / "judge").rglob("*.json"))) == 6  # one judge trace per verdict

    plain = assemble(load_runs([RUN]))  # the systems' own numbers do not change with a judge
    assert plain.tables["overview"].texts() == report.tables["overview"].texts()
    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    judged = [r["judged_mode"] for r in rows if r["judged_mode"]]
    assert sorted(judged) == sorted([JUDGED_MODES[0], JUDGED_MODES[1]] * 2 + ["not judged"] * 2)
    assert "Why answers were wrong" in files.files["markdown"].read_text()


def test_a_judge_that_cannot_be_used_exits_2_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    runner = CliRunner()
    unknown = runner.invoke(app, ["report", str(RUN), "--out", str(tmp_path / "a"), "--judge", "no-such-model"])
    assert unknown.exit_code == 2 and "no-such-model" in unknown.output
    keyless = runner.invoke(app, ["report", str(RUN), "--out", str(tmp_path / "b"), "--judge", "gpt-5"])
    assert keyless.exit_code == 2 and "OPENROUTER_API_KEY" in keyless.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_rendering_again_asks_the_judge_only_what_it_has_not_answered(tmp_path, scripted_model):
    asked: list[str] = []

    def counting(request, context):
        asked.append(context.task_id)
        return verdicts(request, context)

    scripted_model(counting)
    first = assemble(load_runs([RUN]), judge=JUDGE, out=tmp_path).tables["judged_failures"]
    assert len(asked) == 6 and "came from" not in first.note
    again = assemble(load_runs([RUN]), judge=JUDGE, out=tmp_path).tables["judged_failures"]
    # the four good verdicts are read back; the two malformed ones (planning) are asked again
    assert len(asked) == 6 + 2
    assert "2 calls" in again.note and "4 verdict(s) came from judge/verdicts.jsonl" in again.note
    assert again.texts() == first.texts()
    other = ModelConfig(alias="other", provider="scripted", model_id="other-judge")
    assemble(load_runs([RUN]), judge=other, out=tmp_path)
    assert len(asked) == 8 + 6  # another judge model answers for itself
