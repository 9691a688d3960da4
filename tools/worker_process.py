"""The runner's side of an engine run in a worker process (tools/sql_worker.py is the child's side).

An agent's query runs inside an engine the runner does not control: DuckDB builds some values
outside its memory limit, one SQLite function call (`printf('%.*c', 2147483647, 'x')`, a long
LIKE) never returns to SQLite's progress handler, and mongomock evaluates a catastrophic regex
in C holding the GIL (it froze the whole runner; SIGTERM waited on it). So such engines run in a
child process under a memory rlimit: a call that does not answer by its deadline kills the
child, whatever it is doing, and the next call starts a fresh one (the engine is reopened).

Requests and replies are pickles over two pipes. The child holds PR_SET_PDEATHSIG and ends at
EOF, so it never outlives the runner. A child whose engine was closed normally waits, idle, for
the next engine to open (as many as were ever open at once, at most IDLE_MAX: a run of 16 units in
flight keeps 16, which it holds while running anyway): starting one imports the engines (seconds on
a busy machine), which each task's SQLite database would otherwise pay again. A child that was
killed is never reused.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

from ..core.tool import TOOL_DEADLINE, ToolError

CALL_GRACE_S = 1.0  # beyond the query timeout: the engine's own timeout answers first when it can
OPEN_TIMEOUT_S = 300.0  # starting the child and loading the engine (a Mongo dump is loaded there)
CHILD_MODULE = f"{__package__}.sql_worker"
IDLE_MAX = 64  # idle children kept for reuse, at the most (each holds ~50 MB of its own)
CLOSE_TIMEOUT_S = 10.0  # closing an engine; a child slower than this is killed, not kept


@dataclass
class _Child:
    process: subprocess.Popen[bytes]
    requests: Connection
    replies: Connection


_idle: list[_Child] = []
_idle_lock = threading.Lock()
_open = 0  # children holding an engine now
_most_open = 0  # the most ever at once: how many idle ones are worth keeping


class WorkerDied(Exception):
    """The child ended without answering (its memory limit, a crash): it has been restarted."""


class WorkerTimedOut(Exception):
    """The child did not answer by the call's deadline: it was killed and has been restarted. `wall_time`:
    the deadline was the end of the unit's wall-time budget (`TOOL_DEADLINE`), not the query timeout."""

    def __init__(self, wall_time: bool = False) -> None:
        super().__init__("wall-time limit" if wall_time else "timeout")
        self.wall_time = wall_time


