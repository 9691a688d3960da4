"""The Palimpzest worker: runs palimpzest 0.9.0 in its own virtual environment (`.venv-palimpzest`)
for the `palimpzest` system (`systems/palimpzest_system.py`), which starts it and talks to it.

It imports only the standard library and palimpzest's environment, never `data_agent_compare`
(which is not installed there): `python palimpzest_worker.py`.

Protocol: JSON lines. The worker writes one object per line to stdout and reads one per line from
stdin; every request gets exactly one reply. Anything else that writes to stdout (palimpzest prints)
is sent to stderr, which the adapter keeps in a log file.

    worker → {"type": "ready", "palimpzest": "0.9.0", "python": "3.11.7"}      once, after the imports
           | {"type": "fatal", "error": "..."}                                 the imports failed; it exits

    → {"type": "load", "workdir": DIR, "endpoint": {"base_url": URL, "api_key": KEY},
       "settings": {"policy": "max_quality", "model": "GPT_4o_MINI", "max_workers": 4}}
    ← {"type": "loaded"}                                         (one task: its endpoint, settings, folder)

    → {"type": "operator", "index": I, "operator": "sem_filter" | "sem_map", "input": TABLE NAME,
       "instruction": TEXT, "column": NAME (sem_map only), "rows": [{column: value}, ...]}
    ← {"type": "operator_done", "index": I, "operator": ..., "input": ..., "success": bool,
       "error": TEXT | null, "budget_refused": TEXT | null, "rows_in": N, "rows_out": K,
       "rows": [{column: value}, ...], "columns": [NAME, ...], "model_calls": C,
       "model_errors": [{"status": CODE, "error": TEXT}], "plan": TEXT, "duration_s": S}

    any request the worker cannot serve ← {"type": "error", "error": TEXT}
    end of stdin: the worker exits.

Every reply also carries "network_attempts": the non-loopback connections and name look-ups the
worker refused so far (with DAC_WORKER_NETWORK_GUARD=1, which the adapter always sets).

Each `operator` request is one Palimpzest query over the rows it carries (every row of the table the
operator reads): a `MemoryDataset` of them, the semantic operator, `.run(QueryProcessorConfig(policy=...))`.
Palimpzest's optimizer chooses the operator's physical implementation under the policy; "plan" is the
plan it ran. Column names become identifiers (pydantic fields). Queries run with `allow_rag_reduction=False`
(it needs OpenAI embeddings) and on text only (no CLIP). The model: a member of palimpzest's fixed
`pz.Model` list, sent to `OPENAI_BASE_URL` (the gateway endpoint, which serves the run's model
whatever the request names): palimpzest 0.9.0's `api_base` setting is broken.

Budgets: palimpzest turns a failed model call into an empty answer (a filter then drops the row). A
call the gateway refuses with HTTP 402 (a budget ran out) is instead raised past palimpzest as
`BudgetRefused`, a BaseException, and ends the operator with "budget_refused" set; later calls are
refused at once without reaching the gateway. Other failed calls are listed in "model_errors" (with the
HTTP status, null when there was no response): palimpzest would have dropped their rows silently, so
the adapter fails the operator instead.
"""

from __future__ import annotations

import contextlib
import io
import ipaddress
import json
import os
import re
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

GUARD_VARIABLE = "DAC_WORKER_NETWORK_GUARD"
POLICIES = {"max_quality": "MaxQuality", "min_cost": "MinCost", "min_time": "MinTime"}
OPERATORS = ("sem_filter", "sem_map")
_IDENTIFIER = re.compile(r"[^0-9A-Za-z_]+")


# ---------------------------------------------------------------- the network guard (as tests/helpers.no_network)


def _loopback(host: object) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
    except ValueError:
        return False


