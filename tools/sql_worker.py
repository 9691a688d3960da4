"""A database backend run in a child process under a memory rlimit: `WorkerDatabase`.

DuckDB builds some values outside its own `memory_limit` (`repeat('x', 600000000)`, a list of
ten million numbers turned into Python objects), and it runs inside whatever process opened it.
So an agent's DuckDB queries run in a worker process (`python -m <this module>`) whose address
space is capped at WORKER_MEMORY_BYTES: a query that needs more fails there (DuckDB's
OutOfMemoryException, a MemoryError, or the worker's death, after which it is started again and
the database reopened), while the runner only ever receives results `fetch_bounded` lets through.

The worker ends with the runner: it reads its requests from a pipe (EOF ends it) and holds
PR_SET_PDEATHSIG. Requests and replies are pickles over two pipes; ToolErrors travel back as
themselves. A reply that does not come within the query timeout plus WORKER_GRACE_S kills the
worker.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import signal
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..compare.task import DataSource
from ..compare.tool import ToolError
from .sql import BACKENDS, Database, QueryResult, TableInfo, database_file

WORKER_MEMORY_BYTES = 1 << 30  # RLIMIT_AS of a worker: DuckDB's memory_limit plus the interpreter and results
WORKER_GRACE_S = 15.0  # beyond the query timeout, before a silent worker is killed
PR_SET_PDEATHSIG = 1
CRASHED = (
    "the query ended the database's worker process (it needed more memory than a query may use); "
    "the database was reopened: aggregate, select fewer columns or add a LIMIT"
)


class WorkerDatabase(Database):
    """The backend of `source.kind` (BACKENDS) in a worker process; same interface, same errors."""

    def __init__(self, source: DataSource, base_dir: Path | None, timeout_s: float) -> None:
        super().__init__(source, base_dir, timeout_s)
        self.kind = source.kind
        # resolved here: a missing file is the caller's DataUnavailable, before any process starts
        self._source = source.model_copy(update={"location": str(database_file(source, base_dir))})
        self._process: subprocess.Popen[bytes] | None = None
        self._requests: Connection | None = None
        self._replies: Connection | None = None
        self._start()

    def _start(self) -> None:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        module = f"{__package__}.sql_worker"
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", module, str(requests_read), str(replies_write), str(os.getpid())],
                pass_fds=(requests_read, replies_write),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # Ctrl-C reaches the runner, which closes the worker
            )
        finally:
            os.close(requests_read)
            os.close(replies_write)
        self._requests = Connection(requests_write, readable=False)
        self._replies = Connection(replies_read, writable=False)
        self._call("open", self._source, None, self.timeout_s)

    def _call(self, method: str, *args: Any) -> Any:
        assert self._requests is not None and self._replies is not None
        try:
            self._requests.send((method, args))
            if not self._replies.poll(self.timeout_s + WORKER_GRACE_S):
                self._stop()
                raise self._timed_out()
            kind, value = self._replies.recv()
        except (EOFError, OSError) as error:  # the worker died (its memory limit, a crash)
            self._stop()
            if method == "open":
                raise ToolError(f"database {self.name!r}: its worker process failed to start") from error
            self._start()
            raise ToolError(f"refused: {CRASHED}") from error
        if kind == "error":
            raise value
        return value

    def _query(self, sql: str, max_rows: int, max_bytes: int | None) -> QueryResult:
        result: QueryResult = self._call("query", sql, max_rows, max_bytes)
        return result

    def tables(self) -> list[TableInfo]:
        tables: list[TableInfo] = self._call("tables")
        return tables

    def columns(self, table: TableInfo) -> list[tuple[str, str]]:
        columns: list[tuple[str, str]] = self._call("columns", table)
        return columns

    def quote(self, name: str) -> str:
        quoted: str = self._call("quote", name)
        return quoted

    def close(self) -> None:
        self._stop()

    def _stop(self) -> None:
        for connection in (self._requests, self._replies):
            if connection is not None:
                connection.close()  # EOF: the worker ends
        self._requests = self._replies = None
        process, self._process = self._process, None
        if process is not None:
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# ---------------------------------------------------------------- the worker


def serve(requests: Connection, replies: Connection) -> None:
    """Open the database the first request names, then answer method calls until EOF."""
    database: Database | None = None
    while True:
        try:
            method, args = requests.recv()
        except EOFError:
            break
        try:
            if method == "open":
                source, base_dir, timeout_s = args
                database = BACKENDS[source.kind](source, base_dir, timeout_s)
                replies.send(("ok", None))
                continue
            assert database is not None
            replies.send(("ok", getattr(database, method)(*args)))
        except ToolError as error:
            replies.send(("error", error))
        except MemoryError:
            replies.send(("error", ToolError(f"refused: {CRASHED.split(';')[0]}")))
    if database is not None:
        database.close()


def main(argv: list[str]) -> None:
    requests_fd, replies_fd, parent = (int(arg) for arg in argv)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the runner died before the line above
        return
    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))
    with contextlib.suppress(KeyboardInterrupt):
        serve(Connection(requests_fd, writable=False), Connection(replies_fd, readable=False))


if __name__ == "__main__":
    main(sys.argv[1:])
