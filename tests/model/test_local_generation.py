"""The embedded model honours the run's generation settings: the same seed at a high temperature gives the
same text, another seed another; temperature 0 is greedy whatever the seed (slow: real weights)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data_agent_compare.core.model import GenerationSettings, Message, MeteredModel, ModelConfig
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.providers.local import LocalLlamaProvider

CONFIG = ModelConfig(alias="gemma-3-270m", provider="local", model_id="gemma-3-270m", params={"n_ctx": 1024})
SCHEMA = {"type": "object", "properties": {"story": {"type": "string", "maxLength": 120}}, "required": ["story"]}
PROMPT = [Message(role="user", content="Write one sentence about a lighthouse keeper and a cat.")]


@pytest.fixture(scope="module")
def provider() -> Iterator[LocalLlamaProvider]:
    local = LocalLlamaProvider()
    yield local
    local.close()


def written(provider: LocalLlamaProvider, **settings: float) -> str:
    recorder = TraceRecorder(Trace(task_id="t", system="s", model=CONFIG.alias), Budgets())
    model = MeteredModel(CONFIG, provider, recorder, system="s", generation=GenerationSettings(**settings))
    return model.generate(PROMPT, response_schema=SCHEMA, max_output_tokens=48).message.content or ""


@pytest.mark.slow
def test_embedded_model_samples_by_the_runs_temperature_and_seed(provider: LocalLlamaProvider) -> None:
    hot = {"temperature": 1.5, "max_output_tokens": 48}
    first, again = written(provider, **hot, seed=7), written(provider, **hot, seed=7)
    others = {written(provider, **hot, seed=seed) for seed in (8, 9, 10)}
    assert first == again
    assert others - {first}  # some other seed draws another text

    greedy = {written(provider, temperature=0.0, seed=seed, max_output_tokens=48) for seed in (7, 8)}
    assert len(greedy) == 1
