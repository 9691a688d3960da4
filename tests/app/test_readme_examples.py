"""The README's extension examples, each saved as a user would save it and run: an AutoGen agent and a
LlamaIndex agent of one's own (scripted test model), a scorer, a model provider. The AutoGen example sets no
`max_tool_iterations`: it answers only because the base raises AutoGen's loop bound for subclasses too."""

import inspect
import re
from pathlib import Path

import pytest

from data_agent_compare.app.config import load_plugins
from data_agent_compare.compare import (
    PROVIDERS,
    SCORERS,
    SYSTEMS,
    CallContext,
    Message,
    ModelConfig,
    ModelRequest,
    QuestionType,
    Trace,
    score,
)
from data_agent_compare.compare.model import forget_provider
from data_agent_compare.providers.scripted import tool_call_message

from helpers import ROOT, load_tasks, readme_example, run_task, steps_taken

README = ROOT / "README.md"


def plugin(tmp_path: Path, example: str) -> Path:
    path = tmp_path / f"{example.replace('-', '_')}.py"
    path.write_text(readme_example(example), encoding="utf-8")
    load_plugins([str(path)])
    return path


def single_choice():
    return next(t for t in load_tasks("bundled") if t.question_type == QuestionType.SINGLE_CHOICE)


def schema_sql_answer(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model: the schema, one query, then the letter."""
    turn = steps_taken(request)
    if turn == 0:
        return tool_call_message("get_schema_info", {"database": "regional_sales"}, call_id="call_schema")
    if turn == 1:
        return tool_call_message("execute_sql", {"sql": "SELECT 1"}, call_id="call_sql")
    return tool_call_message("answer", {"answer": "B"}, call_id="call_answer")


@pytest.mark.parametrize(
    ("example", "name"),
    [("add-an-autogen-system", "sql_only_assistant"), ("add-a-llamaindex-system", "sql_only_function_agent")],
)
def test_readme_framework_example_runs_three_tool_rounds_with_a_scripted_model(tmp_path, scripted_model, example, name):
    plugin(tmp_path, example)
    try:
        record, _, manifest = run_task(tmp_path, scripted_model(schema_sql_answer), single_choice(), name)
    finally:
        SYSTEMS.unregister(name)
    assert record["status"] == "completed", record["error"]
    assert record["answer"]["choices"] == ["B"]
    assert [call["tool"] for call in record["tool_calls"]] == ["get_schema_info", "execute_sql", "answer"]
    assert manifest["systems"][name]["kind"] == "framework"


def test_readme_scorer_example_scores_an_answer(tmp_path):
    plugin(tmp_path, "add-a-scorer")
    try:
        from data_agent_compare.compare import Answer

        task = single_choice()
        sheet = score(task, Answer(text="B"), Trace(task_id=task.id, system="s", model="m"), ["answer_length"])
    finally:
        SCORERS.unregister("answer_length")
    assert sheet.error is None and sheet.scores == {"answer_chars": 1.0, "used_tools": 0.0}


def test_readme_provider_example_answers_a_run(tmp_path):
    plugin(tmp_path, "add-a-provider")
    model = ModelConfig(alias="echo", provider="echo", model_id="echo-1")
    try:
        record, _, _ = run_task(tmp_path, model, single_choice(), "tool_use")
    finally:
        PROVIDERS.unregister("echo")
        forget_provider("echo")
    assert record["status"] == "completed" and record["answer"]["choices"] == ["A"]
    assert record["usage"]["input_tokens"] > 0 and record["model_calls"] == 1


HOOKS = [
    ("LangGraphSystem", "build_graph"),
    ("AutoGenSystem", "build_agent"),
    ("LlamaIndexSystem", "build_agent"),
    ("System", "run"),
    ("Benchmark", "load"),
    ("Benchmark", "tools"),
    ("ModelProvider", "complete"),
]


@pytest.mark.parametrize(("owner", "hook"), HOOKS)
def test_readme_gives_each_hook_with_the_parameters_the_code_has(owner, hook):
    import data_agent_compare.compare as core
    import data_agent_compare.systems as systems

    cls = getattr(systems, owner, None) or getattr(core, owner)
    row = next(line for line in README.read_text().splitlines() if line.startswith(f"| `{owner}` |"))
    written = re.search(rf"`{hook}\((.*?)\) ->", row)
    assert written, f"README's hook table has no signature of {owner}.{hook}"
    names = [part.split(":")[0].strip() for part in written.group(1).split(", ") if part.strip() != "*"]
    assert names == list(inspect.signature(getattr(cls, hook)).parameters)
