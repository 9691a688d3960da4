"""Runs that cannot drift: `--resume` and `--replay` refuse, naming what changed since the run started —
the code, a plugin file, a scorer's version, a task data file, generation settings — unless told
`--allow-drift`, which the manifest records."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import CallContext, Message, ModelRequest, create_benchmark
from data_agent_compare.core.runlog import read_manifest, read_run
from data_agent_compare.core.scorer import scorer_version
from data_agent_compare.engine import identity
from data_agent_compare.engine.config import ConfigError, in_current_spelling
from data_agent_compare.engine.runner import execute, plan_replay
from data_agent_compare.providers.scripted import tool_call_message

from helpers import FIXTURES, bump_scorer_version, load_tasks, make_plan, scripted_provider

runner = CliRunner()


def answer_a(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model that answers "A" at once."""
    return tool_call_message("answer", {"answer": "A"})


def finished_plan(tmp_path, model, **config):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:2]
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], task_ids=[t.id for t in tasks], **config)
    execute(plan)
    return plan


def refusal(plan) -> str:
    """The message of a resume refused (nothing run)."""
    before = len(read_run(plan.run_dir).records)
    with pytest.raises(ConfigError) as refused:
        execute(plan, resume=True)
    assert len(read_run(plan.run_dir).records) == before
    return str(refused.value)


def test_a_resume_with_nothing_changed_goes_on_with_a_scripted_model(tmp_path, scripted_model):
    plan = finished_plan(tmp_path, scripted_model(answer_a))
    manifest = execute(plan, resume=True)
    assert manifest.status == "completed" and manifest.drift_allowed == []
    assert manifest.identity.scorers == {name: scorer_version(name) for name in plan.benchmark.scorers}
    assert any(path.endswith("regional_sales.sqlite") for path in manifest.identity.data_files)


def test_changed_code_is_refused_naming_the_commits_with_a_scripted_model(tmp_path, scripted_model, monkeypatch):
    plan = finished_plan(tmp_path, scripted_model(answer_a))
    recorded = read_manifest(plan.run_dir).identity.code
    other = recorded.model_copy(update={"commit": "f00d" * 10, "tree_sha256": "0" * 64, "package_sha256": "0" * 64})
    monkeypatch.setattr(identity, "process_code_identity", lambda: other)
    message = refusal(plan)
    assert message.startswith(f"cannot resume {plan.run_dir}: the run would mix two configurations")
    if recorded.source == "checkout":
        assert f"code: the suite's committed files differ (commit {recorded.commit[:12]} → f00df00df00d)" in message
    else:
        assert (
            f"code: the installed package's files differ (sha256 {recorded.package_sha256[:12]} → 000000000000)"
            in message
        )
    assert "resume with --allow-drift" in message


def test_an_edited_plugin_file_is_refused_with_a_scripted_model(tmp_path, scripted_model):
    plugin = tmp_path / "my_plugin.py"
    plugin.write_text("PROMPT = 'one'\n")
    plan = finished_plan(tmp_path, scripted_model(answer_a), plugins=[str(plugin)])
    plugin.write_text("PROMPT = 'two'\n")
    assert f"plugin '{plugin}': file sha256 " in refusal(plan)


def test_a_new_scorer_version_is_refused_with_a_scripted_model(tmp_path, scripted_model, monkeypatch):
    plan = finished_plan(tmp_path, scripted_model(answer_a))
    version, _ = bump_scorer_version(monkeypatch, "exact_match")
    assert f"scorer 'exact_match': version '{version}' → '{version}.1'" in refusal(plan)


def test_generation_settings_changed_since_the_run_are_refused_with_a_scripted_model(tmp_path, scripted_model):
    plan = finished_plan(tmp_path, scripted_model(answer_a), generation={"temperature": 0.0})
    plan.config = plan.config.model_copy(
        update={"generation": plan.config.generation.model_copy(update={"temperature": 0.7})}
    )
    assert "config generation.temperature: 0.0 → 0.7" in refusal(plan)


