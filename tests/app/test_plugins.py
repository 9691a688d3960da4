"""Systems and benchmarks from outside the suite: the README's own examples (read from the README,
not copied here), a `--plugin` file, and a separate distribution found only through its entry point."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import BENCHMARKS, SYSTEMS, CallContext, Message, ModelRequest
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import documentation, load_tasks, make_plan, steps_taken

runner = CliRunner()


def readme_example(name: str) -> str:
    """The Python block the README marks with `<!-- example: NAME -->`."""
    readme = documentation()  # README.md and docs/*.md
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", readme, flags=re.S)
    assert match, f"README has no example {name!r}"
    return match.group(1)


@pytest.fixture
def readme_system(tmp_path: Path) -> Iterator[Path]:
    """The README's add-a-system example as the user would save it; unregistered afterwards."""
    path = tmp_path / "sql_then_answer.py"
    path.write_text(readme_example("add-a-system"), encoding="utf-8")
    yield path
    SYSTEMS.unregister("sql_then_answer")


def sql_then_answer(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model for the README system: the right SQL first, then the letter it shows."""
    if steps_taken(request) == 0:
        return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM `Sales Team`"})
    return tool_call_message("answer", {"answer": "B"})


def test_readme_example_system_registers_and_runs_on_a_bundled_task(tmp_path, scripted_model, readme_system):
    listed = runner.invoke(app, ["systems", "--plugin", str(readme_system), "--json"])
    assert listed.exit_code == 0, listed.output
    entry = next(row for row in json.loads(listed.output) if row["name"] == "sql_then_answer")
    assert entry["description"] == "Asks for one SQL query, runs it, then asks for the answer."

    task = next(t for t in load_tasks("bundled") if t.question_type == "single_choice")
    plan = make_plan(tmp_path, [task], scripted_model(sql_then_answer), ["sql_then_answer"])
    execute(plan)
    run = read_run(plan.run_dir)
    (record,) = run.records
    assert record.status == "completed" and record.answer["choices"] == ["B"]
    assert [(c.tool, c.success) for c in record.tool_calls] == [("execute_sql", True), ("answer", True)]
    phases = [(s.kind, s.phase) for s in run.trace(record).steps]
    assert phases == [("model_call", "decision"), ("tool_call", "execute"), ("model_call", "generate"),
                      ("tool_call", "generate")]  # fmt: skip
    assert record.scores["exact_match"] == (1.0 if task.gold.answer == "B" else 0.0)


def test_readme_example_benchmark_loads_and_runs(tmp_path, scripted_model):
    folder = tmp_path / "quiz"
    folder.mkdir()
    with sqlite3.connect(folder / "sales.sqlite") as db:
        db.execute("CREATE TABLE orders (id INTEGER, amount REAL)")
        db.executemany("INSERT INTO orders VALUES (?, ?)", [(1, 10.0), (2, 32.0)])
    question = {"id": "Q1", "question": "What is the total order amount?", "answer": "42"}
    (folder / "quiz.jsonl").write_text(json.dumps(question) + "\n")
    plugin = tmp_path / "sales_quiz.py"
    plugin.write_text(readme_example("add-a-benchmark"), encoding="utf-8")
    try:
        listed = runner.invoke(app, ["tasks", "--benchmark", "sales_quiz", "--path", str(folder), "--json"])
        assert listed.exit_code == 2 and "unknown benchmark 'sales_quiz'" in listed.output  # not imported yet
        runner.invoke(app, ["benchmarks", "--plugin", str(plugin)])
        listed = runner.invoke(app, ["tasks", "--benchmark", "sales_quiz", "--path", str(folder), "--json"])
        assert listed.exit_code == 0, listed.output
        assert json.loads(listed.output)["tasks"] == 1

        def total(request: ModelRequest, context: CallContext) -> Message:
            if steps_taken(request) == 0:
                return tool_call_message("execute_sql", {"sql": "SELECT SUM(amount) FROM orders"})
            return tool_call_message("answer", {"answer": request.messages[-1].content.split()[-1].split(".")[0]})

        bench = BENCHMARKS.load("sales_quiz")(folder)
        plan = make_plan(tmp_path, bench.load(), scripted_model(total), ["tool_use"], benchmark=bench)
        execute(plan)
        (record,) = read_run(plan.run_dir).records
        assert record.status == "completed" and record.scores == {"exact_match": 1.0, "sr": 1.0}
    finally:
        BENCHMARKS.unregister("sales_quiz")


PLUGIN_DISTRIBUTION = {
    "pyproject.toml": """
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "compare-test-plugin"
        version = "1.0"

        [project.entry-points."data_agent_compare.systems"]
        always_b = "compare_test_plugin:AlwaysB"
    """,
    "compare_test_plugin.py": '''
        from data_agent_compare import Answer, Message, RunContext, System, Task


        class AlwaysB(System):
            """Answers with the model's one forced `answer` call (a test plugin)."""

            name = "always_b"

            def run(self, task: Task, ctx: RunContext) -> Answer:
                messages = [Message(role="user", content=ctx.task_prompt())]
                reply = ctx.generate(messages, ctx.tool_specs(["answer"]), tool_choice="required").message
                return ctx.answer_from_tool(reply.tool_calls[0].arguments)
    ''',
}


@pytest.fixture
def installed_plugin(tmp_path: Path) -> Iterator[Path]:
    """A separate distribution, really installed (pip, into a folder put on sys.path), which
    registers its system only through its entry point."""
    source, target = tmp_path / "plugin-src", tmp_path / "site"
    source.mkdir()
    for name, text in PLUGIN_DISTRIBUTION.items():
        (source / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(target), str(source)], check=True)
    sys.path.insert(0, str(target))
    SYSTEMS.refresh()
    yield target
    sys.path.remove(str(target))
    sys.modules.pop("compare_test_plugin", None)
    SYSTEMS.refresh()


def test_a_separate_distribution_registers_a_system_through_its_entry_point(tmp_path, scripted_model, installed_plugin):
    listed = runner.invoke(app, ["systems", "--json"])
    assert listed.exit_code == 0, listed.output
    entry = next(row for row in json.loads(listed.output) if row["name"] == "always_b")
    assert entry["from"] == "compare-test-plugin" and entry["kind"] == "workflow"

    task = next(t for t in load_tasks("bundled") if t.question_type == "single_choice")
    model = scripted_model(lambda request, context: tool_call_message("answer", {"answer": "B"}))
    plan = make_plan(tmp_path, [task], model, ["always_b"])
    execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert record.system == "always_b" and record.answer["choices"] == ["B"] and record.status == "completed"


def test_a_name_registered_twice_stops_with_both_origins(tmp_path):
    clash = tmp_path / "clash.py"
    clash.write_text(
        "from data_agent_compare import System, register_system\n\n\n"
        "@register_system\nclass Impostor(System):\n    name = 'tool_use'\n\n    def run(self, task, ctx): ...\n"
    )
    result = runner.invoke(app, ["systems", "--plugin", str(clash)])
    assert result.exit_code == 2
    assert "'tool_use' is registered twice" in result.output
    assert "data-agent-compare" in result.output and "clash" in result.output


def test_a_missing_plugin_file_exits_2_naming_it(tmp_path):
    result = runner.invoke(app, ["systems", "--plugin", str(tmp_path / "nope.py")])
    assert result.exit_code == 2 and "plugin file not found" in result.output and "nope.py" in result.output
