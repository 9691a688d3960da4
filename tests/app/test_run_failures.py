"""A run directory that cannot be written — a full disk, a read-only folder — ends the run with one line
and exit status 74, the manifest marked `failed`, no `.tmp` file left, and `--resume` finishes the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import ROOT, FakeOpenAIServer, tool_call_response

TASKS = "BND001,BND002,BND003,BND004,BND005,BND006"


def compare(*flags: str) -> list[str]:
    return [sys.executable, "-m", "data_agent_compare.cli", "--models", "openai-compatible:m", *flags]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs mounted for the test (root only, as on CI)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave_bytes: int) -> Path:
    """Fill the disk up to `leave_bytes` free; returns the filler to delete later."""
    filler = disk / "filler"
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * max(0, free - leave_bytes))
    return filler


@pytest.mark.slow  # real `compare` processes against a fake model server: ~10 s
def test_a_full_disk_stops_the_run_with_74_and_resume_finishes_it(small_disk):
    out = small_disk / "run"
    filler = fill(small_disk, leave_bytes=48 * 1024)  # room for the manifest and a few units
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')])
    with FakeOpenAIServer(default=answer) as fake:
        flags = ["--base-url", fake.base_url, "--task-ids", TASKS, "--out", str(out)]
        stopped = subprocess.run(compare(*flags), cwd=ROOT, capture_output=True, text=True, timeout=120)

        last_line = stopped.stderr.strip().splitlines()[-1]
        assert stopped.returncode == 74, stopped.stderr[-2000:]
        assert "No space left on device" in last_line and f"compare --resume --out {out}" in last_line
        assert "Traceback" not in stopped.stderr
        assert json.loads((out / "manifest.json").read_text())["status"] == "failed"
        assert not list(out.rglob("*.tmp"))
        kept = (out / "results.jsonl").read_text().splitlines()
        assert len(kept) < len(TASKS.split(","))

        filler.unlink()
        resumed = subprocess.run(
            [sys.executable, "-m", "data_agent_compare.cli", "--resume", "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["task_id"] for r in records) == TASKS.split(",")  # every task exactly once
    assert json.loads((out / "manifest.json").read_text())["status"] == "completed"


@pytest.mark.slow
def test_a_read_only_run_directory_stops_before_any_work_with_74(small_disk):
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    with FakeOpenAIServer(default=tool_call_response([("c1", "answer", '{"answer": "A"}')])) as fake:
        flags = ["--base-url", fake.base_url, "--task-ids", "BND001", "--out", str(small_disk / "run")]
        stopped = subprocess.run(compare(*flags), cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert not fake.requests  # no model call was made
    assert stopped.returncode == 74, stopped.stderr[-2000:]
    assert "Read-only file system" in stopped.stderr and "Traceback" not in stopped.stderr
