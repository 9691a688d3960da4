"""Concurrency the run does not set is what its models' providers take at once, and the run says so at start:
an API model is not run one unit at a time, the embedded model is never run several at once."""

from __future__ import annotations

from pathlib import Path

from data_agent_compare.core.model import ModelConfig

from helpers import load_tasks, make_plan

TASKS = load_tasks("bundled")[:1]


def model(provider: str) -> ModelConfig:
    return ModelConfig(alias=f"m-{provider}", provider=provider, model_id="some-model")


def test_an_openrouter_run_takes_its_providers_concurrency_and_says_so(tmp_path: Path):
    plan = make_plan(tmp_path, TASKS, model("openrouter"), ["tool_use"])
    assert plan.config.concurrency == 8
    assert plan.notes == ["concurrency 8: what the openrouter provider takes at once; --concurrency N sets it"]


def test_the_embedded_model_runs_one_unit_at_a_time(tmp_path: Path):
    plan = make_plan(tmp_path, TASKS, model("local"), ["tool_use"])
    assert plan.config.concurrency == 1 and "local provider" in plan.notes[0]


def test_a_mixed_run_takes_the_fewest_and_a_given_concurrency_is_kept(tmp_path: Path):
    plan = make_plan(tmp_path, TASKS, model("openrouter"), ["tool_use"])
    plan.models.append(model("local"))
    plan.config = plan.config.model_copy(update={"concurrency": None})
    plan.notes.clear()
    plan.__post_init__()
    assert plan.config.concurrency == 1 and plan.notes[0].endswith("(the fewest); --concurrency N sets it")
    given = make_plan(tmp_path, TASKS, model("openrouter"), ["tool_use"], concurrency=3)
    assert given.config.concurrency == 3 and given.notes == []
