"""The embedded model's greedy grammar sampling checks the likeliest tokens before the whole vocabulary,
and picks exactly the token the whole-vocabulary filter would (slow: real weights and vocabulary)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import numpy as np
import pytest

from data_agent_compare.core.model import ModelConfig
from data_agent_compare.providers import local
from data_agent_compare.providers.local import LIKELIEST_CHECKED, ConstrainedLlama, LocalLlamaProvider

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["A", "B"]}}, "required": ["answer"]}
CONFIG = ModelConfig(alias="gemma-3-270m", provider="local", model_id="gemma-3-270m", params={"n_ctx": 1024})


@pytest.fixture(scope="module")
def llama() -> Iterator[ConstrainedLlama]:
    provider = LocalLlamaProvider()
    yield provider._load(CONFIG)
    provider.close()


def whole_vocabulary_argmax(llama: ConstrainedLlama, logits: np.ndarray) -> int | None:
    allowed = llama._filter(np.arange(llama._n_vocab), logits)
    return int(np.argmax(allowed)) if np.isfinite(allowed.max()) else None


@pytest.mark.slow
def test_the_likeliest_allowed_token_is_the_whole_vocabularys_argmax(llama: ConstrainedLlama) -> None:
    rng = np.random.default_rng(0)
    with llama.constrained(local._grammar(json.dumps(SCHEMA)), temperature=0.0, seed=0, close_after=100):
        allowed = np.flatnonzero(np.isfinite(llama._filter(np.arange(llama._n_vocab), np.zeros(llama._n_vocab))))
        assert 0 < len(allowed) < LIKELIEST_CHECKED
        for case in range(40):
            logits = rng.standard_normal(llama._n_vocab).astype(np.float32)
            if case % 4 == 1:  # an allowed token among the likeliest
                logits[rng.choice(allowed)] = 6.0
            elif case % 4 == 2:  # two allowed tokens tie for the best logit: the first wins
                logits[allowed[:2]] = 6.0
            elif case % 4 == 3:  # the best allowed logit ties with the least likely checked: undecided
                logits[:] = np.float32(1.0)
            found = llama._likeliest_allowed(logits)
            assert found is None or found == whole_vocabulary_argmax(llama, logits), case
            if case % 4 in (1, 2):
                assert found is not None
            if case % 4 == 3:
                assert found is None


def fresh_completion(llama: ConstrainedLlama, prompt: str, schema: dict[str, object]) -> str:
    """A greedy completion from an empty KV cache: a prompt evaluated in other batches gives other logits."""
    llama.reset()
    llama._ctx.kv_cache_clear()
    watch = local.Pace().watch(time.monotonic() + 300)
    return local._complete(llama, prompt, schema, 40, 0.0, 0, watch)["choices"][0]["text"]


@pytest.mark.slow
def test_greedy_output_is_unchanged_and_checks_the_whole_vocabulary_less(
    llama: ConstrainedLlama, monkeypatch: pytest.MonkeyPatch
) -> None:
    prompt = 'Which region sold most? Reply with JSON {"answer": "A"} or {"answer": "B"}.\nAssistant:'
    schema = {"type": "object", "properties": {"why": {"type": "string", "maxLength": 60}}, "required": ["why"]}
    scans: list[int] = []
    real_filter = ConstrainedLlama._filter

    def counting(self: ConstrainedLlama, ids: np.ndarray, logits: np.ndarray) -> np.ndarray:
        scans.append(len(ids))
        return real_filter(self, ids, logits)

    monkeypatch.setattr(ConstrainedLlama, "_filter", counting)
    text = fresh_completion(llama, prompt, schema)
    fast_scans = sum(n == llama._n_vocab for n in scans)
    scans.clear()
    monkeypatch.setattr(ConstrainedLlama, "_likeliest_allowed", lambda self, logits: None)  # as before
    before = fresh_completion(llama, prompt, schema)
    assert text == before
    assert fast_scans <= sum(n == llama._n_vocab for n in scans)
