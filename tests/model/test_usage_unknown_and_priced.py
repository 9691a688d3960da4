"""Usage as providers bill it (issue 36): a reply without usage is unknown on every provider, never $0, and
the token budget still meets it by a count said in the record; token classes are priced at their own rates."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data_agent_compare.core.model import MeteredModel, ModelConfig, ModelProvider, Price, RetrySettings
from data_agent_compare.core.trace import ESTIMATE_METHOD, BudgetExceeded, Budgets, Trace, TraceRecorder, Usage
from data_agent_compare.engine.config import load_model_table
from data_agent_compare.engine.prices import shipped_models_file
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


# ---------------------------------------------------------------- token classes at their own rates


def shipped_price(alias: str) -> Price:
    price = load_model_table(shipped_models_file())[alias].price
    assert price is not None and price.checked  # every shipped rate says when it was checked
    return price


@pytest.mark.parametrize(
    ("alias", "by_hand"),
    [
        # 10,000 prompt tokens of which 6,000 cached, 1,500 output of which 1,000 reasoning:
        # 4,000 × $0.28 + 6,000 × $0.028 + 1,500 × $0.42 per million
        ("deepseek-v3.2", (4_000 * 0.28 + 6_000 * 0.028 + 1_500 * 0.42) / 1e6),
        # 4,000 × $1.25 + 6,000 × $0.125 + 1,500 × $10 (reasoning billed as output) per million
        ("gpt-5", (4_000 * 1.25 + 6_000 * 0.125 + 1_500 * 10.0) / 1e6),
    ],
)
def test_cached_tokens_are_priced_at_the_cached_rate_of_both_card_models(alias: str, by_hand: float) -> None:
    usage = Usage(input_tokens=10_000, cached_tokens=6_000, output_tokens=1_500, reasoning_tokens=1_000)
    assert shipped_price(alias).cost(usage) == pytest.approx(by_hand, rel=1e-12)


def test_cache_writes_reasoning_and_a_request_fee_are_billed_at_their_own_rates() -> None:
    price = Price(
        input_per_mtok=3.0,
        cached_input_per_mtok=0.3,
        cache_write_per_mtok=3.75,
        output_per_mtok=15.0,
        reasoning_per_mtok=20.0,
        request_fee_usd=0.001,
    )
    usage = Usage(input_tokens=1_000, cached_tokens=200, cache_write_tokens=300, output_tokens=100, reasoning_tokens=40)
    by_hand = (500 * 3.0 + 200 * 0.3 + 300 * 3.75 + 60 * 15.0 + 40 * 20.0) / 1e6 + 2 * 0.001
    assert price.cost(usage, requests=2) == pytest.approx(by_hand, rel=1e-12)


def test_the_meter_prices_the_classes_an_openrouter_reply_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    body = {
        "prompt_tokens": 10_000,
        "completion_tokens": 1_500,
        "total_tokens": 11_500,
        "prompt_tokens_details": {"cached_tokens": 6_000, "cache_write_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 1_000},
    }
    provider = OpenRouterProvider()
    with FakeOpenAIServer(default=completion({"content": "42"}, "stop", body)) as fake:
        model = metered("openrouter", provider, fake.base_url)
        model.config = model.config.model_copy(update={"price": shipped_price("gpt-5")})
        model.generate(QUESTION)
    provider.close()
    usage = model.recorder.trace.model_calls[0].usage
    assert (usage.cached_tokens, usage.cost_source) == (6_000, "price_table")
    assert usage.cost_usd == pytest.approx((4_000 * 1.25 + 6_000 * 0.125 + 1_500 * 10.0) / 1e6, rel=1e-12)
