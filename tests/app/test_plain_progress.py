"""Progress lines when the output is not a terminal: a piped run says how it goes at least every few
seconds, and says each finished unit without flooding the log."""

from __future__ import annotations

import time
from dataclasses import dataclass

from data_agent_compare.cli.plain_progress import PlainProgress


@dataclass
class Counts:
    total: int
    done: int = 0


def describe(counts: Counts) -> str:
    return "1 in flight"


def test_a_run_where_no_unit_finishes_still_prints_a_line_every_interval():
    lines: list[str] = []
    with PlainProgress(Counts(total=3), describe, lines.append, every_s=0.1):
        time.sleep(0.45)
    assert len(lines) >= 3  # one at once, then one per interval
    assert all(line.startswith("progress: 0/3 units · 0:00:00 · 1 in flight") for line in lines)


def test_finished_units_are_said_at_most_once_per_gap_and_the_runs_last_always():
    lines: list[str] = []
    counts = Counts(total=3)
    with PlainProgress(counts, describe, lines.append, every_s=60.0, min_gap_s=60.0) as progress:
        counts.done = 1
        progress.unit_finished("tool_use/local T1 completed")  # a moment after the first line: not said
        counts.done = 3
        progress.unit_finished("tool_use/local T3 completed")  # the run's last unit: said
    assert lines[0] == "progress: 0/3 units · 0:00:00 · 1 in flight"
    assert lines[1:] == ["progress: 3/3 units · 0:00:00 · 1 in flight · last: tool_use/local T3 completed"]


def test_a_finished_unit_after_the_gap_is_said_with_its_outcome_and_on_the_lines_after_it():
    lines: list[str] = []
    counts = Counts(total=5)
    with PlainProgress(counts, describe, lines.append, every_s=0.2, min_gap_s=0.05) as progress:
        time.sleep(0.1)
        counts.done = 1
        progress.unit_finished("reflection/local T1 infra_error")
        said = len(lines)
        time.sleep(0.45)
    assert lines[said - 1].endswith("1/5 units · 0:00:00 · 1 in flight · last: reflection/local T1 infra_error")
    assert len(lines) > said and all(line.endswith("last: reflection/local T1 infra_error") for line in lines[said:])


def test_by_default_a_burst_of_finished_units_prints_no_line_per_unit():
    """The throttle's defaults (a line every 20 s at least, finished units at most one per 5 s): fifty units
    finishing in a burst print none of their own; with no gap they would print fifty."""
    lines: list[str] = []
    counts = Counts(total=100)
    progress = PlainProgress(counts, describe, lines.append)  # the defaults, as the run uses them
    assert progress.every_s >= 5 and progress.min_gap_s > 0
    for unit in range(50):
        counts.done += 1
        progress.unit_finished(f"tool_use/m T{unit} completed")
    assert len(lines) <= 1  # one, were the burst slower than the gap on a loaded machine
