"""`compare transcript RUN_DIR TASK`: one unit's conversation as sent — the instructions, the task prompt, the
tools offered, each tool result as the model saw it — as plain text when piped and as JSON; a unit not named
precisely enough, or a task the run lacks, is exit 2 naming the choices."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import compare_command, quiz_questions, write_quiz_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("transcript")
    files = write_quiz_run(folder, quiz_questions(2), "systems: [tool_use, planning]\nconcurrency: 1\n")
    done = subprocess.run(
        compare_command("run", "--config", str(files["config"]), "--out", str(folder / "run")),
        capture_output=True, text=True, timeout=300, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "run"


def transcript(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(compare_command("transcript", *arguments), capture_output=True, text=True, timeout=120)


def test_the_json_transcript_of_a_scripted_unit_holds_what_the_model_was_sent(run_dir: Path) -> None:
    shown = transcript(str(run_dir), "Q1", "--system", "tool_use", "--json")
    assert shown.returncode == 0, shown.stderr
    told = json.loads(shown.stdout)
    assert (told["task_id"], told["system"], told["stored"]) == ("Q1", "tool_use", True)
    entries = told["entries"]
    first, tool, second = (entry for entry in entries if entry["kind"] != "tool_call" or entry["tool"] != "answer")
    instructions, prompt = first["messages"]
    assert instructions["role"] == "system" and "call the `answer` tool" in instructions["content"]
    assert prompt["role"] == "user" and "How many sales teams are there?" in prompt["content"]
    assert {"execute_sql", "answer"} <= set(first["tools"]) and first["tool_specs"][0]["parameters"]
    assert first["reply"]["tool_calls"][0]["name"] == "execute_sql" and first["usage"]["input_tokens"] > 0
    assert tool["kind"] == "tool_call" and tool["phase"] and tool["duration_s"] > 0 and "28" in tool["result"]
    assert second["earlier_messages"] == 2 and second["tool_specs"] is None  # the same tools: not repeated
    seen = second["messages"][-1]
    assert seen["role"] == "tool" and seen["name"] == "execute_sql" and "28" in seen["content"]  # as sent
    assert told["verdict"] in ("correct", "wrong") and "exact_match" in told["scores"]


def test_the_piped_transcript_is_plain_text_in_order(run_dir: Path) -> None:
    shown = transcript(str(run_dir), "Q0", "--system", "tool_use", "--model", "scripted", "--epoch", "1")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert "\x1b[" not in text  # piped: no colour codes
    order = ["question: How many sales teams", "model call", "system: You are", "tool execute_sql", "verdict:"]
    assert [text.index(part) for part in order] == sorted(text.index(part) for part in order)
    assert "(2 earlier message(s) as sent before)" in text and "tool (execute_sql): COUNT(*)" in text


def test_an_ambiguous_unit_or_a_missing_task_is_exit_2_naming_the_choices(run_dir: Path) -> None:
    several = transcript(str(run_dir), "Q0")
    assert several.returncode == 2 and "tool_use/scripted epoch 1, planning/scripted epoch 1" in several.stderr
    missing = transcript(str(run_dir), "Q9")
    assert missing.returncode == 2 and "no task 'Q9'" in missing.stderr and "Q0, Q1" in missing.stderr
    nowhere = transcript(str(run_dir.parent / "absent"), "Q0")
    assert nowhere.returncode == 2 and "Traceback" not in nowhere.stderr
