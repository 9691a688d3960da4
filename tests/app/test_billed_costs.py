"""Costs as billed, end to end through `compare` against a local OpenRouter-like server (issue 36): a reply
without usage is never $0 nor "Cheapest"; the provider's cost is the headline, the price table's is kept
beside it and a difference above 5% is named; runs stay apart unless merged; headlines only for what was
earned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.app.cli import app

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


def test_an_openrouter_reply_without_usage_is_unknown_never_zero_and_never_cheapest(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeOpenAIServer() as fake:
        fake.responder = answer_with({"silent": None, "counted": usage(100, 10)})
        price = "{input_per_mtok: 1.25, output_per_mtok: 10.0}"
        run(
            tmp_path, openrouter_table(tmp_path, fake.base_url, silent=price, counted=price), ["silent", "counted"], out
        )
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    silent = [r["usage"] for r in records if r["model"] == "silent"]
    assert silent and all(u["cost_usd"] is None and u["input_tokens"] is None for u in silent)
    report = (out / "report.md").read_text()
    cheapest = next(line for line in report.splitlines() if "Cheapest" in line)
    assert "silent" not in cheapest
    assert "Cost unknown" in report and "tool_use/silent" in report
