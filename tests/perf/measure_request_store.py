"""Measure (issue 37): what keeping every request costs. The same scripted quiz run (tool_use and planning over
N tasks, thread executor) with the request store and without it (a plugin that turns `AttemptJournal.store` into
a no-op), interleaved, each pair in fresh processes; prints the medians of the child's CPU time and wall time, the
ratio, the cost per model call, and the store's size against the traces'.

    .venv/bin/python tests/perf/measure_request_store.py [--tasks 300] [--pairs 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from data_agent_compare.core.conversations import store_sizes

from helpers import compare_command, write_quiz_run

NO_STORE = "from data_agent_compare.providers import journal\njournal.AttemptJournal.store = lambda *args: None\n"


def questions(count: int) -> list[dict[str, str]]:
    """Distinct questions (a store of one repeated question would flatter the dedup)."""
    return [
        {"id": f"Q{i}", "question": f"How many sales teams were there in region {i}?", "answer": "x"}
        for i in range(count)
    ]


def one_run(folder: Path, store: bool) -> tuple[float, float, Path]:
    out = folder / f"run-{'store' if store else 'none'}-{time.monotonic_ns()}"
    config = folder / ("store.yaml" if store else "none.yaml")
    command = compare_command("run", "--config", str(config), "--out", str(out))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=folder)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--pairs", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        files = write_quiz_run(folder, questions(options.tasks), "systems: [tool_use, planning]\nconcurrency: 4\n")
        (folder / "no_store.py").write_text(NO_STORE)
        base = files["config"].read_text()
        (folder / "store.yaml").write_text(base)
        (folder / "none.yaml").write_text(base.replace("plugins: [", f"plugins: [{folder / 'no_store.py'}, "))
        timings: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        last: Path | None = None
        for pair in range(options.pairs):
            for store in (pair % 2 == 0, pair % 2 != 0):  # alternate which goes first
                cpu, wall, out = one_run(folder, store)
                timings[store].append((cpu, wall))
                last = out if store else last
        assert last is not None
        calls = sum(json.loads(line)["model_calls"] for line in (last / "results.jsonl").read_text().splitlines())
        traces = sum(path.stat().st_size for path in (last / "traces").rglob("*.json"))
        sizes = store_sizes(last)
    for label, index in (("CPU", 0), ("wall", 1)):
        with_store = statistics.median(t[index] for t in timings[True])
        without = statistics.median(t[index] for t in timings[False])
        per_call = (with_store - without) / calls * 1000
        print(
            f"{label}: with the store {with_store:.2f} s, without {without:.2f} s, ratio {with_store / without:.3f},"
            f" {per_call:+.3f} ms per model call ({calls} calls, {options.pairs} pairs, medians)"
        )
    print(
        f"store: {sizes['file_bytes']:,} bytes for {sizes['calls']} calls ({sizes['blobs']} blobs,"
        f" {sizes['blob_bytes']:,} compressed bytes); traces {traces:,} bytes: {sizes['file_bytes'] / traces:.3f}×"
    )


if __name__ == "__main__":
    main()
