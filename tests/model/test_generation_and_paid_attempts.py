"""What the provider billed counts also when the call failed: a paid reply whose tool arguments are not JSON,
asked again and then refused with a 400, leaves its tokens and cost in the trace, the record and the budgets.
And one generation config: the run's sampling settings replace whatever a caller asks, unset ones are
removed, and both what was asked and what was sent are kept."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from data_agent_compare.core.model import (
    GenerationSettings,
    MeteredModel,
    ModelConfig,
    ModelError,
    Price,
    RetrySettings,
)
from data_agent_compare.core.trace import BudgetExceeded, Budgets, Trace, TraceRecorder
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openrouter import OpenRouterProvider

from helpers import (
    KEY,
    QUESTION,
    SQL_TOOL,
    FakeOpenAIServer,
    FakeResponse,
    error_response,
    text_response,
    tool_call_response,
    usage,
)

FAST = RetrySettings(max_attempts=3, base_backoff_s=0.01, max_backoff_s=0.05, read_timeout_s=2, attempt_timeout_s=5)
PRICE = Price(input_per_mtok=1.0, output_per_mtok=10.0)
BAD_ARGUMENTS = tool_call_response([("call_1", "sql_query", '{"sql": "SELECT')], usage_body=usage(1000, 200))


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture
def provider() -> Iterator[OpenAIHTTPProvider]:
    http = OpenAIHTTPProvider()
    yield http
    http.close()


def metered(provider: OpenAIHTTPProvider, base_url: str, budgets: Budgets | None = None, **kw) -> MeteredModel:
    config = ModelConfig(alias="m", provider="openai-compatible", model_id="m", base_url=base_url, price=PRICE)
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="m"), budgets or Budgets())
    return MeteredModel(config, provider, recorder, system="s", retries=FAST, **kw)


def test_fake_server_paid_reply_then_400_counts_in_tokens_cost_and_budget(fake, provider):
    fake.enqueue(BAD_ARGUMENTS, error_response(400, "invalid request"))
    model = metered(provider, fake.base_url, Budgets(max_tokens=1000))

    with pytest.raises(ModelError):
        model.generate(QUESTION, [SQL_TOOL])

    trace = model.recorder.trace
    assert (trace.usage().input_tokens, trace.usage().output_tokens) == (1000, 200)
    assert trace.usage().cost_usd == pytest.approx((1000 * 1.0 + 200 * 10.0) / 1e6)
    assert trace.model_calls[0].success is False
    with pytest.raises(BudgetExceeded) as stopped:  # the billed tokens used up the token budget
        model.generate(QUESTION)
    assert stopped.value.status == "max_tokens"


def test_fake_server_error_reply_that_reports_usage_counts_beside_the_retry(fake, provider):
    billed = FakeResponse({"error": {"code": 502, "message": "upstream died"}, "usage": usage(300, 40)}, status=502)
    fake.enqueue(billed, text_response("fine", usage_body=usage(10, 5)))

    reply = metered(provider, fake.base_url).generate(QUESTION)

    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (310, 45)


def test_fake_server_gets_the_runs_generation_settings_not_the_callers(fake, provider):
    fake.enqueue(text_response("a"), text_response("b"))
    generation = GenerationSettings(temperature=0.0, seed=7)
    model = metered(provider, fake.base_url, generation=generation)

    model.generate(QUESTION, temperature=0.9, top_p=0.5)
    model.generate(QUESTION)

    sent = [
        {k: r.body[k] for k in ("temperature", "top_p", "seed", "max_tokens") if k in r.body} for r in fake.requests
    ]
    assert sent == [{"temperature": 0.0, "seed": 7}, {"temperature": 0.0, "seed": 7}]
    asked = [step.generation_asked for step in model.recorder.trace.model_calls]
    assert asked == [{"temperature": 0.9, "top_p": 0.5}, None]
    assert model.recorder.trace.generation_asked() == {"temperature": {"0.9": 1}, "top_p": {"0.5": 1}}


def test_fake_server_gets_nothing_the_run_leaves_unset(fake, provider):
    fake.enqueue(text_response("a"))
    model = metered(provider, fake.base_url, generation=GenerationSettings())

    model.generate(QUESTION, temperature=0.1, max_output_tokens=64)

    assert not {"temperature", "max_tokens", "top_p", "seed"} & set(fake.requests[0].body)


def test_fake_openrouter_gets_every_generation_setting_through_the_sdk(fake, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    fake.enqueue(text_response("a"))
    config = ModelConfig(alias="gpt-5", provider="openrouter", model_id="openai/gpt-5", base_url=fake.base_url)
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="gpt-5"), Budgets())
    generation = GenerationSettings(temperature=0.2, top_p=0.9, seed=7, max_output_tokens=50)
    openrouter = OpenRouterProvider()
    try:
        MeteredModel(config, openrouter, recorder, system="s", retries=FAST, generation=generation).generate(QUESTION)
    finally:
        openrouter.close()

    body = fake.requests[0].body
    assert {k: body.get(k) for k in ("temperature", "top_p", "seed", "max_tokens")} == {
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "max_tokens": 50,
    }


def test_fake_openrouter_error_reply_that_reports_usage_counts_beside_the_retry(fake, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    billed = FakeResponse({"error": {"code": 502, "message": "upstream died"}, "usage": usage(300, 40)}, status=502)
    fake.enqueue(billed, text_response("fine", usage_body=usage(10, 5)))
    config = ModelConfig(alias="gpt-5", provider="openrouter", model_id="openai/gpt-5", base_url=fake.base_url)
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="gpt-5"), Budgets())
    openrouter = OpenRouterProvider()
    try:
        reply = MeteredModel(config, openrouter, recorder, system="s", retries=FAST).generate(QUESTION)
    finally:
        openrouter.close()

    assert (reply.usage.input_tokens, reply.usage.output_tokens) == (310, 45)


class StubLlama:
    """Stands in for llama.cpp where the embedded model's generation is stubbed."""

    model_path = "gemma-3-270m.gguf"

    def count_tokens(self, text: str) -> int:
        return len(text) // 4

    def n_ctx(self) -> int:
        return 8192


def test_embedded_models_cut_off_output_counts_its_tokens_with_generation_stubbed(monkeypatch):
    from data_agent_compare.providers import local

    cut = {"choices": [{"text": '{"story": "a fox who', "finish_reason": "length"}]}
    monkeypatch.setattr(local, "_complete", lambda *_: {**cut, "usage": {"prompt_tokens": 40, "completion_tokens": 24}})
    provider = local.LocalLlamaProvider()
    monkeypatch.setattr(provider, "_load", lambda config: StubLlama())
    config = ModelConfig(alias="local", provider="local", model_id="gemma-3-270m")
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="local"), Budgets())
    schema = {"type": "object", "properties": {"story": {"type": "string"}}, "required": ["story"]}

    with pytest.raises(ModelError):
        MeteredModel(config, provider, recorder, system="s", retries=FAST).generate(QUESTION, response_schema=schema)

    step = recorder.trace.model_calls[0]
    assert step.success is False and step.usage.total_tokens == 64 * len(step.failed_attempts) > 0
