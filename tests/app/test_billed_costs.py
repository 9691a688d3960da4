"""Costs as billed, end to end through `compare` against a local OpenRouter-like server (issue 36): a reply
without usage is never $0 nor "Cheapest"; the provider's cost is the headline, the price table's is kept
beside it and a difference above 5% is named; runs stay apart unless merged; headlines only for what was
earned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app

from helpers import KEY, FakeOpenAIServer, RecordedRequest, tool_call_response, usage

runner = CliRunner()


def openrouter_table(tmp_path: Path, base_url: str, **prices: str) -> Path:
    """Aliases of one OpenRouter-like server: `alias: price` (a YAML flow mapping)."""
    lines = ["models:"]
    for alias, price in prices.items():
        lines.append(
            f"  {alias}: {{provider: openrouter, model_id: 'openai/{alias}', base_url: '{base_url}', price: {price}}}"
        )
    path = tmp_path / "models.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(tmp_path: Path, table: Path, models: list[str], out: Path, *extra: str) -> str:
    config = tmp_path / f"{out.name}.yaml"
    config.write_text(f"models_file: {table}\nmodels: {json.dumps(models)}\n")
    result = runner.invoke(app, ["--config", str(config), "--limit", "2", "--out", str(out), *extra])
    assert result.exit_code == 0, result.output
    return result.output


def answer_with(usage_of: dict[str, dict | None], answer: str = "A"):
    """A responder answering each model with `usage_of[model]` (None: no usage in the reply)."""

    def respond(request: RecordedRequest):
        model = (request.body or {}).get("model", "").removeprefix("openai/")
        reply = tool_call_response([("c1", "answer", json.dumps({"answer": answer}))])
        if usage_of.get(model) is None:
            del reply.body["usage"]
        else:
            reply.body["usage"] = usage_of[model]
        return reply

    return respond


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)


TABLE = "{input_per_mtok: 1.25, output_per_mtok: 10.0}"
TABLE_COST = (100 * 1.25 + 10 * 10.0) / 1e6  # a call of 100 in, 10 out at the table's rates


def test_without_usage_cost_is_unknown_never_cheapest_and_a_bill_3x_the_table_is_named(tmp_path: Path) -> None:
    """One run, two models of one OpenRouter-like server: `silent` replies without usage, `billed` reports a
    cost three times what the price table gives for its tokens."""
    out = tmp_path / "run"
    with FakeOpenAIServer() as fake:
        fake.responder = answer_with({"silent": None, "billed": usage(100, 10, cost=3 * TABLE_COST)})
        table = openrouter_table(tmp_path, fake.base_url, silent=TABLE, billed=TABLE)
        run(tmp_path, table, ["silent", "billed"], out, "--label", "before")
    assert json.loads((out / "manifest.json").read_text())["config"]["label"] == "before"  # `--label`
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    silent = [r["usage"] for r in records if r["model"] == "silent"]
    assert silent and all(u["cost_usd"] is None and u["input_tokens"] is None for u in silent)
    billed = [r["usage"] for r in records if r["model"] == "billed"]
    for spent in billed:  # the provider's is the cost, the table's for the same tokens kept beside it
        assert spent["table_cost_usd"] == pytest.approx(
            (spent["input_tokens"] * 1.25 + spent["output_tokens"] * 10) / 1e6
        )
        assert spent["cost_usd"] == pytest.approx(3 * spent["table_cost_usd"])
    provider, table = sum(u["cost_usd"] for u in billed), sum(u["table_cost_usd"] for u in billed)

    report = (out / "report.md").read_text()
    cheapest = [line for line in report.splitlines() if "Cheapest" in line]
    assert all("silent" not in line for line in cheapest)
    assert "Cost unknown" in report and "tool_use/silent" in report
    summary = (out / "summary.md").read_text()
    for text in (summary, report):
        named = next(line for line in text.splitlines() if "price table gives" in line)
        assert named.lstrip("- ").startswith(("billed:", "Cost sources differ: billed:"))
        assert f"${provider:.6f}" in named and f"${table:.6f}" in named
        assert "(+200%)" in named
