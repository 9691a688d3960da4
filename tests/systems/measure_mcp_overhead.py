"""Per-call overhead of a tool call over MCP against the same tool called in-process, in one run (issue 27).

    .venv/bin/python tests/systems/measure_mcp_overhead.py [--calls 300]

One bundled task's tools, one run context: `execute_sql` ("SELECT COUNT(*) FROM Customers") is called
in turn in-process (`AgentSession.call_result`, the path of every framework adapter), over MCP by a client of
the official `mcp` SDK (Streamable HTTP on loopback, one session, the unit's token), and as the bare JSON-RPC
request on one keep-alive connection (what the server itself costs, whatever the client's language), so that
all three see the same load. Each call is timed by the caller's monotonic clock; the medians, the overheads
per call and the ratios to in-process are printed as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/helpers.py

from data_agent_compare.core import (
    Budgets,
    MeteredModel,
    QuestionType,
    RunContext,
    ToolEnvironment,
    ToolSettings,
    Trace,
    TraceRecorder,
    create_benchmark,
)
from data_agent_compare.providers.scripted import ScriptedProvider
from data_agent_compare.systems.bridge import AgentSession
from data_agent_compare.systems.mcp_server import shared_tool_server

from helpers import SCRIPTED

ARGUMENTS = {"sql": "SELECT COUNT(*) FROM Customers"}


def context() -> RunContext:
    bench = create_benchmark("bundled")
    task = next(t for t in bench.load() if t.question_type == QuestionType.FACTOID).for_agent()
    budgets = Budgets(wall_time_s=3600)
    recorder = TraceRecorder(Trace(task_id=task.id, system="measure", model="scripted"), budgets)
    env = ToolEnvironment(bench.tools(task, ToolSettings()), recorder)
    model = MeteredModel(SCRIPTED, ScriptedProvider(lambda r, c: None), recorder, system="measure")
    recorder.start()
    return RunContext(task, env, model)


async def measure(url: str, token: str, session: AgentSession, calls: int) -> dict[str, list[float]]:
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    times: dict[str, list[float]] = {"in_process": [], "mcp": [], "json_rpc": []}
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "execute_sql", "arguments": ARGUMENTS},
    }
    bare = httpx.Client(headers=headers, timeout=60, trust_env=False)
    async with (
        httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60, trust_env=False) as client,
        streamable_http_client(url, http_client=client) as (read, write, _),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        for _ in range(20):  # warm both paths (connections, validators, SQLite pages)
            await mcp.call_tool("execute_sql", ARGUMENTS)
            session.call_result("execute_sql", ARGUMENTS)
        for _ in range(calls):
            start = time.perf_counter()
            result = await mcp.call_tool("execute_sql", ARGUMENTS)
            times["mcp"].append(time.perf_counter() - start)
            assert not result.isError, result
            start = time.perf_counter()
            local = session.call_result("execute_sql", ARGUMENTS)
            times["in_process"].append(time.perf_counter() - start)
            assert local.success, local
            start = time.perf_counter()
            reply = bare.post(url, json=body)
            times["json_rpc"].append(time.perf_counter() - start)
            assert reply.status_code == 200 and not reply.json()["result"]["isError"], reply.text
    bare.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    ctx = context()
    session = AgentSession(ctx.task, ctx)
    with shared_tool_server().open_unit(session) as endpoint:
        box: dict[str, dict[str, list[float]]] = {}
        worker = threading.Thread(
            target=lambda: box.update(t=asyncio.run(measure(endpoint.url, endpoint.token, session, calls)))
        )
        worker.start()
        worker.join()
    times = box["t"]
    local, remote, wire = (statistics.median(times[path]) for path in ("in_process", "mcp", "json_rpc"))
    traced = sum(1 for step in ctx.model.recorder.trace.steps if getattr(step, "tool", None) == "execute_sql")
    print(
        json.dumps(
            {
                "calls_each": calls,
                "in_process_median_ms": round(local * 1000, 3),
                "mcp_median_ms": round(remote * 1000, 3),
                "json_rpc_median_ms": round(wire * 1000, 3),
                "overhead_per_call_ms": {
                    "mcp_sdk": round((remote - local) * 1000, 3),
                    "json_rpc": round((wire - local) * 1000, 3),
                },
                "ratio_to_in_process": {"mcp_sdk": round(remote / local, 2), "json_rpc": round(wire / local, 2)},
                "tool_steps_traced": traced,
            }
        )
    )


if __name__ == "__main__":
    main()
