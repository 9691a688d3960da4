"""Headlines crown only what was earned (issue 36 item 6): no "Most accurate" on a 0-vs-0 tie, "Cheapest" and
"Fastest" only among rows with a correct answer, a tie names every tied row, and a row that answered nothing
correctly is on no cost frontier."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from data_agent_compare.reports import plots
from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.runs import load_comparison


def rewrite(run: Path, change: Callable[[dict], None]) -> Path:
    path = run / "results.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        change(record)
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return run


def nobody_right(record: dict) -> None:
    record["scores"]["exact_match"] = 0.0


def headline(run: Path) -> list[str]:
    (data,) = load_comparison([run])
    return assemble(data).headline


def test_a_zero_vs_zero_tie_crowns_no_row_most_accurate_nor_cheapest(wide_run) -> None:
    lines = headline(rewrite(wide_run(systems=3, tasks=4), nobody_right))
    most = next(line for line in lines if line.startswith("Most accurate"))
    assert most.startswith("Most accurate: none: no row answered correctly")
    assert "Cheapest: none: no row of known cost answered any task correctly" in lines
    assert not any(line.startswith("Fastest") for line in lines)


def test_only_rows_with_a_correct_answer_are_cheapest_and_a_tie_names_every_tied_row(wide_run) -> None:
    def shape(record: dict) -> None:
        system = record["system"]
        record["scores"]["exact_match"] = 0.0 if system == "langgraph_react" else 1.0
        # the row that earned nothing is by far the cheapest; two rows that earned tie on cost
        record["usage"]["cost_usd"] = {"langgraph_react": 0.00001, "tool_use": 0.002, "planning": 0.002}.get(
            system, 0.5
        )

    run = rewrite(wide_run(systems=6, tasks=4, models=("gpt-5-mini",)), shape)
    cheapest = next(line for line in headline(run) if line.startswith("Cheapest"))
    assert cheapest == "Cheapest: tool_use/gpt-5-mini, planning/gpt-5-mini (tied) $0.00200 per task" or cheapest == (
        "Cheapest: planning/gpt-5-mini, tool_use/gpt-5-mini (tied) $0.00200 per task"
    )
    (data,) = load_comparison([run])
    frontier = {
        point["row"]
        for point in plots.pareto(
            [
                {"row": f"{r.system}/{r.model}", "cost": r.cost_per_task_usd, "accuracy": r.accuracy}
                for r in data.summary()
            ]
        )
    }
    assert "langgraph_react/gpt-5-mini" not in frontier and frontier
