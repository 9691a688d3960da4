"""An API model with no price in its alias whose server reports no cost costs an unknown amount, never $0
(issue 25 item 1): null in results.jsonl, "–" in summary.md, never "Cheapest" in the report, said at the start; an alias
priced at 0 explicitly, and the embedded model (a backend that bills nothing), stay $0."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.commands.running import progress_line
from data_agent_compare.cli.main import app
from data_agent_compare.core import Message, ModelConfig
from data_agent_compare.core.model import MeteredModel, ModelError, unpriced
from data_agent_compare.core.runlog import InterruptedSpend, Manifest, ResultRecord, RunLog
from data_agent_compare.core.trace import Usage
from data_agent_compare.engine.outputs import spend_lines
from data_agent_compare.engine.progress import RunProgress
from data_agent_compare.engine.runner import keep_earlier_spend
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.scripted import tool_call_message

from helpers import FakeOpenAIServer, error_response, load_tasks, recorder, run_task, tool_call_response, usage

runner = CliRunner()


def alias_table(tmp_path, base_url: str) -> str:
    """Two aliases of one server: `unpriced` (no price) and `free-server` (priced at 0 on purpose)."""
    table = tmp_path / "models.yaml"
    table.write_text(
        "models:\n"
        f"  unpriced: {{provider: openai-compatible, model_id: m, base_url: '{base_url}', api_key_env: null}}\n"
        f"  free-server: {{provider: openai-compatible, model_id: m, base_url: '{base_url}', api_key_env: null,"
        " price: {input_per_mtok: 0, output_per_mtok: 0}}\n"
    )
    return str(table)


def test_a_scripted_server_without_cost_and_an_alias_without_price_give_unknown_cost_not_zero(tmp_path):
    out = tmp_path / "run"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10))  # no "cost"
    with FakeOpenAIServer(default=answer) as fake:
        config = tmp_path / "run.yaml"
        config.write_text(f"models_file: {alias_table(tmp_path, fake.base_url)}\nmodels: [unpriced, free-server]\n")
        result = runner.invoke(app, ["--config", str(config), "--limit", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "unpriced has no price in its alias: its cost is unknown" in result.output
    assert "free-server has no price" not in result.output

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    unknown = [r["usage"] for r in records if r["model"] == "unpriced"]
    free = [r["usage"] for r in records if r["model"] == "free-server"]
    assert len(unknown) == len(free) == 2
    assert all(u["cost_usd"] is None and u["cost_source"] == "unknown" and u["input_tokens"] for u in unknown)
    assert all(u["cost_usd"] == 0.0 and u["cost_source"] == "free" for u in free)

    summary = (out / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("|") and "unpriced" in line)
    assert "– (" in row or "| – |" in row  # its total cost: unknown, not 0.0000
    assert "0.0000" not in row
    headline = (out / "report.md").read_text()
    cheapest = next(line for line in headline.splitlines() if "Cheapest" in line)
    assert "unpriced" not in cheapest  # (nor free-server: neither answered correctly, so no row is crowned)
    assert "Cost unknown" in headline and "tool_use/unpriced" in headline


def test_an_alias_priced_at_zero_and_a_backend_that_bills_nothing_stay_free() -> None:
    free = ModelConfig(alias="f", provider="openai-compatible", model_id="m", price={"input_per_mtok": 0})
    assert not unpriced(free)
    assert not unpriced(ModelConfig(alias="local", provider="local", model_id="gemma"))  # runs here, no price
    assert unpriced(ModelConfig(alias="u", provider="openai-compatible", model_id="m"))


def test_a_scripted_server_refusing_the_call_without_usage_costs_zero_not_unknown() -> None:
    """Nothing used, nothing to price: a call the server refused with no tokens reported costs $0 at any price."""
    config = ModelConfig(alias="u", provider="openai-compatible", model_id="m", api_key_env=None)
    with FakeOpenAIServer(default=error_response(400, "bad request")) as fake:
        model = MeteredModel(
            config.model_copy(update={"base_url": fake.base_url}), OpenAIHTTPProvider(), recorder(), system="s"
        )
        with pytest.raises(ModelError):
            model.generate([Message(role="user", content="hi")])
    (step,) = model.recorder.trace.model_calls
    assert step.usage.cost_usd == 0.0 and step.usage.cost_source == "free"


def test_compare_models_lists_a_missing_price_as_unknown(tmp_path):
    table = alias_table(tmp_path, "http://127.0.0.1:9/v1")
    result = runner.invoke(app, ["models", "--models-file", table, "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["alias"]: row for row in json.loads(result.output)}
    assert rows["unpriced"]["$/Mtok"] == "– (unknown)"
    assert rows["free-server"]["$/Mtok"] == "0 in / 0 out" and rows["local"]["$/Mtok"] == "0 in / 0 out"


def test_a_scripted_backend_that_bills_nothing_costs_zero_through_the_runner_layers(tmp_path, scripted_model):
    """The embedded model's case: a backend that runs here (`bills_nothing`) and an alias without a price cost
    $0 through the runner's provider layers (journal, cache key), not an unknown amount."""
    task = next(t for t in load_tasks("bundled") if t.question_type == "single_choice")
    model = scripted_model(lambda request, context: tool_call_message("answer", {"answer": "A"}))
    assert model.price is None
    record, _, _ = run_task(tmp_path, model, task, "tool_use")
    assert record["usage"]["input_tokens"] > 0
    assert (record["usage"]["cost_usd"], record["usage"]["cost_source"]) == (0.0, "free")


def unit(cost: float | None, attempt: str) -> ResultRecord:
    source = "unknown" if cost is None else "price_table"
    return ResultRecord(
        task_id="T1",
        benchmark="bundled",
        system="s",
        model="m",
        epoch=1,
        question_type="factoid",
        status="completed",
        answer={},
        scores={"exact_match": 1.0},
        usage=Usage(input_tokens=10, output_tokens=2, cost_usd=cost, cost_source=source),
        latency_s=1.0,
        latency_by_phase={},
        model_calls=1,
        tool_calls=[],
        trace_file="traces/s/m/T1.json",
        attempt=attempt,
    )


def test_unknown_spend_stays_unknown_in_retries_interrupted_attempts_and_the_progress_line(tmp_path):
    retried = unit(0.001, "a2")
    keep_earlier_spend(retried, unit(None, "a1"))  # the first attempt's model had no price
    assert retried.usage.cost_usd is None and retried.usage.input_tokens == 20

    spends = [InterruptedSpend(attempt=a, task_id="T1", system="s", model="m", epoch=1, usage=u.usage) for a, u in
              [("a1", unit(0.002, "a1")), ("a2", unit(None, "a2"))]]  # fmt: skip
    run = RunLog(run_dir=tmp_path, manifest=Manifest.model_construct(), records=[], interrupted=spends)
    assert run.interrupted_usage().cost_usd is None and run.interrupted_usage().input_tokens == 20
    assert any("$– (unknown" in line for line in spend_lines(run))

    progress = RunProgress(total=3)
    progress.add(unit(0.002, "a"), 1.0, 0)
    progress.add(unit(None, "b"), 1.0, 0)
    assert "$0.0020 + 1 unit(s) cost unknown" in progress_line(progress)
