"""The MCP tool server under a hostile client (issue 35): a body over the cap refused with 413 before it is read,
JSON with too many elements refused, silent, idle and trickling connections closed, a flood of connections held
to the idle pool, a unit's requests capped, and each unit's tool calls on a limit of its own, so one unit's slow
calls never hold up another unit's. The units' tools are a stand-in session here (the server's limits are under
test, not the tools); clients are raw sockets and plain JSON-RPC over httpx."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

from data_agent_compare.core import ToolResult, ToolSpec
from data_agent_compare.providers.http_limits import MAX_BODY_BYTES, ServerLimits
from data_agent_compare.systems.mcp_server import McpEndpoint, McpToolServer

CLIENT_WAIT_S = 20.0  # a guard against a test hanging, never what a test asserts
TOOL = ToolSpec(name="slow_tool", description="A tool that takes its time.", parameters={"type": "object"})


class StandInSession:
    """What the MCP server asks of a unit's AgentSession: its tool specs, its budgets, and `call_result`."""

    def __init__(self, tool: Any) -> None:
        recorder = SimpleNamespace(remaining_s=lambda: 3600.0)
        self.ctx = SimpleNamespace(
            tool_specs=lambda: [TOOL], budget_stop=None, model=SimpleNamespace(recorder=recorder), budgets=None
        )
        self.tool = tool

    def call_result(self, name: str, arguments: dict[str, Any], agent: str | None = None) -> ToolResult:
        return self.tool(name, arguments)


def answered(name: str, arguments: dict[str, Any]) -> ToolResult:
    return ToolResult(success=True, content="done")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[McpToolServer]:
    tools = McpToolServer(getattr(request, "param", None) or ServerLimits())
    tools.start()
    yield tools
    tools.stop()


def call(mcp: McpEndpoint, request_id: int = 1) -> httpx.Response:
    headers = {
        "Authorization": f"Bearer {mcp.token}",
        "Accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": TOOL.name, "arguments": {}}}
    return httpx.post(mcp.url, json=body, headers=headers, timeout=CLIENT_WAIT_S, trust_env=False)


def tool_text(reply: httpx.Response) -> str:
    return reply.json()["result"]["content"][0]["text"]


def connect(mcp: McpEndpoint) -> socket.socket:
    host, port = mcp.url.split("//", 1)[1].split("/", 1)[0].split(":")
    return socket.create_connection((host, int(port)), timeout=CLIENT_WAIT_S)


