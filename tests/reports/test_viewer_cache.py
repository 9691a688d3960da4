"""What the viewer keeps of a run (`reports/viewer/cache.py`): a finished run's overview computed once, also
across viewer starts (on disk); a running run's computed again only after a while, yet its last state at once
when it ends; nothing of a running run on disk."""

from __future__ import annotations

import json
from pathlib import Path

from data_agent_compare.reports.viewer.cache import DiskCache, RunCache


def _run(folder: Path, status: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps({"status": status}))
    (folder / "results.jsonl").write_text("")
    return folder


def _add_unit(run: Path) -> None:
    with (run / "results.jsonl").open("a") as file:
        file.write('{"task_id": "T"}\n')


def counting() -> tuple[list[Path], RunCache[int]]:
    calls: list[Path] = []

    def compute(path: Path) -> int:
        calls.append(path)
        return len((path / "results.jsonl").read_text().splitlines())

    return calls, RunCache(compute)


def test_a_running_runs_new_units_wait_a_moment_and_its_end_is_shown_at_once(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", "running")
    calls, cache = counting()
    assert cache.get(run) == 0
    _add_unit(run)
    assert cache.get(run) == 0 and len(calls) == 1  # computed a moment ago: the new unit waits
    (run / "manifest.json").write_text(json.dumps({"status": "completed"}))
    assert cache.get(run) == 1 and len(calls) == 2  # the run ended: its last state now
    assert cache.get(run) == 1 and len(calls) == 2  # unchanged: kept


def test_a_finished_runs_overview_is_kept_on_disk_for_the_next_viewer_and_a_running_ones_is_not(tmp_path: Path) -> None:
    done, running = _run(tmp_path / "done", "completed"), _run(tmp_path / "running", "running")
    _add_unit(done)
    _, first = counting()
    first.disk = DiskCache(tmp_path / "cache")
    assert (first.get(done), first.get(running)) == (1, 0)
    later_calls, later = counting()
    later.disk = DiskCache(tmp_path / "cache")
    assert later.get(done) == 1 and later_calls == []  # read from disk
    assert later.get(running) == 0 and later_calls == [running]
    assert len(list((tmp_path / "cache").glob("*.json.gz"))) == 1
    _add_unit(done)  # a resumed run: its files changed, so the kept overview is not its overview any more
    assert later.get(done) == 2


def test_peek_gives_only_what_is_at_hand(tmp_path: Path) -> None:
    run = _run(tmp_path / "run", "completed")
    calls, cache = counting()
    assert cache.peek(run) is None and calls == []  # nothing computed for a look
    assert cache.get(run) == 0 and cache.peek(run) == 0 and len(calls) == 1
    _add_unit(run)
    assert cache.peek(run) is None  # a changed run's old overview is not given as its own
