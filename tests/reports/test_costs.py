"""Cost per task with index building amortised (reports/costs.py): the headline, the overview table and the
cost-vs-quality chart charge a RAG row what its indexes cost, spread over its tasks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from data_agent_compare.reports import plots, tables
from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.costs import amortised_cost_per_task, cost_per_task, index_shares
from data_agent_compare.reports.runs import load_comparison
from data_agent_compare.reports.summary import index_builds, index_lines

BUILT_NOW = {"index": "graph", "corpus": "c1", "model": "gpt-5-mini", "cached": False, "model_calls": 40,
             "cost_usd": 0.12, "seconds": 30.0}  # fmt: skip
FROM_CACHE = {"index": "summaries", "corpus": "c1", "model": "gpt-5-mini", "cached": True, "model_calls": 0,
              "cost_usd": 0.0, "seconds": 0.0, "built": {"model_calls": 9, "cost_usd": 0.06}}  # fmt: skip
OTHER_MODEL = {**BUILT_NOW, "model": "qwen3-30b-a3b-instruct", "cost_usd": 0.03}


def rag_run(wide_run, name: str = "wide"):
    """A wide run whose `rag_naive` row built one index, read another from the cache, and built one with
    its other model."""
    run = wide_run(name, systems=11, tasks=6)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["systems"]["rag_naive"]["indexing"] = [BUILT_NOW, FROM_CACHE, OTHER_MODEL]
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def values_with(spec: Any, key: str) -> list[dict]:
    """The chart's data points that carry `key`, wherever Altair put them."""
    if isinstance(spec, dict):
        return [p for v in spec.values() for p in values_with(v, key)]
    if isinstance(spec, list):
        if spec and all(isinstance(p, dict) and key in p for p in spec):
            return spec
        return [p for v in spec for p in values_with(v, key)]
    return []


def test_amortised_index_cost_spreads_built_and_cached_indexes_over_the_rows_tasks(wide_run):
    (data,) = load_comparison([rag_run(wide_run)])
    rows = {(r.system, r.model): r for r in data.summary()}
    rag, plain_row = rows[("rag_naive", "gpt-5-mini")], rows[("tool_use", "gpt-5-mini")]
    assert index_shares(data) == pytest.approx(
        {("rag_naive", "gpt-5-mini"): 0.18, ("rag_naive", "qwen3-30b-a3b-instruct"): 0.03}
    )
    assert amortised_cost_per_task(rag, index_shares(data)) == pytest.approx(cost_per_task(rag) + 0.18 / 6)
    assert amortised_cost_per_task(plain_row, index_shares(data)) == cost_per_task(plain_row)  # no index

    points = {p["row"]: p for p in values_with(plots.cost_quality(data).spec, "tasks_only")}
    assert points["rag_naive/gpt-5-mini"]["cost"] == pytest.approx(cost_per_task(rag) + 0.03)
    assert points["rag_naive/gpt-5-mini"]["tasks_only"] == pytest.approx(cost_per_task(rag))

    overview = tables.overview(data)
    column = overview.columns.index("cost $/task incl. index")
    cell = next(row[column] for row in overview.rows if [row[0].text, row[1].text] == ["rag_naive", "gpt-5-mini"])
    assert cell.value == pytest.approx(cost_per_task(rag) + 0.03)


def test_a_report_over_two_runs_charges_each_kept_task_its_own_runs_share(wide_run):
    first, second = rag_run(wide_run, "first"), rag_run(wide_run, "second")
    (data,) = load_comparison([first, second], merge_runs=True)
    # the same 6 tasks twice (two epochs each): each run's 0.18 over its own 6 tasks, both kept
    assert index_shares(data)[("rag_naive", "gpt-5-mini")] == pytest.approx(0.36)
    rag = next(r for r in data.summary() if (r.system, r.model) == ("rag_naive", "gpt-5-mini"))
    assert amortised_cost_per_task(rag, index_shares(data)) == pytest.approx(cost_per_task(rag) + 0.36 / 12)


