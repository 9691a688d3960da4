"""`compare models --prices-from-openrouter` against a local fake of OpenRouter's model list."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core.model import Price
from data_agent_compare.engine.config import load_model_table
from data_agent_compare.engine.prices import _price, refresh_table, shipped_models_file

from helpers import KEY, FakeOpenAIServer, FakeResponse

runner = CliRunner()


def listed(model_id: str, prompt: str, completion: str) -> dict:
    """One entry of OpenRouter's `GET /models` (prices in USD per token, as strings)."""
    return {"id": model_id, "name": model_id, "created": 1, "pricing": {"prompt": prompt, "completion": completion}}


MODEL_LIST = FakeResponse(
    {
        "data": [
            listed("openai/gpt-5", "0.0000015", "0.000012"),
            listed("deepseek/deepseek-v3.2", "0.00000028", "0.00000042"),  # unchanged
            listed("openrouter/auto", "-1", "-1"),  # variable price: skipped
        ]
    }
)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    copy = tmp_path / "models.yaml"
    shutil.copy(shipped_models_file(), copy)
    return copy


def test_prices_are_refreshed_in_place_from_the_model_list(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = table.read_text()
    with FakeOpenAIServer() as fake:
        fake.get_routes["/models"] = MODEL_LIST
        monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
        monkeypatch.setenv("OPENROUTER_BASE_URL", fake.base_url)
        result = runner.invoke(app, ["models", "--prices-from-openrouter", "--models-file", str(table)])

    assert result.exit_code == 0, result.output
    assert "gpt-5 (openai/gpt-5): $/Mtok in/out 1.25 / 10 -> 1.5 / 12" in result.output
    assert "1 price(s) changed" in result.output and KEY not in result.output
    assert (fake.requests[0].path, fake.requests[0].headers["authorization"]) == ("/api/v1/models", f"Bearer {KEY}")
    models = load_model_table(table)
    assert (models["gpt-5"].price.input_per_mtok, models["gpt-5"].price.output_per_mtok) == (1.5, 12.0)
    assert models["gpt-5"].price.cached_input_per_mtok == 0.125  # a class the list does not price is kept
    assert models["gpt-5"].price.source == "OpenRouter's model list" and models["gpt-5"].price.checked
    assert models["deepseek-v3.2"].price == load_model_table(shipped_models_file())["deepseek-v3.2"].price
    after = table.read_text()
    assert before.replace(before[before.index("  gpt-5:") : before.index("  gpt-5-mini:")], "") == after.replace(
        after[after.index("  gpt-5:") : after.index("  gpt-5-mini:")], ""
    )  # comments, order and every other alias kept


def test_the_listed_cache_and_reasoning_rates_and_request_fee_are_read(tmp_path: Path) -> None:
    entry = listed("x/a", "0.000001", "0.000004")
    entry["pricing"] |= {"input_cache_read": "0.0000001", "internal_reasoning": "0.000005", "request": "0.002"}
    price = _price(entry)
    assert price is not None
    assert (price.cached_input_per_mtok, price.reasoning_per_mtok, price.request_fee_usd) == (0.1, 5.0, 0.002)


def test_without_a_key_it_exits_2_and_changes_nothing(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = table.read_text()
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)

    result = runner.invoke(app, ["models", "--prices-from-openrouter", "--models-file", str(table)])

    assert result.exit_code == 2
    assert "OPENROUTER_API_KEY" in result.output and "nothing was changed" in result.output
    assert table.read_text() == before


def test_a_failing_model_list_exits_1_without_leaking_the_key(table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = table.read_text()
    with FakeOpenAIServer() as fake:
        fake.get_routes["/models"] = FakeResponse({"error": {"message": f"bad key {KEY}"}}, status=401)
        monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
        monkeypatch.setenv("OPENROUTER_BASE_URL", fake.base_url)
        result = runner.invoke(app, ["models", "--prices-from-openrouter", "--models-file", str(table)])

    assert result.exit_code == 1 and "HTTP 401" in result.output and KEY not in result.output
    assert table.read_text() == before


def test_block_style_and_missing_prices_are_written_too(tmp_path: Path) -> None:
    table = tmp_path / "models.yaml"
    table.write_text(
        "models:\n"
        "  # mine\n"
        "  a:\n"
        "    provider: openrouter\n"
        "    model_id: x/a\n"
        "    price:\n"
        "      input_per_mtok: 1\n"
        "      output_per_mtok: 2\n"
        "    context_window: 100\n"
        "  b:\n"
        "    provider: openrouter\n"
        "    model_id: x/b\n"
        "  c:\n"
        "    provider: openai-compatible\n"
        "    model_id: x/a\n"
        "    base_url: http://127.0.0.1:1/v1\n"
    )
    new = Price(input_per_mtok=3, output_per_mtok=4)

    changes = refresh_table(table, {"x/a": new, "x/b": new})

    assert [c.alias for c in changes] == ["a", "b"]
    models = load_model_table(table)
    assert (models["a"].price.rates, models["b"].price, models["c"].price) == (new.rates, new, None)
    assert models["a"].context_window == 100 and "  # mine\n" in table.read_text()
