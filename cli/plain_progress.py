"""Progress as plain lines, for output that is not a terminal (a pipe, a CI log, `compare ... | tee`),
where the progress bar does not draw: a line when a unit finishes (at most one per `min_gap_s`) and one
every `every_s` while none does, so a piped run is never silent for long (a unit of the embedded model
can take minutes).

    progress: 3/24 units · 0:04:10 · 1 in flight · 0 failed · 0 retries · 41.2k tok · $0.0000 · ETA 0:28:00
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from types import TracebackType
from typing import Protocol

EVERY_S = 20.0  # a line at least this often while the run goes on
MIN_GAP_S = 5.0  # finished units print at most one line this often (fast units would flood a log)


class Counts(Protocol):
    """What a plain line reads of the run's progress (an engine `RunProgress`)."""

    total: int
    done: int


class PlainProgress:
    """Writes progress lines (`write`) from the run's counts (`describe` words them) until closed."""

    def __init__(
        self,
        counts: Counts,
        describe: Callable[[Counts], str],
        write: Callable[[str], None],
        every_s: float = EVERY_S,
        min_gap_s: float = MIN_GAP_S,
    ) -> None:
        self.counts, self.describe, self.write = counts, describe, write
        self.every_s, self.min_gap_s = every_s, min_gap_s
        self._started = self._last = time.monotonic()
        self._last_unit: str | None = None  # the last unit that finished, said on every line after it
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="plain-progress", daemon=True)

    def __enter__(self) -> PlainProgress:
        with self._lock:
            self._emit()  # at once: the run has started
        self._ticker.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._closed.set()
        self._ticker.join()

    def unit_finished(self, unit: str) -> None:
        """Say that `unit` finished (`system/model task status`), unless a line went out a moment ago."""
        with self._lock:
            self._last_unit = unit
            if time.monotonic() - self._last >= self.min_gap_s or self.counts.done >= self.counts.total:
                self._emit()

    def _tick(self) -> None:
        while not self._closed.wait(min(1.0, self.every_s)):
            with self._lock:
                if time.monotonic() - self._last >= self.every_s:
                    self._emit()

    def _emit(self) -> None:
        now = time.monotonic()
        elapsed = timedelta(seconds=round(now - self._started))
        parts = [f"{self.counts.done}/{self.counts.total} units", str(elapsed), self.describe(self.counts)]
        last = [f"last: {self._last_unit}"] if self._last_unit else []
        self.write("progress: " + " · ".join([*parts, *last]))
        self._last = now
