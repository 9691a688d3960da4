"""What a newcomer writes, refused when it is loaded with exit 2 and one line naming the file, the system and the
field (issue 38): system names outside the safe alphabet (a path separator, a comma), each wrong field of an
external systems file, out-of-range settings; `compare tasks` and `compare score` load a plug-in benchmark;
text from runs cannot be HTML in summary.md and report.md."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.config import ConfigError, load_plugins
from data_agent_compare.reports import markdown, summarize
from data_agent_compare.reports.summary import markdown_safe

from helpers import FIXTURES, compare_command, quiz_questions, write_quiz_run

NAMED_SYSTEM = """
from data_agent_compare.workflows.tool_use import ToolUseWorkflow
from data_agent_compare.core.system import register_system

@register_system
class Named(ToolUseWorkflow):
    name = {name!r}
"""


def compare(*arguments: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(compare_command(*arguments), capture_output=True, text=True, timeout=120, cwd=cwd)


def refused_in_one_line(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for part in said:
        assert part in lines[0], (part, lines[0])


@pytest.mark.parametrize("name", ["../escape", "a,b", "has space", ".hidden", "-flag", ""])
def test_a_plugin_system_whose_name_is_no_name_is_refused_at_load(tmp_path: Path, name: str) -> None:
    plugin = tmp_path / "named.py"
    plugin.write_text(NAMED_SYSTEM.format(name=name))
    refused_in_one_line(
        compare("systems", "--plugin", str(plugin)), "named.py", f"system name {name!r}", "is not a name"
    )


YAML_CASES = [
    ("command: [123]", "system 'x': field 'command': expected a non-empty list of strings or a string"),
    ("command: [sh]\n    agent_dir: 5", "system 'x': field 'agent_dir': expected a folder's path"),
    ('command: ["{workdir:>99999999999}"]', "system 'x': field command: '{workdir:>99999999999}': a width above 4096"),
    ('command: [sh]\n    env: {"": "1"}', "system 'x': field env: '' is not a variable name"),
    ('command: [sh]\n    env: {"A=B": "1"}', "system 'x': field env: 'A=B' is not a variable name"),
    (
        'command: [sh]\n    env: {A: "a\\0b"}',
        "system 'x': field env.A: a NUL character cannot be in an environment value",
    ),
]


@pytest.mark.parametrize(("fields", "said"), YAML_CASES)
def test_each_wrong_field_of_a_systems_file_is_named_with_the_file_and_the_system(
    tmp_path: Path, fields: str, said: str
) -> None:
    plugin = tmp_path / "agents.yaml"
    plugin.write_text(f"systems:\n  x:\n    {fields}\n")
    with pytest.raises(ConfigError) as refused:
        load_plugins([str(plugin)])
    assert str(refused.value).startswith(f"{plugin}: {said}")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (b'systems:\n  x:\n    command: ["sh]\n', "cannot be read as YAML"),
        (b"systems:\n  x:\n    command: [sh, '\xff']\n", "not UTF-8 text (byte 33)"),
        (b"systems:\n  tool_use:\n    command: [sh]\n", "system 'tool_use': the name is taken by another system"),
        (b"systems:\n  5:\n    command: [sh]\n", "system 5: a system name is a letter then"),
        (b'systems:\n  "a/b":\n    command: [sh]\n', "system 'a/b': a system name is a letter then"),
    ],
)
def test_a_systems_file_that_cannot_be_read_or_names_a_taken_or_bad_system_is_exit_2(
    tmp_path: Path, text: bytes, said: str
) -> None:
    plugin = tmp_path / "agents.yaml"
    plugin.write_bytes(text)
    refused_in_one_line(compare("systems", "--plugin", str(plugin)), str(plugin), said)


@pytest.mark.parametrize(
    ("config", "flags", "said"),
    [
        ("tools: {python_memory_mb: 99999999}\n", [], "tools.python_memory_mb: Input should be less than or equal to"),
        ("", ["--max-output-tokens", "100000000000"], "--max-output-tokens 100000000000: Input should be less than"),
        ("systems: 5\n", [], "systems: Input should be a valid list"),
        ('systems: [""]\n', [], "unknown workflow/system ''"),
    ],
)
def test_a_setting_out_of_range_is_refused_before_the_run_naming_it(
    tmp_path: Path, config: str, flags: list[str], said: str
) -> None:
    given = tmp_path / "run.yaml"
    given.write_text(config + "models: [local]\n")
    done = compare("run", "--config", str(given), *flags, "--limit", "1", "--out", str(tmp_path / "run"))
    refused_in_one_line(done, said)
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_compare_tasks_and_compare_score_load_a_plugin_benchmark(tmp_path: Path) -> None:
    files = write_quiz_run(tmp_path, quiz_questions(3), "")
    where = ["--benchmark", "test_quiz", "--tasks-path", str(files["quiz"])]
    checked = compare("tasks", "--plugin", str(files["plugin"]), *where, "--json")
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["ids"] == ["Q0", "Q1", "Q2"]
    without = compare("tasks", *where)
    refused_in_one_line(without, "unknown benchmark 'test_quiz'")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"task_id": "Q0", "answer": "Q0-3"}\n')
    scored = compare("score", "--plugin", str(files["plugin"]), *where, "--predictions", str(predictions))
    refused_in_one_line(scored, "the test_quiz benchmark reads no prediction files")  # found: its own answer


def test_text_from_runs_is_no_html_in_summary_md(tmp_path: Path) -> None:
    run = read_run(FIXTURES / "report_run")
    hostile = "<img src=x onerror=alert(1)>"
    records = [record.model_copy(update={"model": hostile}) for record in run.records]
    text = markdown(summarize(records), run.manifest, records=records)
    assert hostile not in text and "&lt;img src=x onerror=alert(1)>" in text
    assert markdown_safe("an answer `<value>` and <b>") == "an answer `<value>` and &lt;b>"  # code spans kept
