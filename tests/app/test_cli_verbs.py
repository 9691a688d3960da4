"""A command per verb: `compare` with no verb runs a comparison, `compare resume/replay RUN_DIR` are verbs (the
old `--resume`/`--replay` flags name them), each verb has a typed options object, and a run flag is one field."""

import dataclasses
import importlib

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.commands.resume import ResumeOptions
from data_agent_compare.cli.commands.run import RunOptions
from data_agent_compare.cli.main import VERBS, app, build_app

runner = CliRunner()


def test_every_verb_has_its_module_and_a_dataclass_of_options():
    names = [name for name, *_ in VERBS]
    assert names == [
        "run", "resume", "replay", "report", "rescore", "transcript", "view", "import",
        "tasks", "score", "systems", "benchmarks", "models",
    ]  # fmt: skip
    for _, options, body, _ in VERBS:
        assert dataclasses.is_dataclass(options) and options.__module__ == body.__module__
        module = importlib.import_module(body.__module__)
        assert module.__name__.startswith("data_agent_compare.cli.commands.")


def test_each_run_option_is_a_flag_of_compare_run_and_of_plain_compare():
    run_help = runner.invoke(app, ["run", "--help"], env={"COLUMNS": "200"}).output
    root_help = runner.invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    for field in dataclasses.fields(RunOptions):
        flag = "--" + field.name.replace("_", "-")
        assert flag in run_help and flag in root_help, flag
    assert "resume" in root_help and "replay" in root_help  # listed as verbs


def test_compare_with_no_verb_is_compare_run(tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text("limit: -3\n")
    plain = runner.invoke(app, ["--config", str(config), "--out", str(tmp_path / "r")])
    verb = runner.invoke(app, ["run", "--config", str(config), "--out", str(tmp_path / "r")])
    assert plain.exit_code == verb.exit_code == 2
    assert plain.output == verb.output and "limit" in plain.output


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (["--resume", "--out", "{dir}"], ["resume", "{dir}"]),
        (["--out={dir}", "--resume"], ["resume", "{dir}"]),
        (["--replay", "{dir}"], ["replay", "{dir}"]),
        (["--replay={dir}"], ["replay", "{dir}"]),
    ],
)
def test_the_old_mode_flags_name_the_verbs(tmp_path, old, new):
    missing = str(tmp_path / "not-a-run")
    given = [arg.format(dir=missing) for arg in old]
    verb = [arg.format(dir=missing) for arg in new]
    by_flag, by_verb = runner.invoke(app, given), runner.invoke(app, verb)
    assert by_flag.exit_code == by_verb.exit_code == 2
    assert by_flag.output == by_verb.output
    assert "nothing to resume" in by_verb.output or "cannot replay" in by_verb.output


def test_a_verb_given_a_new_runs_flag_names_every_such_flag_and_what_it_takes(tmp_path):
    resumed = runner.invoke(app, ["resume", str(tmp_path), "--epochs", "2", "--models=local"])
    assert resumed.exit_code == 2
    assert "compare resume" in resumed.output and "takes no --epochs, --models" in resumed.output
    assert "--retry-errors" in resumed.output  # what it does take
    replayed = runner.invoke(app, ["replay", str(tmp_path), "--limit", "3"])
    assert replayed.exit_code == 2 and "compare replay" in replayed.output and "takes no --limit" in replayed.output


def test_resume_without_its_run_directory_says_so():
    assert "--resume needs --out DIR" in runner.invoke(app, ["--resume"]).output
    assert runner.invoke(app, ["resume"]).exit_code == 2


def test_a_run_flag_unknown_anywhere_gets_a_suggestion():
    result = runner.invoke(app, ["--modles", "local"])
    assert result.exit_code == 2 and "--modles" in result.output


@pytest.mark.parametrize("args", [["bogus"], ["bogus", "--help"], ["reprot", "RUN"], ["bogus", "--models", "local"]])
def test_a_first_word_that_is_no_verb_is_refused_naming_it_and_the_verbs_even_before_help(args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"unknown verb {args[0]!r}" in result.output
    verbs = "run, resume, replay, report, rescore, transcript, view, import, tasks, score, systems, benchmarks, models"
    assert verbs in result.output
    assert "Usage:" not in result.output  # not `compare run --help`, nor run's parse error
    assert ("did you mean 'report'?" in result.output) == (args[0] == "reprot")


def test_with_no_verb_the_options_of_compare_run_still_parse_and_help_is_the_roots_or_runs():
    parsed = []
    parsing = build_app([(name, options, parsed.append, cls) for name, options, _, cls in VERBS])
    card = runner.invoke(parsing, ["--workflows", "all", "--models", "deepseek-v3.2,gpt-5"])
    assert card.exit_code == 0, card.output
    assert parsed[-1].workflows == "all" and parsed[-1].models == "deepseek-v3.2,gpt-5"
    assert runner.invoke(parsing, ["--out=x", "--resume"]).exit_code == 0 and isinstance(parsed[-1], ResumeOptions)
    root = runner.invoke(app, ["--help"], prog_name="compare")
    run_help = runner.invoke(app, ["--limit", "2", "--help"], prog_name="compare")
    assert root.exit_code == run_help.exit_code == 0
    assert "Usage: compare [OPTIONS] COMMAND" in root.output and "Usage: compare run [OPTIONS]" in run_help.output
