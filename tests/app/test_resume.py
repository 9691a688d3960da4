"""`compare --resume` never mixes two runs: the recorded configuration only, refused when what it resolves
to changed (models, prompts, tasks) or when another process holds the run directory."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import CallContext, Message, ModelRequest
from data_agent_compare.core.runlog import RunDirBusy, RunDirLock, read_run
from data_agent_compare.engine.config import ConfigError
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import FIXTURES, load_tasks, make_plan

runner = CliRunner()


class AnswerA:
    """A scripted test model that answers "A" at once, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        self.calls += 1
        return tool_call_message("answer", {"answer": "A"})


def finished_plan(tmp_path, model, count: int = 3):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:count]
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], task_ids=[t.id for t in tasks])
    execute(plan)
    return plan


def test_resume_takes_no_flag_but_where_and_the_passwords_the_manifest_dropped(tmp_path):
    refused = runner.invoke(app, ["--resume", "--out", str(tmp_path), "--epochs", "2", "--workflows", "planning"])
    assert refused.exit_code == 2
    assert "--resume" in refused.output and "--epochs" in refused.output and "--workflows" in refused.output
    given_again = runner.invoke(app, ["--resume", "--out", str(tmp_path), "--base-url", "http://u:p@127.0.0.1:1/v1"])
    assert given_again.exit_code == 2 and "takes no" not in given_again.output  # refused for another reason
    assert "nothing to resume" in given_again.output


def test_a_changed_model_prompt_or_task_is_refused_naming_what_changed_with_a_scripted_model(tmp_path, scripted_model):
    plan = finished_plan(tmp_path, scripted_model(AnswerA()))
    plan.models = [plan.models[0].model_copy(update={"model_id": "another-model", "base_url": "http://x:y@h/v1"})]
    plan.tasks = [plan.tasks[0].model_copy(update={"question": "Edited?"}), *plan.tasks[1:]]
    plan.systems["tool_use"].describe = lambda: {"name": "tool_use", "prompt_hash": "edited"}
    recorded = json.loads((plan.run_dir / "manifest.json").read_text())
    (plan.run_dir / "manifest.json").write_text(json.dumps({**recorded, "python_sandbox": "gone-since"}))
    with pytest.raises(ConfigError) as refused:
        execute(plan, resume=True)
    message = str(refused.value)
    assert message.startswith(f"cannot resume {plan.run_dir}: the run would mix two configurations")
    assert "model 'scripted' model_id: 'scripted-test-model' → 'another-model'" in message
    assert "model 'scripted' base_url: None → 'http://x:***@h/v1'" in message  # never the password
    assert "system 'tool_use' prompt_hash: '" in message and "' → 'edited'" in message
    assert f"tasks whose content changed (question, data or gold): {plan.tasks[0].id}" in message
    assert "python sandbox: 'gone-since' → " in message
    assert len(read_run(plan.run_dir).records) == 3  # nothing was run


def test_a_changed_alias_in_the_models_file_is_refused_with_a_scripted_model(tmp_path, scripted_model):
    scripted_model(AnswerA())
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  scripted: {provider: scripted, model_id: scripted-v1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {models}\nmodels: [scripted]\ntask_ids: [BND001]\n")
    out = tmp_path / "run"
    first = runner.invoke(app, ["--config", str(config), "--out", str(out)])
    assert first.exit_code == 0, first.output
    models.write_text("models:\n  scripted: {provider: scripted, model_id: scripted-v2}\n")
    resumed = runner.invoke(app, ["--resume", "--out", str(out)])
    assert resumed.exit_code == 2
    assert "model 'scripted' model_id: 'scripted-v1' → 'scripted-v2'" in resumed.output
    assert json.loads((out / "manifest.json").read_text())["models"][0]["model_id"] == "scripted-v1"


def test_a_changed_task_file_is_refused_naming_the_task(tmp_path):
    folder = tmp_path / "fdabench"
    shutil.copytree(FIXTURES / "fdabench", folder)  # no databases: every task is unavailable, no model call
    out = tmp_path / "run"
    flags = ["--benchmark", "fdabench", "--tasks-path", str(folder), "--models", "openai-compatible:m"]
    first = runner.invoke(app, [*flags, "--base-url", "http://127.0.0.1:9/v1", "--out", str(out)])
    assert first.exit_code == 0, first.output
    single = folder / "test_singlechoice.jsonl"
    lines = single.read_text().splitlines()
    record = json.loads(lines[0])
    record["query"] = record.get("query", "") + " (edited)"
    single.write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    resumed = runner.invoke(app, ["--resume", "--out", str(out)])
    assert resumed.exit_code == 2, resumed.output
    assert f"tasks whose content changed (question, data or gold): {record['task_id']}" in resumed.output


def test_a_run_directory_held_by_another_process_is_refused_with_a_scripted_model(tmp_path, scripted_model):
    model = AnswerA()
    plan = finished_plan(tmp_path, scripted_model(model))
    with RunDirLock(plan.run_dir), pytest.raises(RunDirBusy, match="is in use by another compare process"):
        execute(plan, resume=True)
    fresh = make_plan(tmp_path, plan.tasks, plan.models[0], ["tool_use"])  # a new run into the same --out
    with RunDirLock(plan.run_dir), pytest.raises(RunDirBusy):
        execute(fresh)
    assert model.calls == 3


def test_a_last_record_without_its_newline_is_kept_and_not_run_again_with_a_scripted_model(tmp_path, scripted_model):
    model = AnswerA()
    plan = finished_plan(tmp_path, scripted_model(model))
    results = plan.run_dir / "results.jsonl"
    results.write_text(results.read_text().rstrip("\n"))  # killed between the record and its newline
    execute(plan, resume=True)
    assert model.calls == 3 and len(read_run(plan.run_dir).records) == 3


def test_a_record_cut_inside_a_utf8_character_is_a_partial_write_for_report_and_resume_with_a_scripted_model(
    tmp_path, scripted_model
):
    """`kill -9` while the last record, holding a non-ASCII answer, was being written: its bytes end inside "é"."""
    model = AnswerA()
    plan = finished_plan(tmp_path, scripted_model(model))
    results = plan.run_dir / "results.jsonl"
    lines = results.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["answer"] = {**(last.get("answer") or {}), "text": "café crème"}
    whole = json.dumps(last, ensure_ascii=False).encode()
    cut = whole[: whole.index("é".encode()) + 1]  # the first of é's two bytes
    results.write_bytes(b"".join(lines[:-1]) + cut)

    reported = runner.invoke(app, ["report", str(plan.run_dir)])
    assert reported.exit_code == 0, reported.output
    assert "partial write" in reported.output and "Traceback" not in reported.output
    execute(plan, resume=True)
    assert model.calls == 4 and len(read_run(plan.run_dir).records) == 3  # the cut unit ran again