def install_network_guard(attempts: list[str], who: str = "the palimpzest worker") -> Callable[[], None]:
    """Refuse, and list in `attempts`, every non-loopback resolve or connect of this process (Unix sockets
    are allowed); returns what undoes it. The tests' `no_network` is this guard too."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def refuse(what: str) -> OSError:
        attempts.append(what)
        return OSError(f"network access refused by {who}: {what}")

    def guarded(real: Callable[..., Any]) -> Callable[..., Any]:
        def connect(self: socket.socket, address: Any) -> Any:
            if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address[0]):
                raise refuse(f"connect {address}")
            return real(self, address)

        return connect

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _loopback(host.decode() if isinstance(host, bytes) else host):
            raise refuse(f"resolve {host!r}")
        return real_getaddrinfo(host, *args, **kwargs)

    def undo() -> None:
        socket.socket.connect, socket.socket.connect_ex = real_connect, real_connect_ex  # type: ignore[method-assign]
        socket.getaddrinfo = real_getaddrinfo  # type: ignore[assignment]

    socket.socket.connect, socket.socket.connect_ex = guarded(real_connect), guarded(real_connect_ex)  # type: ignore[method-assign]
    socket.getaddrinfo = getaddrinfo  # type: ignore[assignment]
    return undo


# ---------------------------------------------------------------- importing palimpzest on Python 3.11


def import_palimpzest() -> Any:
    """palimpzest 0.9.0 imports `typing.TypeAliasType` (Python 3.12). On 3.11, typing_extensions' class
    stands in; the libraries that test for `typing.TypeAliasType` to pick 3.12 code paths are imported
    before the shim exists, so they keep their 3.11 paths (checked: without that, pydantic fails)."""
    import typing

    if not hasattr(typing, "TypeAliasType"):
        import chromadb  # noqa: F401
        import fastapi  # noqa: F401
        import litellm  # noqa: F401
        import openai  # noqa: F401
        import pandas  # noqa: F401
        import pydantic  # noqa: F401
        import sentence_transformers  # noqa: F401
        import smolagents  # noqa: F401
        import typing_extensions

        typing.TypeAliasType = typing_extensions.TypeAliasType  # type: ignore[attr-defined]
    import palimpzest

    return palimpzest


# ---------------------------------------------------------------- model calls: counted, budget refusals raised


# A BaseException, so that palimpzest's `except Exception` around a model call lets it through.
class BudgetRefused(BaseException):
    """The gateway refused a model call: a budget of the task ran out."""


class MeteredCalls:
    """Wraps `litellm.completion` (which palimpzest's generators call) to count calls and errors of
    the operator running, and to stop palimpzest at the first budget refusal."""

    def __init__(self, litellm: Any) -> None:
        self.real = litellm.completion
        self.calls = 0
        self.errors: list[dict[str, Any]] = []
        self.refused: str | None = None
        litellm.completion = self

    def reset(self) -> None:
        self.calls, self.errors = 0, []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.refused is not None:
            raise BudgetRefused(self.refused)
        self.calls += 1
        try:
            return self.real(*args, **kwargs)
        except Exception as failure:
            if getattr(failure, "status_code", None) == 402:
                self.refused = f"{type(failure).__name__}: {failure}"
                raise BudgetRefused(self.refused) from failure
            status = getattr(failure, "status_code", None)
            self.errors.append({"status": status, "error": f"{type(failure).__name__}: {str(failure)[:300]}"})
            raise


# ---------------------------------------------------------------- the worker


def column_name(name: str, taken: set[str]) -> str:
    """A Python identifier for a column (palimpzest builds pydantic models from the columns)."""
    base = _IDENTIFIER.sub("_", str(name)).strip("_") or "column"
    base = f"c_{base}" if base[0].isdigit() else base
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}_{number}", number + 1
    taken.add(candidate)
    return candidate


def identifier_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    taken: set[str] = set()
    names = {key: column_name(key, taken) for row in rows[:1] for key in row}
    return [{names.get(k, k): v for k, v in row.items()} for row in rows]


class Worker:
    def __init__(self, pz: Any, attempts: list[str]) -> None:
        import litellm

        self.pz = pz
        self.attempts = attempts
        self.calls = MeteredCalls(litellm)
        self.settings: dict[str, Any] = {}

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        kind = request.get("type")
        if kind == "load":
            return self.load(request)
        if kind == "operator":
            return self.operator(request)
        return {"type": "error", "error": f"unknown request type {kind!r}"}

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        os.makedirs(request["workdir"], exist_ok=True)
        os.chdir(request["workdir"])  # palimpzest writes parse-answer-errors/ into the working folder
        endpoint = request["endpoint"]
        os.environ["OPENAI_BASE_URL"] = endpoint["base_url"]
        os.environ["OPENAI_API_KEY"] = endpoint["api_key"]
        self.settings = request.get("settings") or {}
        self.calls.refused = None
        return {"type": "loaded"}

    def config(self) -> Any:
        pz = self.pz
        policy = getattr(pz, POLICIES[self.settings.get("policy", "max_quality")])()
        return pz.QueryProcessorConfig(
            policy=policy,
            available_models=[pz.Model[self.settings.get("model", "GPT_4o_MINI")]],
            execution_strategy="parallel",
            max_workers=int(self.settings.get("max_workers", 4)),
            allow_rag_reduction=False,  # its embeddings are OpenAI's
            progress=False,
            verbose=False,
        )

    def operator(self, request: dict[str, Any]) -> dict[str, Any]:
        name, source = request["operator"], str(request.get("input", "rows"))
        if name not in OPERATORS:
            return {"type": "error", "error": f"unknown operator {name!r}; known: {', '.join(OPERATORS)}"}
        rows = identifier_rows(request.get("rows") or [])
        reply: dict[str, Any] = {"type": "operator_done", "index": request.get("index"), "operator": name}
        reply |= {"input": source, "rows_in": len(rows), "success": True, "error": None, "budget_refused": None}
        self.calls.reset()
        start = time.monotonic()
        output, plan = rows, ""
        try:
            if rows:
                output, plan = self.run_query(name, rows, request)
        except BudgetRefused as refused:
            reply |= {"success": False, "budget_refused": str(refused), "error": "a budget ran out"}
        except Exception as failure:
            reply |= {"success": False, "error": f"{type(failure).__name__}: {failure}"}
        reply |= {"duration_s": time.monotonic() - start, "plan": plan, "rows": output if reply["success"] else []}
        reply |= {"rows_out": len(reply["rows"]), "model_calls": self.calls.calls, "model_errors": self.calls.errors}
        reply["columns"] = list(reply["rows"][0]) if reply["rows"] else list(rows[0]) if rows else []
        return reply

    def run_query(self, name: str, rows: list[dict[str, Any]], request: dict[str, Any]) -> tuple[list[dict], str]:
        dataset = self.pz.MemoryDataset(id=f"{request.get('input', 'rows')}-{request.get('index', 0)}", vals=rows)
        if name == "sem_filter":
            dataset = dataset.sem_filter(request["instruction"])
        else:
            column = column_name(request.get("column") or "value", set(rows[0]))
            dataset = dataset.sem_map([{"name": column, "type": str, "desc": request["instruction"]}])
        output = dataset.run(self.config())
        plans = output.executed_plans or []
        return [jsonable_row(record.to_dict()) for record in output], "\n".join(str(p) for p in plans)


def jsonable_row(row: dict[str, Any]) -> dict[str, Any]:
    plain = (str, int, float, bool, type(None))
    return {key: value if isinstance(value, plain) else str(value) for key, value in row.items()}


# ---------------------------------------------------------------- main loop


def main() -> int:
    # The protocol owns the real stdout; everything printed by the libraries goes to stderr.
    protocol = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", line_buffering=True)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    attempts: list[str] = []
    if os.environ.get(GUARD_VARIABLE) == "1":
        install_network_guard(attempts)

    def send(message: dict[str, Any]) -> None:
        protocol.write(json.dumps({**message, "network_attempts": list(attempts)}, default=str) + "\n")

    try:
        pz = import_palimpzest()
        worker = Worker(pz, attempts)
    except Exception as failure:
        send({"type": "fatal", "error": f"{type(failure).__name__}: {failure}"})
        return 1
    from importlib.metadata import version

    send({"type": "ready", "palimpzest": version("palimpzest"), "python": sys.version.split()[0]})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = worker.handle(json.loads(line))
        except Exception as failure:  # a malformed request: say so and keep serving
            reply = {"type": "error", "error": f"{type(failure).__name__}: {failure}"}
        send(reply)
    with contextlib.suppress(Exception):
        protocol.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
