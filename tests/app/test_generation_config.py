"""The run's generation settings (`generation:`, `--temperature/--top-p/--seed/--max-output-tokens`): checked
(exit 2 naming the flag or field), recorded in the manifest, sent with every request, and part of what
`--resume` and the response cache compare."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import CallContext, Message, ModelConfig, ModelRequest
from data_agent_compare.core.model import GenerationSettings
from data_agent_compare.engine.config import ConfigError
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import FakeOpenAIServer, load_tasks, make_plan, read_records, text_response, tool_call_response, usage

runner = CliRunner()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--temperature", "3"], "--temperature"),
        (["--top-p", "0"], "--top-p"),
        (["--max-output-tokens", "0"], "--max-output-tokens"),
        (["--seed", "seven"], "--seed"),
    ],
)
def test_a_bad_sampling_flag_exits_2_naming_it(tmp_path, flags, named):
    result = runner.invoke(app, [*flags, "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(("text", "named"), [("top_p: 1.5", "generation.top_p"), ("temprature: 0", "temprature")])
def test_a_bad_generation_field_in_a_config_file_exits_2_naming_it(tmp_path, text, named):
    config = tmp_path / "run.yaml"
    config.write_text(f"generation:\n  {text}\n")
    result = runner.invoke(app, ["--config", str(config), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and named in result.output and "run.yaml" in result.output


def test_temperature_and_seed_flags_reach_every_request_and_the_manifest_through_a_fake_server(tmp_path):
    out = tmp_path / "run"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10))
    with FakeOpenAIServer(default=answer) as fake:
        flags = ["--models", "openai-compatible:fake", "--base-url", fake.base_url, "--limit", "1"]
        result = runner.invoke(app, [*flags, "--temperature", "0", "--seed", "7", "--out", str(out)])
        bodies = [r.body for r in fake.requests if r.method == "POST"]
    assert result.exit_code == 0, result.output
    assert bodies and all((b.get("temperature"), b.get("seed"), "top_p" in b) == (0, 7, False) for b in bodies)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["generation"] == {"temperature": 0.0, "top_p": None, "seed": 7, "max_output_tokens": None}
    assert manifest["config"]["judge_generation"]["temperature"] == 0.0
    assert "sampling sent with every request: temperature 0.0, seed 7" in (out / "summary.md").read_text()


def answer_a(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("answer", {"answer": "A"})


def test_resume_refuses_changed_generation_settings_with_a_scripted_model(tmp_path, scripted_model):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:1]
    plan = make_plan(tmp_path, tasks, scripted_model(answer_a), ["tool_use"], generation={"temperature": 0.0})
    execute(plan)
    plan.config = plan.config.model_copy(update={"generation": GenerationSettings(temperature=0.7)})
    with pytest.raises(ConfigError) as refused:
        execute(plan, resume=True)
    assert "generation.temperature: 0.0 → 0.7" in str(refused.value)


def test_the_response_cache_answers_only_requests_of_the_same_generation_settings(tmp_path, scripted_model):
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:1]
    model = scripted_model(answer_a)
    cache = {"enabled": True, "dir": str(tmp_path / "cache")}

    def cached_calls(name: str, temperature: float) -> list[bool]:
        plan = make_plan(
            tmp_path / name, tasks, model, ["tool_use"], cache=cache, generation={"temperature": temperature}
        )
        execute(plan)
        trace = json.loads((plan.run_dir / read_records(plan.run_dir)[0].trace_file).read_text())
        return [step["cached"] is not None for step in trace["steps"] if step["kind"] == "model_call"]

    assert cached_calls("first", 0.0) == [False]
    assert cached_calls("again", 0.0) == [True]
    assert cached_calls("warmer", 0.7) == [False]


def test_the_judge_samples_by_its_own_settings_through_a_fake_server(tmp_path):
    def respond(recorded):
        body = recorded.body or {}
        if "justification" in json.dumps(body.get("response_format") or {}):  # the rubric judge's verdict
            return text_response(json.dumps({"score": 1, "justification": "covers it"}))
        return tool_call_response([("c1", "answer", json.dumps({"answer": "A short report."}))])

    task = next(t for t in load_tasks("bundled") if t.question_type == "report")
    with FakeOpenAIServer() as fake:
        fake.responder = respond
        model = ModelConfig(alias="fake", provider="openai-compatible", model_id="fake", base_url=fake.base_url)
        plan = make_plan(tmp_path, [task], model, ["tool_use"], judge="fake", generation={"temperature": 0.7})
        plan.judge = model
        execute(plan)
        bodies = [r.body for r in fake.requests if r.method == "POST"]
    judged = ["justification" in json.dumps(b.get("response_format") or {}) for b in bodies]
    assert any(judged) and not all(judged)
    assert [b.get("temperature") for b in bodies] == [0.0 if judge else 0.7 for judge in judged]
    assert read_records(plan.run_dir)[0].judge_usage is not None
