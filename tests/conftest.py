"""Shared test helpers: scripted models installed as providers, and run plans without the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compare.config import RunConfig
from compare.model import CallContext, Message, ModelConfig, ModelRequest, ModelResponse, set_provider
from compare.providers.scripted import ScriptedProvider
from compare.run import RunPlan, execute
from compare.system import System, create_system
from compare.task import Task

SCRIPTED = ModelConfig(alias="scripted", provider="scripted", model_id="scripted-test-model")


def steps_taken(request: ModelRequest) -> int:
    """How many assistant turns the conversation already has (the scripted model's step counter)."""
    return sum(m.role == "assistant" for m in request.messages)


@pytest.fixture
def scripted_model() -> Callable[[Callable[[ModelRequest, CallContext], Message | ModelResponse]], ModelConfig]:
    """Install a scripted test model; returns its ModelConfig for run plans."""

    def install(respond: Callable[[ModelRequest, CallContext], Message | ModelResponse]) -> ModelConfig:
        set_provider("scripted", ScriptedProvider(respond))
        return SCRIPTED

    return install


def make_plan(tmp_path: Path, tasks: list[Task], model: ModelConfig, systems: list[str], **config: object) -> RunPlan:
    run_config = RunConfig(workflows=systems, models=[model.alias], out=str(tmp_path / "run"), **config)
    return RunPlan(
        config=run_config,
        tasks=tasks,
        systems={name: create_system(name) for name in systems},
        models=[model],
        run_dir=tmp_path / "run",
    )


def run_task(
    tmp_path: Path, model: ModelConfig, task: Task, system: str, instance: System | None = None, **config: object
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Run one task through the real runner; returns its result record, trace and the manifest."""
    plan = make_plan(tmp_path, [task], model, [system], **config)
    if instance is not None:
        plan.systems[system] = instance
    manifest = execute(plan)
    record = json.loads((plan.run_dir / "results.jsonl").read_text().splitlines()[0])
    trace = json.loads((plan.run_dir / record["trace_file"]).read_text())
    return record, trace, manifest