def dabstep_plan(tmp_path, model):
    """A plan of the DABstep fixture's first two tasks, loaded afresh (a run rewrites its plan's tasks)."""
    folder = tmp_path / "dabstep"
    benchmark = create_benchmark("dabstep", folder)
    plan = make_plan(tmp_path, benchmark.load()[:2], model, ["tool_use"], benchmark=benchmark, tasks_path=str(folder))
    plan.config = plan.config.model_copy(update={"benchmark": "dabstep", "task_ids": [t.id for t in plan.tasks]})
    return plan


def dabstep_run(tmp_path, model):
    """A finished run of the DABstep fixture's first two tasks (a copy of its folder)."""
    folder = tmp_path / "dabstep"
    shutil.copytree(FIXTURES / "dabstep", folder)
    plan = dabstep_plan(tmp_path, model)
    execute(plan)
    return plan, folder


def test_an_edited_dabstep_manual_is_refused_and_allow_drift_is_recorded_with_a_scripted_model(
    tmp_path, scripted_model
):
    plan, folder = dabstep_run(tmp_path, scripted_model(answer_a))
    manual = folder / "manual.md"
    assert str(manual) in read_manifest(plan.run_dir).identity.data_files
    manual.write_text(manual.read_text().replace("fee", "FEE", 1))  # the same size
    message = refusal(dabstep_plan(tmp_path, plan.models[0]))
    assert f"data file {manual}: content changed (sha256 " in message
    assert "payments-readme.md" not in message and "fees.json" not in message  # only what changed

    manifest = execute(dabstep_plan(tmp_path, plan.models[0]), resume=True, allow_drift=True)
    assert [(d.by, d.changes) for d in manifest.drift_allowed] == [("resume", [message.splitlines()[1].strip()])]
    assert read_manifest(plan.run_dir).drift_allowed == manifest.drift_allowed


def test_compare_resume_exits_2_on_an_edited_data_file_and_allow_drift_goes_on_with_a_scripted_model(tmp_path):
    folder = tmp_path / "dabstep"
    shutil.copytree(FIXTURES / "dabstep", folder)
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  scripted: {provider: scripted, model_id: scripted-v1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"models_file: {models}\nmodels: [scripted]\nbenchmark: dabstep\ntasks_path: {folder}\nlimit: 1\n"
    )
    out = tmp_path / "run"
    with scripted_provider() as install:
        install(answer_a)
        first = runner.invoke(app, ["--config", str(config), "--out", str(out)])
        assert first.exit_code == 0, first.output
        (folder / "fees.json").write_text((folder / "fees.json").read_text() + "\n")
        refused = runner.invoke(app, ["--resume", "--out", str(out)])
        allowed = runner.invoke(app, ["--resume", "--out", str(out), "--allow-drift"])
    assert refused.exit_code == 2
    assert f"data file {folder / 'fees.json'}: size " in refused.output and "Traceback" not in refused.output
    assert allowed.exit_code == 0, allowed.output
    assert json.loads((out / "manifest.json").read_text())["drift_allowed"][0]["by"] == "resume"
    summary = (out / "summary.md").read_text()
    assert f"went on with --allow-drift past: data file {folder / 'fees.json'}" in summary
    assert runner.invoke(app, ["--out", str(tmp_path / "new"), "--allow-drift"]).exit_code == 2


def test_a_replay_is_refused_when_a_data_file_changed_and_allowed_with_allow_drift(tmp_path):
    with scripted_provider() as install:
        plan, folder = dabstep_run(tmp_path, install(answer_a))
    (folder / "acquirer_countries.csv").write_text("acquirer,country_code\n")
    with pytest.raises(ConfigError) as refused:
        execute(plan_replay(str(plan.run_dir), str(tmp_path / "replay")))
    assert str(refused.value).startswith(f"cannot replay {plan.run_dir}: changed since it was recorded:")
    assert f"data file {folder / 'acquirer_countries.csv'}: size " in str(refused.value)
    manifest = execute(plan_replay(str(plan.run_dir), str(tmp_path / "replay")), allow_drift=True)
    assert manifest.drift_allowed[0].by == "replay" and manifest.status == "completed"


