"""The viewer's times on a large run (issue 37: a 16,000-unit run's overview opens in under 2 s, a task page in
under 200 ms). A benchmark, not a test:

    .venv/bin/python tests/perf/measure_viewer.py [--units 16000] [--browser]

It runs a small scripted quiz run (`compare run`, 2 systems × 3 tasks × 2 epochs), then grows it to --units
units: every task copied under new ids with its records, traces and stored requests (the requests' blobs are
shared, as a real run's would be). Then it times, with a monotonic clock, each JSON route through Starlette's
test client (cold: the first request after the app starts; warm: the median of 5 more), and with --browser the
pages in chromium until they have drawn (overview: the units table and the main table; task page: its units).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from helpers import compare_command, quiz_questions, write_quiz_run  # noqa: E402


def small_run(folder: Path) -> Path:
    files = write_quiz_run(folder, quiz_questions(3), "systems: [tool_use, planning]\nepochs: 2\nconcurrency: 2\n")
    out = folder / "runs" / "big"
    done = subprocess.run(
        compare_command("run", "--config", str(files["config"]), "--out", str(out)),
        capture_output=True, text=True, cwd=folder, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    return out


def grow(run: Path, units: int) -> int:
    """Copy the run's tasks under new ids until it holds `units` units; returns the units it holds."""
    lines = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    copies = max(1, units // len(lines))
    records, tasks = [], []
    db = sqlite3.connect(run / "conversations.sqlite")
    template = db.execute("SELECT * FROM calls").fetchall()
    columns = [row[1] for row in db.execute("PRAGMA table_info(calls)")]
    at = {name: i for i, name in enumerate(columns)}
    calls = []
    for copy in range(copies):
        for line in lines:
            task = f"T{copy:05d}-{line['task_id']}"
            trace = line["trace_file"].replace(f"/{line['task_id']}", f"/{task}")
            target = run / trace
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(run / line["trace_file"], target)
            records.append(json.dumps(line | {"task_id": task, "trace_file": trace}))
            if line["epoch"] == 1 and line["system"] == "tool_use":
                tasks.append(task)
            for row in template:
                if (row[at["task_id"]], row[at["system"]], row[at["epoch"]]) == (
                    line["task_id"], line["system"], line["epoch"],
                ):  # fmt: skip
                    grown = list(row)
                    grown[at["task_id"]] = task
                    calls.append(grown)
    db.executemany(f"INSERT INTO calls VALUES ({', '.join('?' * len(columns))})", calls)
    db.commit()
    db.close()
    (run / "results.jsonl").write_text("\n".join(records) + "\n")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest |= {"task_ids": sorted(set(tasks)), "units": len(records)}
    (run / "manifest.json").write_text(json.dumps(manifest))
    return len(records)


def timed(client, url: str) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(cold ms, warm median ms, bytes)."""
    started = time.perf_counter()
    response = client.get(url)
    cold = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (url, response.status_code, response.text[:300])
    warm = []
    for _ in range(5):
        started = time.perf_counter()
        client.get(url)
        warm.append((time.perf_counter() - started) * 1000)
    return cold, statistics.median(warm), len(response.content)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--units", type=int, default=16_000)
    parser.add_argument("--browser", action="store_true", help="also time the pages in chromium")
    options = parser.parse_args()

    from starlette.testclient import TestClient

    from data_agent_compare.reports.viewer import create_app, start_in_background
    from data_agent_compare.reports.viewer.cache import DiskCache

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        os.environ["XDG_CACHE_HOME"] = str(folder / "cache")  # the viewer's disk cache starts empty
        run = small_run(folder)
        started = time.perf_counter()
        held = grow(run, options.units)
        print(f"run of {held:,} units built in {time.perf_counter() - started:.1f} s")
        task = f"T{(held // 12) // 2:05d}-Q1"
        pair = "a=%5B%22planning%22,%22scripted%22,1%5D&b=%5B%22tool_use%22,%22scripted%22,1%5D"
        client = TestClient(create_app([run.parent], cache=DiskCache()))
        for name, url in [
            ("overview (JSON), first ever", "/api/runs/big/overview"),
            ("runs list (JSON)", "/api/runs"),
            ("task page (JSON)", f"/api/runs/big/tasks/{task}"),
            ("diff of two units (JSON)", f"/api/runs/big/diff/{task}?{pair}"),
        ]:
            cold, warm, size = timed(client, url)
            print(f"{name:34s} cold {cold:8.1f} ms   warm {warm:7.1f} ms   {size / 1e6:6.2f} MB")
        restarted = TestClient(create_app([run.parent], cache=DiskCache()))
        for name, url in [
            ("overview (JSON), viewer restarted", "/api/runs/big/overview"),
            ("task page (JSON), viewer restarted", f"/api/runs/big/tasks/{task}"),
        ]:
            cold, warm, size = timed(restarted, url)
            print(f"{name:34s} cold {cold:8.1f} ms   warm {warm:7.1f} ms   {size / 1e6:6.2f} MB")
        if options.browser:
            browser_times(run, task, start_in_background)


def browser_times(run: Path, task: str, start_in_background) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    served = start_in_background([run.parent])
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--headless", "--no-sandbox"]
            )
            page = browser.new_page()
            for name, path, drawn in [  # a viewer just started: the overview from the disk cache, the run read cold
                ("overview page, viewer started", "runs/big", "#units-table tbody tr"),
                ("overview page, again", "runs/big", "#units-table tbody tr"),
                ("task page", f"runs/big/tasks/{task}", "#task-units .unit"),
                ("task page, again", f"runs/big/tasks/{task}", "#task-units .unit"),
            ]:
                started = time.perf_counter()
                page.goto(served.url + path)
                page.wait_for_selector(drawn)
                print(f"{name:28s} {(time.perf_counter() - started) * 1000:8.1f} ms until drawn")
            browser.close()
    finally:
        served.stop()


if __name__ == "__main__":
    main()
