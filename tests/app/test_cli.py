"""The `compare` command's refusals: bad names and missing keys exit 2 before any work."""

from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import FIXTURES, run_files_as_text

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


def test_compare_end_to_end_through_an_openai_compatible_fake_server(tmp_path, monkeypatch):
    """The whole CLI path with a fake OpenAI-compatible server: run directory complete, key nowhere in it."""
    import json

    from helpers import FakeOpenAIServer, tool_call_response, usage

    secret = "sk-test-0123456789-do-not-leak"
    monkeypatch.setenv("FAKE_PROXY_KEY", secret)
    out = tmp_path / "run"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10, cost=0.002))
    with FakeOpenAIServer(default=answer) as fake:
        result = runner.invoke(
            app,
            [
                "--models",
                "openai-compatible:fake-model",
                "--base-url",
                fake.base_url,
                "--api-key-env",
                "FAKE_PROXY_KEY",
                "--limit",
                "3",
                "--out",
                str(out),
            ],
        )
        assert all(r.headers["authorization"] == f"Bearer {secret}" for r in fake.requests)
    assert result.exit_code == 0, result.output
    run_log = {"manifest.json", "results.jsonl", "calls.jsonl", "conversations.sqlite", ".lock", "traces", "summary.md"}
    report = {"report.html", "report.md", "results.csv", "results.parquet", "leaderboard.json", "figures"}
    assert {p.name for p in out.iterdir()} == run_log | report  # the comparison report is written after the run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["limit"] == 3 and manifest["models"][0]["api_key_env"] == "FAKE_PROXY_KEY"
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 3
    for record in records:  # cost as the provider reported it, per call
        assert record["usage"]["cost_source"] == "provider"
        assert abs(record["usage"]["cost_usd"] - 0.002 * record["model_calls"]) < 1e-12
    everything = "".join(run_files_as_text(out).values())  # PNG, Parquet, the request store too
    assert secret not in everything and secret not in result.output


def test_all_means_the_four_workflow_patterns():
    from data_agent_compare.engine.runner import _system_list

    assert _system_list(["all"]) == ["multi_agent", "planning", "reflection", "tool_use"]
    assert _system_list(["planning_static", "tool_use"]) == ["planning_static", "tool_use"]


def test_score_command_scores_good_records_and_reports_bad_ones_by_line(tmp_path):
    import json

    from helpers import load_tasks

    tasks = [t for t in load_tasks("bundled") if t.question_type != "report"][:3]
    lines = [json.dumps({"task_id": t.id, "selected_answer": t.gold.answer}) for t in tasks]
    lines.insert(1, '{"task_id": "BND001", "selected_answer": ')  # truncated line
    lines.append(json.dumps({"task_id": "NOPE", "selected_answer": "A"}))
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(
        app, ["score", "--benchmark", "bundled", "--predictions", str(predictions), "--out", str(out)]
    )
    assert result.exit_code == 1
    assert "predictions.jsonl:2" in result.output and "predictions.jsonl:5" in result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["task_id"] for r in rows] == [t.id for t in tasks]
    assert all(r["exact_match"] == 1.0 for r in rows)
    assert "3 predictions scored, 2 bad record(s)" in result.output


def test_tasks_command_validates_without_running(tmp_path):
    import json

    result = runner.invoke(app, ["tasks", "--benchmark", "bundled", "--json"])
    assert result.exit_code == 0
    report = json.loads(result.output)
    assert report["tasks"] == 37 and report["available"] == 37 and report["with_gold"] == 37
    assert report["by_question_type"]["report"] == 5

    broken = tmp_path / "dev.jsonl"
    broken.write_text('{"task_id": "5", "question": "q", "guidelines": "g", "level": "easy"}\n{"task_id": "6", "quest')
    result = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--path", str(broken)])
    assert result.exit_code == 2
    assert "dev.jsonl:2" in result.output


def test_level_and_question_type_select_tasks(tmp_path):
    from data_agent_compare.engine.config import load_run_config
    from data_agent_compare.engine.runner import plan_run

    config = load_run_config(None, {"levels": ["hard"], "question_types": ["factoid"], "out": str(tmp_path / "r")})
    tasks = plan_run(config).tasks
    assert tasks and all(t.level == "hard" and t.question_type == "factoid" for t in tasks)


def test_benchmark_defaults_apply_under_flags(tmp_path):
    from data_agent_compare.engine.config import load_run_config

    dab = load_run_config(None, {"benchmark": "dab"})
    assert dab.budgets.max_steps == 100 and dab.budgets.tool_result_max_chars == 10000
    flagged = load_run_config(None, {"benchmark": "dab", "budgets": {"max_steps": 7}})
    assert flagged.budgets.max_steps == 7 and flagged.budgets.tool_result_max_chars == 10000
    assert load_run_config(None, {}).budgets.max_steps == 10


