"""Shared test helpers: scripted models installed as providers, and run plans without the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from compare.config import RunConfig
from compare.model import CallContext, Message, ModelConfig, ModelRequest, ModelResponse, set_provider
from compare.providers.scripted import ScriptedProvider
from compare.run import RunPlan
from compare.system import create_system
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
