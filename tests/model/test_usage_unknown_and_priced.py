"""Usage as providers bill it (issue 36): a reply without usage is unknown on every provider, never $0, and
the token budget still meets it by a count said in the record; token classes are priced at their own rates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data_agent_compare.core.model import MeteredModel, ModelConfig, ModelProvider, Price, RetrySettings
from data_agent_compare.core.trace import ESTIMATE_METHOD, BudgetExceeded, Budgets, Trace, TraceRecorder
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openrouter import OpenRouterProvider

from helpers import KEY, QUESTION, FakeOpenAIServer, completion

FAST = RetrySettings(max_attempts=1, read_timeout_s=2, attempt_timeout_s=5)
GPT5 = Price(input_per_mtok=1.25, output_per_mtok=10.0)


@pytest.fixture(params=["openrouter", "openai-compatible"])
def provider(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ModelProvider]]:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    made: ModelProvider = OpenRouterProvider() if request.param == "openrouter" else OpenAIHTTPProvider()
    yield request.param, made
    made.close()


def metered(name: str, provider: ModelProvider, base_url: str, budgets: Budgets | None = None) -> MeteredModel:
    config = ModelConfig(alias="gpt-5", provider=name, model_id="openai/gpt-5", base_url=base_url, price=GPT5)
    recorder = TraceRecorder(Trace(task_id="t1", system="sys", model="gpt-5"), budgets or Budgets())
    return MeteredModel(config, provider, recorder, system="sys", retries=FAST)


def no_usage_reply(text: str):
    reply = completion({"content": text}, "stop", {})
    del reply.body["usage"]
    return reply


def test_a_reply_without_usage_has_unknown_tokens_and_cost_on_every_provider(provider) -> None:
    name, made = provider
    with FakeOpenAIServer(default=no_usage_reply("42")) as fake:
        model = metered(name, made, fake.base_url)
        model.generate(QUESTION)
    step = model.recorder.trace.model_calls[0]
    assert (step.usage.input_tokens, step.usage.output_tokens) == (None, None)
    assert (step.usage.cost_usd, step.usage.cost_source) == (None, "unknown")
    assert model.recorder.trace.usage().cost_usd is None  # the unit's cost is unknown, not $0


def test_the_token_budget_meets_a_reply_without_usage_by_a_local_count_said_in_the_record(provider) -> None:
    name, made = provider
    with FakeOpenAIServer(default=no_usage_reply("x" * 4_000)) as fake:
        model = metered(name, made, fake.base_url, Budgets(max_tokens=500))
        model.generate(QUESTION)
        with pytest.raises(BudgetExceeded) as stopped:
            model.generate(QUESTION)
    assert stopped.value.status == "max_tokens"
    step = model.recorder.trace.model_calls[0]
    assert step.local_tokens is not None and step.local_tokens.method == ESTIMATE_METHOD
    assert step.local_tokens.output_tokens == 1_000  # 4,000 characters at 4 a token
    assert step.usage.output_tokens is None  # the count drives the budget only; the usage stays unknown
    assert len(fake.requests) == 1
