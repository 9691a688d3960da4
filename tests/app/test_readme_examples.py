"""The documentation (README.md and docs/*.md) is true: its extension examples, each saved as a user would save it
and run (an AutoGen agent and a LlamaIndex agent of one's own with a scripted test model, a scorer, a model
provider); every `compare ...` command it shows parses with today's command line; the defaults it gives are the
ones a run uses. The AutoGen example sets no `max_tool_iterations`: it answers only because the base raises
AutoGen's loop bound for subclasses too."""

import inspect
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import VERBS, build_app
from data_agent_compare.core import (
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
from data_agent_compare.core.model import forget_provider
from data_agent_compare.core.system import SystemArgsError, create_system
from data_agent_compare.engine.config import load_plugins, load_run_config
from data_agent_compare.providers.scripted import tool_call_message

from helpers import ROOT, documentation, load_tasks, readme_example, run_task, steps_taken

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


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


def sql_answer(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model: one query, then the letter."""
    if steps_taken(request) == 0:
        return tool_call_message("execute_sql", {"sql": "SELECT 1"}, call_id="call_sql")
    return tool_call_message("answer", {"answer": "B"}, call_id="call_answer")


def test_the_framework_subclass_with_a_parameter_runs_with_it_and_names_what_it_takes(tmp_path, scripted_model):
    plugin(tmp_path, "add-a-framework-system-with-a-parameter")
    try:
        system = create_system("schema_then_agent", {"table": "Customers"})
        record, trace, _ = run_task(tmp_path, scripted_model(sql_answer), single_choice(), "schema_then_agent", system)
        with pytest.raises(SystemArgsError, match=r"takes no argument tabel \(its arguments: table\)"):
            create_system("schema_then_agent", {"tabel": "Customers"})
    finally:
        SYSTEMS.unregister("schema_then_agent")
    assert record["status"] == "completed", record["error"]
    first = next(step for step in trace["steps"] if step["kind"] == "tool_call")
    assert (first["tool"], first["arguments"]) == ("get_schema_info", {"table": "Customers"})
    assert [call["tool"] for call in record["tool_calls"]] == ["get_schema_info", "execute_sql", "answer"]
    assert system.describe()["table"] == "Customers" and system.args == {"table": "Customers"}


def test_readme_scorer_example_scores_an_answer(tmp_path):
    plugin(tmp_path, "add-a-scorer")
    try:
        from data_agent_compare.core import Answer

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
    import data_agent_compare.core as core
    import data_agent_compare.systems as systems

    cls = getattr(systems, owner, None) or getattr(core, owner)
    row = next(line for line in documentation().splitlines() if line.startswith(f"| `{owner}` |"))
    written = re.search(rf"`{hook}\((.*?)\) ->", row)
    assert written, f"README's hook table has no signature of {owner}.{hook}"
    names = [part.split(":")[0].strip() for part in written.group(1).split(", ") if part.strip() != "*"]
    assert names == list(inspect.signature(getattr(cls, hook)).parameters)


# ---------------------------------------------------------------- documented commands and defaults

PLACEHOLDER = re.compile(r"^[A-Z][A-Z_0-9]*$")  # DIR, N, RUN_DIR, FILE: a value the reader fills in
NOT_A_COMMAND = re.compile(r"[\[\]…|<>]|\.\.\.")  # a synopsis (`[--out DIR]`, `DIR...`), not a command line


def split_fences(text: str) -> tuple[list[tuple[str, str]], str]:
    """The fenced blocks of a Markdown text as (language, body), and the prose around them."""
    blocks, prose, language, body = [], [], None, []
    for line in text.splitlines():
        fence = line.strip().startswith("```")
        if fence and language is None:
            language, body = line.strip()[3:].strip() or "text", []
        elif fence:
            blocks.append((language, "\n".join(body)))
            language = None
        elif language is None:
            prose.append(line)
        else:
            body.append(line)
    return blocks, "\n".join(prose)


def commands_in_block(block: str) -> list[list[str]]:
    """The arguments of each `compare` (or `.venv/bin/compare`) a shell block runs."""
    found = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True  # `&&`, `|`, `;` still end a command; a quoted one does not
        commands: list[list[str]] = [[]]
        for token in lexer:
            if token in ("&&", "||", "|", ";", "&"):
                commands.append([])
            else:
                commands[-1].append(token)
        for words in commands:
            while words and re.match(r"^[A-Z_]+=", words[0]):  # VARIABLE=value before the command
                words.pop(0)
            if words and words[0].split("/")[-1] == "compare":
                found.append(words[1:])
    return found


def documented_commands() -> list[tuple[str, list[str]]]:
    """(page, arguments) of every `compare ...` command in the documentation's shell blocks and inline code."""
    found = []
    for page in PAGES:
        blocks, prose = split_fences(page.read_text(encoding="utf-8"))
        for language, block in blocks:
            if language in ("bash", "sh", "shell", "console", "text"):
                found += [(page.name, words) for words in commands_in_block(block)]
        for span in re.findall(r"`((?:\.venv/bin/)?compare(?: [^`]*)?)`", prose):
            words = shlex.split(span)[1:]
            if len(words) > 1 and not NOT_A_COMMAND.search(span):  # `compare score` alone names the verb
                found.append((page.name, words))
    return found


def test_the_documentation_shows_commands_of_every_kind():
    verbs = {words[0] for _, words in documented_commands() if words and not words[0].startswith("-")}
    assert {"resume", "replay", "report", "rescore", "score", "tasks", "import", "models"} <= verbs
    assert ["--workflows", "all", "--models", "deepseek-v3.2,gpt-5"] in [words for _, words in documented_commands()]


def test_every_documented_compare_command_parses_with_todays_command_line():
    parsed = []
    parsing = build_app([(name, options, parsed.append, cls) for name, options, _, cls in VERBS])
    runner = CliRunner()
    wrong = []
    for page, words in documented_commands():
        filled = ["1" if PLACEHOLDER.match(word) else word for word in words]
        result = runner.invoke(parsing, filled)
        if result.exit_code != 0:
            wrong.append(f"{page}: compare {shlex.join(words)}: {result.output.strip().splitlines()[-1:]}")
    assert wrong == []
    assert parsed  # the commands reached their verbs


def test_every_flag_of_compare_run_is_in_the_running_chapter():
    shown = CliRunner().invoke(build_app(), ["run", "--help"], env={"COLUMNS": "300"}).output
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", shown)) - {"--help"}
    chapter = (ROOT / "docs" / "running.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", chapter))
    assert {"--workers", "--view", "--strict-answers"} <= flags and sorted(flags - documented) == []


# What a run resolves each documented default flag to (the bundled benchmark, no --config).
RESOLVED = {
    "--systems": lambda config: ",".join(config.systems),
    "--workflows": lambda config: ",".join(config.systems),
    "--models": lambda config: ",".join(config.models),
    "--benchmark": lambda config: config.benchmark,
    "--epochs": lambda config: config.epochs,
    "--max-steps": lambda config: config.budgets.max_steps,
    "--max-tokens": lambda config: config.budgets.max_tokens,
    "--wall-time": lambda config: config.budgets.wall_time_s,
    "--executor": lambda config: config.executor,
}


def documented_defaults() -> list[tuple[str, str, str]]:
    """(page, flag, value) of the defaults table of docs/running.md and every "default `--flag value`" in prose."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        found += [(page.name, flag, value) for flag, value in re.findall(r"default `(--[a-z-]+) ([^`]+)`", text)]
        table = text.split("\n## Defaults\n", 1)[1].split("\n## ", 1)[0] if "\n## Defaults\n" in text else ""
        rows = re.findall(r"^\| `(--[a-z-]+)` \| `([^`]+)` \|", table, re.M)
        found += [(page.name, flag, value) for flag, value in rows]
    return found


def same(documented: str, resolved: object) -> bool:
    if isinstance(resolved, int | float) and not isinstance(resolved, bool):
        return float(documented) == float(resolved)
    return documented == str(resolved)


def test_every_documented_default_is_the_one_a_run_uses():
    defaults = documented_defaults()
    assert {flag for _, flag, _ in defaults} >= {"--max-steps", "--models", "--systems", "--epochs"}
    config = load_run_config(None, {})
    wrong = [
        f"{page}: {flag} documented {value}, a run uses {RESOLVED[flag](config)}"
        for page, flag, value in defaults
        if flag not in RESOLVED or not same(value, RESOLVED[flag](config))
    ]
    assert wrong == []
