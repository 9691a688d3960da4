"""Systems take parameters (`--system-arg NAME.KEY=VALUE`, `systems: {NAME: {args: ...}}` in a config file),
recorded in the manifest and in the rows' label; `systems:` is the config key, `workflows:` its old name."""

import json

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.engine.config import ConfigError, load_run_config
from data_agent_compare.engine.runner import plan_run

from helpers import FakeOpenAIServer, tool_call_response, usage

runner = CliRunner()


def test_systems_is_the_config_key_and_workflows_its_old_name(tmp_path):
    new, old = tmp_path / "new.yaml", tmp_path / "old.yaml"
    new.write_text("systems: [planning, tool_use]\n")
    old.write_text("workflows: [planning, tool_use]\n")
    assert load_run_config(new, {}).systems == load_run_config(old, {}).systems == ["planning", "tool_use"]
    both = tmp_path / "both.yaml"
    both.write_text("systems: [planning]\nworkflows: [tool_use]\n")
    with pytest.raises(ConfigError) as refused:
        load_run_config(both, {})
    assert "both.yaml: give `systems:` or its old name `workflows:`, not both" in str(refused.value)


def test_a_config_file_gives_a_system_its_arguments_and_a_flag_overrides_one(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("systems:\n  reflection: {args: {max_revisions: 2}}\n  tool_use:\n")
    loaded = load_run_config(config, {"out": str(tmp_path / "r")})
    assert loaded.systems == ["reflection", "tool_use"] and loaded.system_args == {"reflection": {"max_revisions": 2}}
    flagged = load_run_config(config, {"system_args": {"reflection": {"max_revisions": 0}}, "out": str(tmp_path / "r")})
    plan = plan_run(flagged)
    assert list(plan.systems) == ["reflection[max_revisions=0]", "tool_use"]
    assert plan.systems["reflection[max_revisions=0]"].max_revisions == 0


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        ("reflection.max_revision=1", "takes no argument max_revision (its arguments: max_revisions)"),
        ("reflection.max_revisions=-1", "max_revisions must be >= 0"),
        ("tool_use.x=1", "arguments for system(s) tool_use, which this run does not run (reflection)"),
        ("reflection=1", "--system-arg reflection=1: expected NAME.KEY=VALUE"),
    ],
)
def test_a_bad_system_argument_exits_2_naming_it(tmp_path, flag, said):
    result = runner.invoke(app, ["--workflows", "reflection", "--system-arg", flag, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and said in " ".join(result.output.split()), result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("executor", ["thread", pytest.param("process", marks=pytest.mark.slow)])  # workers too
def test_a_system_argument_reaches_the_system_the_manifest_and_the_rows(tmp_path, executor):
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10))
    out = tmp_path / "run"
    with FakeOpenAIServer(default=answer) as fake:
        flags = ["--models", "openai-compatible:m", "--base-url", fake.base_url, "--limit", "1", "--out", str(out)]
        flags += ["--executor", executor, "--concurrency", "1"]
        result = runner.invoke(app, [*flags, "--systems", "reflection", "--system-arg", "reflection.max_revisions=0"])
    assert result.exit_code in (0, 1), result.output
    manifest = json.loads((out / "manifest.json").read_text())
    label = "reflection[max_revisions=0]"
    assert manifest["systems"][label]["args"] == {"max_revisions": 0}
    assert manifest["systems"][label]["max_revisions"] == 0  # what the system itself says it ran with
    assert manifest["config"]["system_args"] == {"reflection": {"max_revisions": 0}}
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {record["system"] for record in records} == {label}
    assert label in (out / "summary.md").read_text()