def test_a_run_log_of_schema_2_resumes_on_its_commit_and_is_refused_on_another(tmp_path, scripted_model):
    plan = finished_plan(tmp_path, scripted_model(answer_a))
    path = plan.run_dir / "manifest.json"
    old = json.loads(path.read_text())
    for field in ("identity", "drift_allowed", "rescored"):
        old.pop(field)
    commit = identity.process_code_identity().commit
    path.write_text(json.dumps({**old, "schema_version": 2, "git": {"sha": "0123456789abcdef", "dirty": False}}))
    if commit:  # a checkout: the recorded commit is compared
        assert "code: commit 0123456789ab → " in refusal(plan)
    path.write_text(json.dumps({**old, "schema_version": 2, "git": {"sha": commit or "unknown", "dirty": False}}))
    manifest = execute(plan, resume=True)
    assert manifest.identity is not None and read_manifest(plan.run_dir).schema_version == 3


# ---------------------------------------------------------------- configuration keys renamed since a run


def in_old_spelling(run_dir, **changes) -> None:
    """Rewrite a run's manifest as a run recorded it before `workflows` became `systems` and DAB's settings
    moved from top-level keys into `benchmark_settings.dab` (they were recorded for every benchmark)."""
    path = run_dir / "manifest.json"
    manifest = json.loads(path.read_text())
    config = dict(manifest["config"])
    config["workflows"] = config.pop("systems")
    config.pop("benchmark_settings")
    config |= {"hints": False, "dab_validator_cpu_s": 600.0, "postgres_url": None, "postgres_reader_url": None}
    path.write_text(json.dumps({**manifest, "config": config | changes}))


def test_old_spellings_of_the_configuration_read_as_todays_and_a_real_difference_stays():
    old = {"benchmark": "dab", "workflows": ["tool_use"], "hints": True, "dab_validator_cpu_s": 60.0}
    assert in_current_spelling(old) == {
        "benchmark": "dab",
        "systems": ["tool_use"],
        "benchmark_settings": {"dab": {"hints": True, "validator_cpu_s": 60.0}},
    }
    assert in_current_spelling({"benchmark": "bundled", "hints": False, "postgres_url": None}) == {
        "benchmark": "bundled"  # DAB's defaults, recorded for every benchmark, asked for nothing
    }
    kept = {"benchmark": "bundled", "hints": True}  # asked for, and no run of today's `bundled` can have it
    assert in_current_spelling(kept) == kept
    both = {"benchmark": "dab", "workflows": ["planning"], "systems": ["tool_use"], "hints": True,
            "benchmark_settings": {"dab": {"hints": False}}}  # fmt: skip
    assert in_current_spelling(both) == both  # the old and the new spelling disagree: both are shown
    assert in_current_spelling({"systems": ["tool_use"], "epochs": 2}) == {"systems": ["tool_use"], "epochs": 2}


def test_compare_resume_of_a_run_recorded_before_the_renames_goes_on_without_allow_drift(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text("models:\n  scripted: {provider: scripted, model_id: scripted-v1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {models}\nmodels: [scripted]\nworkflows: [tool_use]\nlimit: 2\n")
    out = tmp_path / "run"
    with scripted_provider() as install:
        install(answer_a)
        first = runner.invoke(app, ["--config", str(config), "--out", str(out)])
        assert first.exit_code == 0, first.output
        results = out / "results.jsonl"
        results.write_text(results.read_text().splitlines()[0] + "\n")  # one unit left to run
        in_old_spelling(out)
        resumed = runner.invoke(app, ["resume", str(out)])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((out / "manifest.json").read_text())["drift_allowed"] == []
    assert len(read_run(out).records) == 2


def test_a_run_recorded_before_the_renames_is_still_refused_when_a_value_differs_with_a_scripted_model(
    tmp_path, scripted_model
):
    plan = finished_plan(tmp_path, scripted_model(answer_a))
    manifest = plan.run_dir / "manifest.json"
    as_recorded = manifest.read_text()
    in_old_spelling(plan.run_dir, workflows=["planning"])
    assert "['planning'] → " in refusal(plan)  # the systems the run recorded are not those it would run
    manifest.write_text(as_recorded)
    in_old_spelling(plan.run_dir, hints=True)  # hints asked for: no run of the bundled benchmark takes them
    assert "config hints: True → '(none)'" in refusal(plan)
