"""A plug-in provider may report no token counts (None: unknown). Adding them up, for a call whose first reply
was paid for but unusable and asked again, keeps them unknown — never 0 and never a TypeError — and a priced
model's cost over unknown tokens is unknown too."""

from __future__ import annotations

from data_agent_compare.core.model import (
    CallContext,
    Message,
    MeteredModel,
    ModelConfig,
    ModelProvider,
    ModelRequest,
    ModelResponse,
    Price,
    RetrySettings,
)
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder, Usage

QUESTION = [Message(role="user", content="How many rows?")]


class NoTokenCountsProvider(ModelProvider):
    """A scripted test model that reports no token counts: first a reply with a defect, then a good one."""

    def __init__(self) -> None:
        self.calls = 0

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext | None = None
    ) -> ModelResponse:
        self.calls += 1
        unknown = Usage(input_tokens=None, output_tokens=None, reasoning_tokens=None, cached_tokens=None)
        defect = "tool-call arguments are not JSON" if self.calls == 1 else None
        return ModelResponse(message=Message(role="assistant", content="42"), usage=unknown, defect=defect)


def metered(price: Price | None) -> tuple[MeteredModel, NoTokenCountsProvider]:
    provider = NoTokenCountsProvider()
    model_config = ModelConfig(alias="m", provider="plugin", model_id="m", price=price)
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="m"), Budgets())
    retries = RetrySettings(base_backoff_s=0.001, max_backoff_s=0.001)
    return MeteredModel(model_config, provider, recorder, system="s", retries=retries), provider


def test_scripted_plugin_without_token_counts_retried_defect_keeps_tokens_and_cost_unknown() -> None:
    model, provider = metered(Price(input_per_mtok=1.0, output_per_mtok=2.0))

    reply = model.generate(QUESTION)

    assert provider.calls == 2  # the defect was asked again
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.cached_tokens) == (None, None, None)
    assert (reply.usage.cost_usd, reply.usage.cost_source) == (None, "unknown")
    totals = model.recorder.trace.usage()
    assert (totals.input_tokens, totals.output_tokens, totals.cost_usd) == (None, None, None)


def test_price_of_unknown_tokens_is_unknown_and_of_known_tokens_the_table() -> None:
    price = Price(input_per_mtok=1.0, output_per_mtok=10.0)

    assert price.cost(Usage(input_tokens=None, output_tokens=5)) is None
    assert price.cost(Usage(input_tokens=1_000_000, output_tokens=100_000)) == 2.0


def test_usage_sum_with_an_unknown_part_is_unknown_and_of_known_parts_exact() -> None:
    known = Usage(input_tokens=3, output_tokens=4, cost_usd=0.5, cost_source="provider")

    total = known.plus(Usage.unknown())

    assert (total.input_tokens, total.output_tokens, total.cost_usd, total.cost_source) == (None, None, None, "unknown")
    both = known.plus(Usage(input_tokens=1, output_tokens=1, cost_usd=0.25, cost_source="price_table"))
    assert (both.input_tokens, both.output_tokens, both.cost_usd, both.cost_source) == (4, 5, 0.75, "mixed")
