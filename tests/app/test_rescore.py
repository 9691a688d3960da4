"""`compare rescore RUN --out NEW`: a run's records scored again with today's scorers into a new run
directory; the original is untouched, both scorer versions are recorded, and `compare report` reads it."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import CallContext, Message, ModelRequest
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.scorer import scorer_version
from data_agent_compare.engine.runner import execute
from data_agent_compare.evaluators import exact_match as exact_match_module
from data_agent_compare.providers.scripted import tool_call_message

from helpers import bump_scorer_version, load_tasks, make_plan, steps_taken

runner = CliRunner()


def scripted(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model: one SQL query, then "B"; as the judge, full marks."""
    if context.system == "judge":
        return Message(role="assistant", content=json.dumps({"score": 1, "justification": "covers it"}))
    if steps_taken(request) == 0:
        return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM `Sales Team`"})
    return tool_call_message("answer", {"answer": "B"})


def judged_run(tmp_path, model):
    """A finished run of a choice, a factoid and a report task, judged by the scripted test model."""
    tasks = load_tasks("bundled")
    tasks = [next(t for t in tasks if t.question_type == kind) for kind in ("single_choice", "factoid", "report")]
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], task_ids=[t.id for t in tasks], judge=model.alias)
    plan.judge = model
    execute(plan)
    return plan.run_dir


def files_of(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_rescoring_an_unchanged_run_reproduces_its_scores_with_a_scripted_model(tmp_path, scripted_model):
    source = judged_run(tmp_path, scripted_model(scripted))
    before = files_of(source)
    result = runner.invoke(app, ["rescore", str(source), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    assert "3 records scored again, 0 with changed scores, 0 with a scoring error" in result.output
    assert f"scorer exact_match: version {scorer_version('exact_match')} (unchanged)" in result.output

    original, again = read_run(source), read_run(tmp_path / "again")
    assert [(r.key, r.scores) for r in again.records] == [(r.key, r.scores) for r in original.records]
    report = next(r for r in again.records if r.question_type == "report")
    assert report.scores["rs"] == 1.0 and report.judge_usage.input_tokens > 0  # judged again
    assert files_of(source) == before  # the original is untouched
    assert again.manifest.rescored.source == str(source)
    assert (
        again.manifest.rescored.scorers_before == again.manifest.identity.scorers == original.manifest.identity.scorers
    )
    assert runner.invoke(app, ["report", str(tmp_path / "again")]).exit_code == 0
    assert (tmp_path / "again" / "report.html").is_file()


def test_rescoring_after_a_scorer_changed_records_both_versions_with_a_scripted_model(
    tmp_path, scripted_model, monkeypatch
):
    source = judged_run(tmp_path, scripted_model(scripted))
    original = exact_match_module.exact_match

    def inverted(task, answer):
        verdict = original(task, answer)
        return None if verdict is None else 1.0 - verdict

    monkeypatch.setattr(exact_match_module, "exact_match", inverted)
    version, _ = bump_scorer_version(monkeypatch, "exact_match")
    result = runner.invoke(app, ["rescore", str(source), "--out", str(tmp_path / "again")])
    assert result.exit_code == 0, result.output
    assert f"scorer exact_match: version {version} → {version}.1" in result.output
    assert "3 records scored again, 2 with changed scores" in result.output

    old, new = read_run(source), read_run(tmp_path / "again")
    assert new.manifest.identity.scorers["exact_match"] == version + ".1"
    assert new.manifest.rescored.scorers_before["exact_match"] == version
    assert old.manifest.identity.scorers["exact_match"] == version and old.manifest.rescored is None
    assert runner.invoke(app, ["report", str(tmp_path / "again")]).exit_code == 0
    summary = (tmp_path / "again" / "summary.md").read_text()
    assert f"rescored from {source}" in summary and f"exact_match {version} → {version}.1" in summary
    for before, after in zip(old.records, new.records, strict=True):
        if "exact_match" in before.scores:
            assert after.scores["exact_match"] == 1.0 - before.scores["exact_match"]


def test_rescore_refuses_a_folder_that_is_not_empty_and_a_folder_that_is_no_run(tmp_path, scripted_model):
    source = judged_run(tmp_path, scripted_model(scripted))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    refused = runner.invoke(app, ["rescore", str(source), "--out", str(taken)])
    assert refused.exit_code == 2 and "is not empty" in refused.output
    no_run = runner.invoke(app, ["rescore", str(tmp_path / "nothing"), "--out", str(tmp_path / "x")])
    assert no_run.exit_code == 2 and "is not a run directory" in no_run.output
    assert (taken / "notes.txt").read_text() == "mine" and not (tmp_path / "x").exists()