def head(mcp: McpEndpoint, length: int) -> bytes:
    host_port, path = mcp.url.split("//", 1)[1].split("/", 1)
    return (
        f"POST /{path} HTTP/1.1\r\nHost: {host_port}\r\nAuthorization: Bearer {mcp.token}\r\n"
        f"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()


def reply_of(sock: socket.socket) -> tuple[int, bytes]:
    """The status of a reply, and everything the server sent until it closed the connection."""
    data = b""
    try:
        while piece := sock.recv(65536):
            data += piece
    except (TimeoutError, ConnectionResetError):
        pass
    return (int(data.split(b" ", 2)[1]) if data else 0), data


def closed_by_server(sock: socket.socket) -> bool:
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def wait_until(condition: Any) -> None:
    stop = time.monotonic() + CLIENT_WAIT_S
    while not condition() and time.monotonic() < stop:
        time.sleep(0.02)


# ---------------------------------------------------------------- bodies


def test_a_body_over_the_cap_is_refused_with_413_before_it_is_read(server) -> None:
    calls: list[str] = []
    session = StandInSession(lambda name, arguments: calls.append(name) or answered(name, arguments))
    with server.open_unit(session) as mcp, connect(mcp) as sock:  # type: ignore[arg-type]
        sock.sendall(head(mcp, 64 * 2**20))  # declares 64 MB, sends none of it
        status, reply = reply_of(sock)  # answered, and the connection closed, without waiting for the body

    assert status == 413 and b"over the limit" in reply
    assert calls == []


def test_json_with_too_many_elements_is_refused_with_413(server) -> None:
    body = b"[" + b"[]," * (4 * 2**20 // 3 - 1) + b"[]]"  # 4 MB, under the byte cap
    assert len(body) < MAX_BODY_BYTES
    with server.open_unit(StandInSession(answered)) as mcp, connect(mcp) as sock:  # type: ignore[arg-type]
        sock.sendall(head(mcp, len(body)))
        sock.sendall(body)
        status, reply = reply_of(sock)

    assert status == 413 and b"JSON elements" in reply


# ---------------------------------------------------------------- slow and idle connections

QUICK = ServerLimits(idle_timeout_s=0.4, body_timeout_s=0.4)


@pytest.mark.parametrize("server", [QUICK], indirect=True)
def test_a_header_trickle_is_closed_at_its_deadline_however_regular(server) -> None:
    with server.open_unit(StandInSession(answered)) as mcp, connect(mcp) as sock:  # type: ignore[arg-type]
        whole = head(mcp, 2) + b"{}"
        sent = 0
        try:
            for byte in whole:
                sock.send(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass

    assert 0 < sent < len(whole)


@pytest.mark.parametrize("server", [QUICK], indirect=True)
def test_silent_and_idle_keep_alive_connections_are_closed(server) -> None:
    with server.open_unit(StandInSession(answered)) as mcp, connect(mcp) as silent:  # type: ignore[arg-type]
        with httpx.Client(trust_env=False) as client:  # keeps its connection open after the reply
            headers = {"Authorization": f"Bearer {mcp.token}", "Accept": "application/json, text/event-stream"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": TOOL.name, "arguments": {}}}
            assert client.post(mcp.url, json=body, headers=headers).status_code == 200
            with connect(mcp) as used:
                used.sendall(head(mcp, len(b"{}")) + b"{}")  # a request (the SDK refuses it), then nothing
                assert used.recv(12).startswith(b"HTTP/1.1")
                assert closed_by_server(used)
        assert closed_by_server(silent)


IDLE_POOL = 16


@pytest.mark.parametrize("server", [ServerLimits(max_idle_connections=IDLE_POOL)], indirect=True)
def test_a_flood_of_idle_connections_holds_only_the_pool_and_a_call_is_still_answered(server) -> None:
    with server.open_unit(StandInSession(answered)) as mcp:  # type: ignore[arg-type]
        flood = [connect(mcp) for _ in range(300)]
        try:

            def still_open() -> int:
                return sum(_open(sock) for sock in flood)

            wait_until(lambda: still_open() <= IDLE_POOL)
            left_open = still_open()
            reply = call(mcp)
        finally:
            for sock in flood:
                sock.close()

    assert left_open <= IDLE_POOL
    assert reply.status_code == 200 and tool_text(reply) == "done"


def _open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False
    finally:
        sock.setblocking(True)


# ---------------------------------------------------------------- one unit's load, another unit's calls

LIMITED = ServerLimits(max_tool_calls_per_owner=2, max_requests_per_owner=6)


@pytest.mark.parametrize("server", [LIMITED], indirect=True)
def test_each_units_tool_calls_run_on_a_limit_of_its_own_and_never_wait_for_another_units(server) -> None:
    """Unit A's slow calls: two run at once, the rest wait, beyond six in progress a 429; unit B's call is
    answered while all of A's hang."""
    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def slow(name: str, arguments: dict[str, Any]) -> ToolResult:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(CLIENT_WAIT_S)
        with lock:
            running[0] -= 1
        return ToolResult(success=True, content="slow done")

    with (
        server.open_unit(StandInSession(slow)) as a,  # type: ignore[arg-type]
        server.open_unit(StandInSession(answered)) as b,  # type: ignore[arg-type]
        ThreadPoolExecutor(max_workers=8) as pool,
    ):
        a_calls = [pool.submit(call, a, number) for number in range(8)]
        wait_until(lambda: running[0] == 2 and sum(f.done() for f in a_calls) == 2)
        b_reply = call(b)
        a_done_before_release = [f.result().status_code for f in a_calls if f.done()]
        release.set()
        a_statuses = sorted(f.result().status_code for f in a_calls)

    assert b_reply.status_code == 200 and tool_text(b_reply) == "done"
    assert a_done_before_release == [429, 429]  # none of A's calls had returned when B was answered
    assert a_statuses == [200] * 6 + [429] * 2
    assert most[0] == 2