class WorkerProcess:
    """One child process holding one engine: `factory(*args)` built in the child, then method calls.

    `call` returns the engine method's value or raises what the child raised (ToolErrors and the
    engine's own picklable errors travel as themselves); WorkerTimedOut / WorkerDied when the
    child had to be replaced.
    """

    def __init__(self, label: str, factory: Any, args: tuple[Any, ...], timeout_s: float) -> None:
        self.label = label
        self.timeout_s = timeout_s
        self._open_request = ("open", (factory, *args))
        self._child: _Child | None = None
        self._start()

    @property
    def _process(self) -> subprocess.Popen[bytes] | None:
        return self._child.process if self._child else None

    def _start(self) -> None:
        # An idle child can have died since it was kept (PR_SET_PDEATHSIG fires when the thread that started it
        # ends): one that dies on `open` is replaced once by a fresh one.
        for fresh in (False, True):
            self._child = (None if fresh else _take_idle()) or _spawn()
            if fresh:
                _opened()
            try:
                self._exchange(self._open_request, OPEN_TIMEOUT_S)
                return
            except WorkerDied as died:
                if fresh:
                    raise ToolError(f"{self.label}: its worker process failed to start") from died
            except WorkerTimedOut as error:
                raise ToolError(f"{self.label}: its worker process failed to start") from error
            except BaseException:  # the engine refused to open (a missing or bad file): the child stays usable
                self.stop()
                raise

    def call(self, method: str, *args: Any) -> Any:
        if self._child is None:
            self._start()
        wait_s, budget = self.timeout_s + CALL_GRACE_S, TOOL_DEADLINE.get()
        by_budget = budget is not None and budget - time.monotonic() < wait_s
        if by_budget:  # the unit's wall time ends first: so does the call
            wait_s = max(0.1, budget - time.monotonic())  # type: ignore[operator]
        try:
            return self._exchange((method, args), wait_s)  # the child is gone if this raises:
        except WorkerTimedOut as timed_out:  # the next call starts another (not this one: it is late already)
            raise WorkerTimedOut(wall_time=by_budget) from timed_out

    def _exchange(self, request: tuple[str, tuple[Any, ...]], wait_s: float) -> Any:
        assert self._child is not None
        try:
            self._child.requests.send(request)
            if not self._child.replies.poll(wait_s):
                self.stop(kill=True)
                raise WorkerTimedOut()
            kind, value = self._child.replies.recv()
        except (EOFError, OSError) as error:
            self.stop(kill=True)
            raise WorkerDied() from error
        if kind == "error":
            raise value
        return value

    def stop(self, kill: bool = False) -> None:
        """Close the engine and keep the child for reuse; `kill` ends it at once instead."""
        child, self._child = self._child, None
        if child is None:
            return
        _closed()
        if not kill:
            try:
                child.requests.send(("close", ()))
                if child.replies.poll(CLOSE_TIMEOUT_S) and child.replies.recv()[0] == "ok" and _keep_idle(child):
                    return
            except (EOFError, OSError):
                pass
        _end(child, kill=True)


def _spawn() -> _Child:
    requests_read, requests_write = os.pipe()
    replies_read, replies_write = os.pipe()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", CHILD_MODULE, str(requests_read), str(replies_write), str(os.getpid())],
            pass_fds=(requests_read, replies_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C reaches the runner, which closes the worker
        )
    finally:
        os.close(requests_read)
        os.close(replies_write)
    return _Child(process, Connection(requests_write, readable=False), Connection(replies_read, writable=False))


def prestart(count: int) -> float:
    """Start up to `count` idle children and wait until each has loaded its engines (a `close` with nothing
    open is their ready signal), so that opening a task's database reuses one instead of paying a start
    (about a second) inside the task's clock. Returns the seconds it took."""
    global _most_open
    start = time.monotonic()
    with _idle_lock:
        count = max(0, min(count, IDLE_MAX) - len(_idle))
    children = [_spawn() for _ in range(count)]
    for child in children:
        child.requests.send(("close", ()))
    ready = []
    for child in children:
        if child.replies.poll(OPEN_TIMEOUT_S) and child.replies.recv()[0] == "ok":
            ready.append(child)
        else:
            _end(child, kill=True)
    with _idle_lock:
        _idle.extend(ready)
        _most_open = max(_most_open, len(_idle))  # kept idle again after each use
    return time.monotonic() - start


def _take_idle() -> _Child | None:
    global _open, _most_open
    with _idle_lock:
        _open += 1
        _most_open = max(_most_open, _open)
        while _idle:
            child = _idle.pop()
            if child.process.poll() is None:
                return child
            _end(child, kill=True)
    return None


def _opened() -> None:
    global _open, _most_open
    with _idle_lock:
        _open += 1
        _most_open = max(_most_open, _open)


def _closed() -> None:
    global _open
    with _idle_lock:
        _open -= 1


def _keep_idle(child: _Child) -> bool:
    with _idle_lock:
        if len(_idle) < min(_most_open, IDLE_MAX) and child.process.poll() is None:
            _idle.append(child)
            return True
    return False


def _end(child: _Child, kill: bool) -> None:
    child.requests.close()  # EOF: the child ends
    child.replies.close()
    if kill:
        child.process.kill()
    try:
        child.process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        child.process.kill()
        child.process.wait()