def test_the_headlines_cheapest_row_pays_for_its_index(wide_run):
    run = wide_run("wide", systems=11, tasks=6)
    (before,) = load_comparison([run])
    cheapest = min(before.summary(), key=cost_per_task)  # cheapest on its tasks alone
    manifest = json.loads((run / "manifest.json").read_text())
    index = {**BUILT_NOW, "model": cheapest.model, "cost_usd": 5.0}  # an expensive index build
    manifest["systems"][cheapest.system]["indexing"] = [index]
    (run / "manifest.json").write_text(json.dumps(manifest))
    (data,) = load_comparison([run])
    headline = next(line for line in assemble(data).headline if line.startswith("Cheapest:"))
    assert f"{cheapest.system}/{cheapest.model} " not in headline
    shares = index_shares(data)
    runner_up = min(data.summary(), key=lambda r: amortised_cost_per_task(r, shares))
    assert headline.startswith(f"Cheapest: {runner_up.system}/{runner_up.model} ${cost_per_task(runner_up):.5f}")


def test_an_index_built_by_a_model_of_unknown_cost_leaves_the_rows_cost_unknown_not_cheaper(wide_run):
    run = wide_run("wide", systems=11, tasks=6)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["systems"]["rag_naive"]["indexing"] = [{**BUILT_NOW, "cost_usd": None}]  # a model without a price
    (run / "manifest.json").write_text(json.dumps(manifest))
    (data,) = load_comparison([run])
    rag = next(r for r in data.summary() if (r.system, r.model) == ("rag_naive", "gpt-5-mini"))
    assert cost_per_task(rag) is not None and amortised_cost_per_task(rag, index_shares(data)) is None
    assert "rag_naive/gpt-5-mini" not in {p["row"] for p in values_with(plots.cost_quality(data).spec, "tasks_only")}
    headline = next(line for line in assemble(data).headline if line.startswith("Cheapest:"))
    assert "rag_naive/gpt-5-mini " not in headline
    lines = index_lines(index_builds(data.runs[0].manifest))
    assert any("| graph | c1 |" in line and "| – |" in line for line in lines)
    assert lines[-1].startswith("Spent on indexes in this run: 40 model calls, $–")


def test_one_index_shared_by_two_rows_is_counted_once_in_every_total(wide_run):
    """rag_naive built the entity graph, rag_hyde read the same build (same cache key) in the same run."""
    run = wide_run("wide", systems=12, tasks=6)
    manifest = json.loads((run / "manifest.json").read_text())
    graph = {**BUILT_NOW, "key": "0123456789abcdef", "cost_usd": 0.0459}
    manifest["systems"]["rag_naive"]["indexing"] = [graph]
    read = {**graph, "cached": True, "model_calls": 0, "cost_usd": 0.0, "built": {"cost_usd": 0.0459}}
    manifest["systems"]["rag_hyde"]["indexing"] = [read]
    (run / "manifest.json").write_text(json.dumps(manifest))
    (data,) = load_comparison([run])
    shares = index_shares(data)
    charged = {row: cost for row, cost in shares.items() if row[1] == "gpt-5-mini" and cost}
    assert charged == pytest.approx({("rag_naive", "gpt-5-mini"): 0.02295, ("rag_hyde", "gpt-5-mini"): 0.02295})
    assert sum(charged.values()) == pytest.approx(0.0459)  # once, not twice
    overview = tables.overview(data)
    column = overview.columns.index("cost $/task incl. index")
    for system in ("rag_naive", "rag_hyde"):
        row = next(r for r in data.summary() if (r.system, r.model) == (system, "gpt-5-mini"))
        cell = next(c[column] for c in overview.rows if [c[0].text, c[1].text] == [system, "gpt-5-mini"])
        assert cell.value == pytest.approx(cost_per_task(row) + 0.02295 / 6)
    assert "split evenly" in (overview.note or "")
    spent = index_lines(index_builds(data.runs[0].manifest))[-1]
    assert "$0.0459" in spent  # summary.md's total: once
