"""What the engine tells whoever listens while a run goes: typed events, in the order things happen, each given
to every listener on the runner's thread (so a listener sees a unit start before it finishes). The command
line's progress display is one listener (`cli/commands/running.py`); `RunProgress` (`engine/progress.py`),
the counts it draws, is another; a notebook or a live viewer can add its own. The engine prints nothing.

    StageStarted    the run prepares something before its first unit ("loading models"; "" once units run)
    ExecutorChosen  how units will run (`--executor auto` settled: threads or worker processes, and why)
    Notice          a line the executor wants a person to read (Ray: actors started, a node lost)
    UnitStarted     a unit was handed to the executor
    UnitFinished    a unit's record was written (its record, its time from hand-over to record)
    RunFinished     the run ended: completed, interrupted or failed (the manifest's status)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.runlog import ResultRecord


@dataclass(frozen=True)
class StageStarted:
    stage: str


@dataclass(frozen=True)
class ExecutorChosen:
    kind: str
    line: str  # `executor: processes (2 workers): ...`, as a person reads it


@dataclass(frozen=True)
class Notice:
    text: str


@dataclass(frozen=True)
class UnitStarted:
    task_id: str
    system: str
    model: str
    epoch: int
    in_flight: int  # units in flight, this one included


@dataclass(frozen=True)
class UnitFinished:
    record: ResultRecord
    seconds: float  # from hand-over to the executor to the record, on the monotonic clock
    in_flight: int  # units still in flight


@dataclass(frozen=True)
class RunFinished:
    run_dir: Path
    status: str


RunEvent = StageStarted | ExecutorChosen | Notice | UnitStarted | UnitFinished | RunFinished
Listener = Callable[[RunEvent], None]


class Events:
    """The run's listeners, each given every event in turn. A listener that raises stops the run as any other
    failure of the runner's thread would (the records written so far stay; `compare resume` finishes it)."""

    def __init__(self, listeners: Iterable[Listener] = ()) -> None:
        self.listeners = list(listeners)

    def __call__(self, event: RunEvent) -> None:
        for listener in self.listeners:
            listener(event)
