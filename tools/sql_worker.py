"""The child side of `WorkerProcess` (tools/worker_process.py): an engine in a process under a memory rlimit.

It serves `WorkerDatabase` (tools/sql/databases.py: DuckDB and SQLite) and `MongoWorker` (tools/mongo.py);
the first request names the engine's class and its arguments.

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
import sys
from multiprocessing.connection import Connection
from typing import Any

from ..core.tool import ToolError
from .sql.database import Database
from .sql.databases import CRASHED

WORKER_MEMORY_BYTES = 1 << 30  # RLIMIT_AS of a worker: DuckDB's memory_limit plus the interpreter and results
PR_SET_PDEATHSIG = 1


# ---------------------------------------------------------------- the worker


def serve(requests: Connection, replies: Connection) -> None:
    """Open the engine an `open` request names, answer method calls on it until `close` (the process
    then waits, idle, for the next `open`: the runner reuses it) or EOF."""
    database: Database | Any = None
    while True:
        try:
            method, args = requests.recv()
        except EOFError:
            break
        try:
            if method in ("open", "close"):
                if database is not None:
                    database, closing = None, database
                    closing.close()
                if method == "open":
                    factory, *arguments = args
                    database = factory(*arguments)
                replies.send(("ok", None))
                continue
            assert database is not None
            replies.send(("ok", getattr(database, method)(*args)))
        except ToolError as error:
            replies.send(("error", error))
        except MemoryError:
            replies.send(("error", ToolError(f"refused: {CRASHED.split(';')[0]}")))
        except RecursionError:
            replies.send(("error", ToolError("refused: the query is nested too deeply")))
        except (OSError, ValueError, TypeError) as error:  # the engine's own (a bad dump, MongoQueryError)
            replies.send(("error", error))
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