def test_tasks_command_says_which_dabstep_tasks_need_the_missing_payments_file():
    import json

    fixtures = FIXTURES / "dabstep"
    result = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--path", str(fixtures), "--json"])
    assert result.exit_code == 0
    warnings = json.loads(result.output)["warnings"]
    assert any("payments.csv is missing" in w for w in warnings)
    assert any("1681" in w and "1273" not in w for w in warnings if w.startswith("tasks that"))


def test_tasks_command_reports_every_bad_dabstep_line(tmp_path):
    import json

    good = {"task_id": "5", "question": "q", "guidelines": "g", "level": "easy"}
    lines = [
        json.dumps(good),
        '{"task_id": "6", "quest',  # truncated JSON
        json.dumps({"task_id": "7", "guidelines": "g"}),  # no question
        json.dumps(good | {"task_id": "8", "level": 3}),  # level is not a string
    ]
    broken = tmp_path / "dev.jsonl"
    broken.write_text("\n".join(lines) + "\n")
    result = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--path", str(broken)])
    assert result.exit_code == 2
    assert "3 problems" in result.output
    assert all(f"dev.jsonl:{line}:" in result.output for line in (2, 3, 4))

    result = runner.invoke(app, ["tasks", "--benchmark", "dabstep", "--path", str(broken), "--json"])
    assert result.exit_code == 2
    errors = json.loads(result.output)["errors"]
    assert [(e["file"], e["line"], e["field"]) for e in errors] == [
        (str(broken), 2, None),
        (str(broken), 3, "question"),
        (str(broken), 4, "level"),
    ]


def test_report_refuses_a_run_log_from_a_newer_suite_naming_both_versions(tmp_path, scripted_model):
    import json

    from data_agent_compare.core.runlog import RUN_LOG_SCHEMA_VERSION
    from data_agent_compare.engine.runner import execute
    from data_agent_compare.providers.scripted import tool_call_message

    from helpers import load_tasks, make_plan

    model = scripted_model(lambda request, context: tool_call_message("answer", {"answer": "A"}))
    plan = make_plan(tmp_path, load_tasks("bundled")[:1], model, ["tool_use"])
    execute(plan)
    rebuilt = runner.invoke(app, ["report", str(plan.run_dir)])
    assert rebuilt.exit_code == 0 and (plan.run_dir / "summary.md").exists()

    manifest = json.loads((plan.run_dir / "manifest.json").read_text())
    manifest["schema_version"] = RUN_LOG_SCHEMA_VERSION + 7
    (plan.run_dir / "manifest.json").write_text(json.dumps(manifest))
    refused = runner.invoke(app, ["report", str(plan.run_dir)])
    assert refused.exit_code == 2
    assert f"schema version {RUN_LOG_SCHEMA_VERSION + 7}" in refused.output
    assert f"up to {RUN_LOG_SCHEMA_VERSION}" in refused.output and "Traceback" not in refused.output


def test_report_of_a_folder_that_is_not_a_run_exits_2(tmp_path):
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "is not a run directory" in result.output


def test_listings_of_what_is_registered():
    import json

    systems = {row["name"]: row for row in json.loads(runner.invoke(app, ["systems", "--json"]).output)}
    assert systems["tool_use"]["kind"] == "workflow" and systems["planning_static"]["kind"] == "workflow-variant"
    assert systems["tool_use"]["from"] == "built-in" and systems["reflection"]["description"]

    benchmarks = {row["name"]: row for row in json.loads(runner.invoke(app, ["benchmarks", "--json"]).output)}
    assert benchmarks["bundled"]["needs --tasks-path"] == "no" and benchmarks["dab"]["needs --tasks-path"] == "yes"
    assert benchmarks["dabstep"]["scorers"] == "dabstep, tool_success"

    models = {row["alias"]: row for row in json.loads(runner.invoke(app, ["models", "--json"]).output)}
    assert models["gpt-5"]["provider"] == "openrouter" and models["gpt-5"]["model id"] == "openai/gpt-5"
    assert models["gpt-5"]["$/Mtok"] == "1.25 in / 0.125 cached / 10 out" and models["local"]["provider"] == "local"


def test_a_password_in_the_base_url_is_refused_and_never_shown(tmp_path):
    from helpers import FakeOpenAIServer, tool_call_response

    out = tmp_path / "run"
    with FakeOpenAIServer(default=tool_call_response([("c1", "answer", '{"answer": "A"}')])) as fake:
        base_url = fake.base_url.replace("http://", "http://alice:hunter2-secret@")
        result = runner.invoke(
            app, ["--models", "openai-compatible:m", "--base-url", base_url, "--limit", "1", "--out", str(out)]
        )
        assert not fake.requests  # refused before any call (issue 19): the key belongs in api_key_env
    assert result.exit_code == 2 and "api_key_env" in result.output and "alice:***@" in result.output
    assert "hunter2-secret" not in result.output and not out.exists()
