"""The `compare` command's refusals: bad names and missing keys exit 2 before any work."""

from typer.testing import CliRunner

from compare.cli import app

runner = CliRunner()


def test_openrouter_models_without_key_exit_2_before_any_work(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    out = tmp_path / "run"
    result = runner.invoke(app, ["--workflows", "all", "--models", "deepseek-v3.2,gpt-5", "--out", str(out)])
    assert result.exit_code == 2
    assert "OPENROUTER_API_KEY" in result.output
    assert "export OPENROUTER_API_KEY" in result.output
    assert not out.exists()


def test_unknown_names_exit_2_and_list_the_valid_ones(tmp_path):
    cases = [
        (["--workflows", "nope"], "tool_use"),
        (["--models", "gpt-9"], "deepseek-v3.2"),
        (["--benchmark", "nope"], "bundled"),
    ]
    for flags, valid in cases:
        result = runner.invoke(app, [*flags, "--out", str(tmp_path / "r")])
        assert result.exit_code == 2, result.output
        assert "unknown" in result.output and valid in result.output


def test_bad_config_file_names_the_file_and_field(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("limit: -3\n")
    result = runner.invoke(app, ["--config", str(config), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert "run.yaml" in result.output and "limit" in result.output


def test_unknown_config_key_is_refused(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("workflow: tool_use\n")  # typo of `workflows`
    result = runner.invoke(app, ["--config", str(config)])
    assert result.exit_code == 2 and "workflow" in result.output
