"""DAB's published aggregate as the leaderboard prints it: each dataset's pass@1 rounded to 4 places, their mean
rounded to 4 places and printed at 4 places, the unrounded mean beside it (issue 25 item 8: `compare score`
printed 0.862 where the leaderboard shows 0.8617)."""

from types import SimpleNamespace

from rich.console import Console

from data_agent_compare.cli.score_tables import aggregate_table
from data_agent_compare.tasks.dab import DataAgentBench

from helpers import FIXTURES


def _rows(dataset: str, correct: int, runs: int = 7) -> list[dict]:
    return [{"task_id": f"{dataset}/query1", "run": str(r), "correct": float(r < correct)} for r in range(runs)]


def test_the_dab_aggregate_rounds_each_dataset_to_four_places_before_averaging():
    """0, 1/7 and 1/7: the datasets print 0.0000, 0.1429, 0.1429, whose mean 0.09527 prints 0.0953; the
    unrounded mean 0.095238 would print 0.0952."""
    rows = _rows("agnews", 0) + _rows("bookreview", 1) + _rows("stockindex", 1)
    tasks = [SimpleNamespace(id=f"{d}/query1") for d in ("agnews", "bookreview", "stockindex")]
    bench = DataAgentBench(FIXTURES / "dab_final")
    aggregate = bench.submission_aggregate(rows, tasks)
    assert aggregate["pass@1"] == 0.0953
    assert abs(aggregate["pass@1 unrounded"] - (1 / 7 + 1 / 7) / 3) < 1e-12
    console = Console(width=120, record=True)
    console.print(aggregate_table("dab leaderboard aggregate", aggregate, bench.published_digits))
    shown = console.export_text()
    assert "0.0953" in shown and "0.095238" in shown and "0.095 " not in shown
