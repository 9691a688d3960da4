"""The run's generation settings win over a model alias's `params` (issue 25 item 3): an alias whose params
set a sampling setting to another value than the run's is refused (exit 2, naming alias and key) for both
providers that put params in the request body; and summary.md's "sampling sent" line is counted from the
requests actually sent, per system and model, never read from the config.

The provider is a local OpenAI-compatible fake server that records every request body."""

from __future__ import annotations

import json
import subprocess

import pytest

from data_agent_compare.core import ModelConfig, Task
from data_agent_compare.core.model import GenerationSettings, sampling_conflicts
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.task import Gold, QuestionType
from data_agent_compare.engine.config import ConfigError, RunConfig
from data_agent_compare.engine.runner import execute, plan_run
from data_agent_compare.reports.summary import generation_lines

from helpers import ROOT, FakeOpenAIServer, compare_command, make_plan, tool_call_response

CONFLICTING = {"temperature": 0.9, "max_tokens": 77}


def alias(provider: str, params: dict, base_url: str = "http://127.0.0.1:9/v1") -> ModelConfig:
    return ModelConfig(alias="hot", provider=provider, model_id="m", base_url=base_url, params=params)


@pytest.mark.parametrize("provider", ["openai-compatible", "openrouter"])
def test_an_alias_whose_params_conflict_with_the_runs_sampling_settings_is_refused_naming_alias_and_key(provider):
    run = GenerationSettings(temperature=0.3, max_output_tokens=123)
    conflicts = sampling_conflicts(alias(provider, CONFLICTING), run)
    assert len(conflicts) == 2
    assert conflicts[0].startswith("model alias 'hot': params temperature: 0.9 conflicts with the run's temperature")
    assert "--temperature" in conflicts[0] and "params max_tokens: 77" in conflicts[1] and "123" in conflicts[1]
    assert sampling_conflicts(alias(provider, {"temperature": 0.3, "max_tokens": 123}), run) == []  # agrees
    assert sampling_conflicts(alias(provider, {"reasoning": {"effort": "low"}}), run) == []  # not sampling


def test_plan_run_refuses_a_conflicting_judge_alias_against_judge_generation(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  ok: {provider: openai-compatible, model_id: m, base_url: 'http://127.0.0.1:9/v1'}\n"
        "  hot: {provider: openai-compatible, model_id: m, base_url: 'http://127.0.0.1:9/v1',"
        " params: {temperature: 0.9}}\n"
    )
    config = RunConfig(models=["ok"], judge="hot", models_file=str(models), out=str(tmp_path / "run"))
    with pytest.raises(ConfigError, match=r"'hot': params temperature: 0.9 .* temperature 0.0 \(judge_generation"):
        plan_run(config)


def test_the_cli_refuses_an_alias_with_conflicting_params_with_one_line_and_exit_2(tmp_path):
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n  hot:\n    provider: openai-compatible\n    model_id: m\n    base_url: 'http://127.0.0.1:9/v1'\n"
        "    params: {temperature: 0.9, max_tokens: 77}\n"
    )
    config = tmp_path / "run.yaml"
    config.write_text(f"models_file: {models}\nmodels: [hot]\nworkflows: [tool_use]\nbenchmark: bundled\n")
    flags = ("--config", config, "--temperature", "0.3", "--max-output-tokens", "123", "--out", tmp_path / "r")
    flags = tuple(map(str, flags))
    done = subprocess.run(compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "'hot': params temperature: 0.9 conflicts" in done.stderr and "max_tokens: 77" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r" / "results.jsonl").exists()


def quiz_task() -> Task:
    factoid = QuestionType.FACTOID
    return Task(id="q", benchmark="bundled", question="Say 2.", question_type=factoid, gold=Gold(answer="2"))


def answers(fake: FakeOpenAIServer) -> None:
    fake.responder = lambda request: tool_call_response([("c1", "answer", json.dumps({"answer": "2"}))])


def test_the_sampling_sent_line_is_counted_from_the_requests_sent_per_system_and_model(tmp_path):
    """An alias may still set what the run leaves unset: its value is what the requests carried, and the
    summary says so for that model (it said the config's settings before)."""
    with FakeOpenAIServer() as fake:
        answers(fake)
        hot = alias("openai-compatible", {"temperature": 0.9}, fake.base_url)
        plain = ModelConfig(alias="plain", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        runs = {}
        for name, model in (("hot", hot), ("plain", plain)):
            plan = make_plan(tmp_path / name, [quiz_task()], model, ["tool_use"], generation={"max_output_tokens": 123})
            execute(plan)
            runs[name] = read_run(plan.run_dir)
        bodies = [r.body for r in fake.requests if r.method == "POST"]
    assert [(b.get("temperature"), b["max_tokens"]) for b in bodies] == [(0.9, 123), (None, 123)]
    hot_lines = generation_lines(runs["hot"].manifest, runs["hot"].records)
    assert hot_lines == ["- sampling sent with every request: max_output_tokens 123, temperature 0.9"]
    both = runs["hot"].records + runs["plain"].records
    assert generation_lines(runs["hot"].manifest, both) == [
        "- sampling sent by tool_use/hot: max_output_tokens 123, temperature 0.9",
        "- sampling sent by tool_use/plain: max_output_tokens 123",
    ]
