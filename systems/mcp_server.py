"""The task's tools over the Model Context Protocol: any agent, in any language, calls exactly the tools a
built-in system gets, through the same run context.

    server = McpToolServer()                          one per process, on loopback, started on first use
    with server.open_unit(session, token) as mcp:     one unit's tools at mcp.url, behind the unit's token
        ... the agent connects with `Authorization: Bearer <token>` (Streamable HTTP) ...

A unit's tools are served with the names, descriptions and JSON schemas `ctx.tool_specs()` gives every
system, `answer` included. A call goes through `AgentSession.call_result` (systems/bridge.py), the path
every framework adapter takes: validated, sandboxed, truncated to the context limit, recorded as a tool
step of the unit's trace with its phase; a failed call comes back as an MCP error result the agent can
read. A call is refused (an error result, nothing run, nothing recorded) once the unit's wall time is over
or a budget has refused a model call, and after the task was answered.

Each unit has its own URL, `http://127.0.0.1:PORT/u/<unit>/mcp`, and its token; a request with another
unit's token, or none, gets HTTP 401, and the unit's URL answers 404 once the unit ended. The server is
the official `mcp` SDK's low-level `Server` behind its `StreamableHTTPSessionManager` (stateless, JSON
replies), run by uvicorn in a thread of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import ToolResult
from .bridge import AgentSession

if TYPE_CHECKING:
    from mcp import types
    from starlette.types import Receive, Scope, Send

# Imported on first use (kept out of the command's start); imported before units run on threads, where two
# units importing them at once could find a package half-initialized (`registry.import_lazy_dependencies`).
LAZY_IMPORTS = ("anyio", "mcp", "mcp.server.lowlevel", "mcp.server.streamable_http_manager", "uvicorn")


START_TIMEOUT_S = 30.0
UNIT_SCOPE_KEY = "data_agent_compare.unit"  # where the ASGI dispatcher hands the unit to the MCP handlers


@dataclass(frozen=True)
class McpEndpoint:
    """Where one unit's tools are served: the URL and the bearer token that opens it."""

    url: str
    token: str


@dataclass
class McpUnit:
    """One unit's tools as the MCP server serves them."""

    session: AgentSession
    token: str
    agent: str | None = None  # the label of its tool steps (None: a single-agent system)
    closed: bool = False
    calls: int = field(default=0)

    def specs(self) -> list[dict[str, Any]]:
        return [spec.model_dump() for spec in self.session.ctx.tool_specs()]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool call through the session, or refuse it (nothing run, nothing recorded)."""
        refused = self.refusal()
        if refused is not None:
            return ToolResult(success=False, content=f"refused: {refused}", error=refused)
        self.calls += 1
        return self.session.call_result(name, arguments, agent=self.agent)

    def refusal(self) -> str | None:
        """Why no further tool call is admitted for this unit, or None."""
        ctx = self.session.ctx
        if self.closed:
            return "the unit has ended"
        stop = ctx.budget_stop
        if stop is not None:
            return f"budget exceeded ({stop.status}): {stop}"
        recorder = ctx.model.recorder
        if recorder.remaining_s() <= 0:
            limit = recorder.refuse("time_limit", f"wall-time limit of {ctx.budgets.wall_time_s}s reached")
            return f"budget exceeded ({limit.status}): {limit}"
        return None


class McpToolServer:
    """The process's MCP server of task tools: one loopback port, one URL and token per unit."""

    def __init__(self) -> None:
        self._units: dict[str, McpUnit] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._uvicorn: Any = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._socket is None:
            raise RuntimeError("the MCP tool server is not started")
        return self._socket.getsockname()[1]

    def url(self, unit_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/u/{unit_id}/mcp"

    @contextlib.contextmanager
    def open_unit(self, session: AgentSession, token: str | None = None) -> Iterator[McpEndpoint]:
        """Serve the unit's tools until the block ends; `token` (default: a fresh one) opens them."""
        self.start()
        unit_id = secrets.token_hex(8)
        unit = McpUnit(session, token or secrets.token_urlsafe(24))
        with self._lock:
            self._units[unit_id] = unit
        try:
            yield McpEndpoint(self.url(unit_id), unit.token)
        finally:
            unit.closed = True
            with self._lock:
                self._units.pop(unit_id, None)

    def start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                # accepted connections inherit it: a reply's headers and body must not wait for a delayed ACK
                self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self._socket.bind(("127.0.0.1", 0))  # loopback only
                self._socket.listen(256)
                self._thread = threading.Thread(target=self._serve_thread, name="compare-mcp", daemon=True)
                self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S) or self._failure is not None:
            raise RuntimeError(f"the MCP tool server did not start: {self._failure!r}")

    def stop(self) -> None:
        """Stop serving (idempotent; also when it never started)."""
        with self._lock:
            thread, server = self._thread, self._uvicorn
        if thread is None:
            return
        if server is not None:
            server.should_exit = True
        thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    # ------------------------------------------------------------ the server's own thread

    def _serve_thread(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as failure:  # reported to the thread waiting in start()
            self._failure = failure
            self._ready.set()

    async def _serve(self) -> None:
        import uvicorn
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(self._mcp_server(), stateless=True, json_response=True)

        async def app(scope: Scope, receive: Receive, send: Send) -> None:
            await self._dispatch(manager, scope, receive, send)

        config = uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False, timeout_keep_alive=30)
        self._uvicorn = uvicorn.Server(config)
        async with manager.run():
            self._ready.set()
            assert self._socket is not None
            await self._uvicorn.serve(sockets=[self._socket])

    def _mcp_server(self) -> Any:
        import anyio
        from mcp import types
        from mcp.server.lowlevel import Server

        server: Server[Any, Any] = Server("data-agent-compare")

        def current_unit() -> McpUnit:
            request = server.request_context.request
            return request.scope[UNIT_SCOPE_KEY]  # set by _dispatch, after the token was checked

        @server.list_tools()
        async def list_tools() -> list[types.Tool]:
            unit = current_unit()
            return [
                types.Tool(name=s["name"], description=s["description"], inputSchema=s["parameters"])
                for s in unit.specs()
            ]

        @server.call_tool(validate_input=False)  # the tool environment validates, and traces a refusal
        async def call_tool(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
            unit = current_unit()
            result = await anyio.to_thread.run_sync(unit.call, name, dict(arguments or {}))
            return tool_result(result)

        return server

    async def _dispatch(self, manager: Any, scope: Scope, receive: Receive, send: Send) -> None:
        """Route `/u/<unit>/mcp` to the MCP handlers after checking the unit's token."""
        if scope["type"] != "http":
            return
        parts = scope["path"].strip("/").split("/")
        with self._lock:
            unit = self._units.get(parts[1]) if len(parts) == 3 and parts[0] == "u" and parts[2] == "mcp" else None
        if unit is None:
            await _reply(send, 404, "no such unit (it ended, or the URL is wrong)")
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not secrets.compare_digest(given.encode(), unit.token.encode()):
            await _reply(send, 401, "invalid token for this unit")
            return
        await manager.handle_request({**scope, UNIT_SCOPE_KEY: unit}, receive, send)


def tool_result(result: ToolResult) -> types.CallToolResult:
    """A tool's result as MCP's: its text (what a built-in system's model reads), an error flag."""
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.content)], isError=not result.success
    )


async def _reply(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_shared: McpToolServer | None = None
_shared_lock = threading.Lock()


def shared_tool_server() -> McpToolServer:
    """The process's MCP tool server (started on first use, a daemon thread: it ends with the process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = McpToolServer()
        return _shared
