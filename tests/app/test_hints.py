"""What the command line tells a newcomer is true: the flag a hint names exists, a folder given for a file is
called a folder."""

from typer.testing import CliRunner

from data_agent_compare.cli.main import app

runner = CliRunner()


def test_a_benchmark_without_its_files_names_the_flag_every_verb_takes(tmp_path):
    for command in (["--benchmark", "dabstep", "--out", str(tmp_path / "r")], ["tasks", "--benchmark", "dabstep"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and "give --tasks-path" in result.output
        assert "--tasks)" not in result.output  # the hidden old name of `compare score`


def test_a_folder_given_for_dbgorillas_queries_file_is_called_a_folder(tmp_path):
    result = runner.invoke(app, ["tasks", "--benchmark", "dbgorilla", "--tasks-path", str(tmp_path)])
    assert result.exit_code == 2
    assert "is a folder; give the file itself" in result.output and "not found" not in result.output
