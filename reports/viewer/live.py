"""A run as it runs, read from the files it writes: units done and planned (results.jsonl), the units in flight
and the step each is at (calls.jsonl journals every request before it leaves and every call as it finishes),
failures as they happen, and whether the run still runs (the manifest). Each read takes only the lines added
since the last one, so following a 16,000-unit run costs what it writes, not what it holds."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...core.runlog import CALLS_FILE, RESULTS_FILE
from .catalog import read_manifest_json

FAILED = {"error", "infra_error", "timeout"}  # a unit that ended so is listed as a failure as it happens
RECENT = 20  # units just finished kept for the live panel


@dataclass
class _Attempt:
    unit: tuple[str, str, str, int]
    calls: int = 0  # finished model calls
    sent: int = 0  # requests sent (finished ones included)
    last_s: float = 0.0  # when its last journal line was read (monotonic)


@dataclass
class _Lines:
    """Complete lines appended to a file since the last read (a line still being written waits)."""

    path: Path
    offset: int = 0

    def new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as file:
                file.seek(self.offset)
                chunk = file.read()
        except OSError:
            return []
        end = chunk.rfind(b"\n") + 1
        self.offset += end
        found = []
        for line in chunk[:end].splitlines():
            try:
                value = json.loads(line)
            except ValueError:  # a line cut by a crash: the run log's readers say so; here it is skipped
                continue
            if isinstance(value, dict):
                found.append(value)
        return found


@dataclass
class LiveRun:
    run_dir: Path
    done: dict[tuple[str, str, str, int], str] = field(default_factory=dict)  # unit -> status
    failures: list[dict[str, Any]] = field(default_factory=list)
    recent: list[dict[str, Any]] = field(default_factory=list)
    attempts: dict[str, _Attempt] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._results = _Lines(self.run_dir / RESULTS_FILE)
        self._calls = _Lines(self.run_dir / CALLS_FILE)

    def snapshot(self) -> dict[str, Any]:
        """The run now: read what was added since the last call (thread-safe), then describe it."""
        with self.lock:
            self._read()
            manifest = read_manifest_json(self.run_dir)
            status = manifest.get("status", "unreadable")
            return {
                "status": status,
                "planned": manifest.get("units"),
                "done": len(self.done),
                "failed": len(self.failures),
                "in_flight": self._in_flight() if status == "running" else [],
                "failures": list(self.failures),
                "recent": list(self.recent),
            }

    def _read(self) -> None:
        now = time.monotonic()
        for line in self._calls.new():
            attempt = self.attempts.get(str(line.get("attempt")))
            if attempt is None:
                attempt = _Attempt(unit=_unit(line))
                self.attempts[str(line.get("attempt"))] = attempt
            if line.get("in_flight"):
                continue  # a graceful stop's note: the attempt ends with the run
            if "sent" in line:
                attempt.sent += int(line["sent"])
            else:
                attempt.calls += 1
                attempt.sent = max(attempt.sent, attempt.calls)
            attempt.last_s = now
        for line in self._results.new():
            unit = _unit(line)
            status = str(line.get("status"))
            self.done[unit] = status
            row = {
                "task": unit[0],
                "system": unit[1],
                "model": unit[2],
                "epoch": unit[3],
                "status": status,
                "latency_s": line.get("latency_s"),
                "error": line.get("error"),
            }
            self.recent = [row, *self.recent][:RECENT]
            if status in FAILED:
                self.failures.append(row)
            for attempt_id in [str(line.get("attempt")), *line.get("retried_attempts", [])]:
                self.attempts.pop(attempt_id, None)

    def _in_flight(self) -> list[dict[str, Any]]:
        latest = {attempt.unit: attempt for attempt in self.attempts.values()}  # a resumed unit: its new attempt
        rows = []
        now = time.monotonic()
        for attempt in latest.values():
            if attempt.unit in self.done:
                continue
            waiting = attempt.sent > attempt.calls
            step = (
                f"model call {attempt.calls + 1} sent, waiting for its reply"
                if waiting
                else f"{attempt.calls} model call(s) done, working (tools or the system's own steps)"
            )
            task, system, model, epoch = attempt.unit
            rows.append(
                {
                    "task": task,
                    "system": system,
                    "model": model,
                    "epoch": epoch,
                    "model_calls": attempt.calls,
                    "step": step,
                    "quiet_s": round(now - attempt.last_s, 1),
                }
            )
        return sorted(rows, key=lambda row: (row["task"], row["system"], row["model"], row["epoch"]))


def _unit(line: dict[str, Any]) -> tuple[str, str, str, int]:
    return (str(line.get("task_id")), str(line.get("system")), str(line.get("model")), int(line.get("epoch") or 1))
