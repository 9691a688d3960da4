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

Under a hostile client it keeps the gateway's limits (`providers/http_limits.py`): a body over the cap is
refused from its Content-Length (413, never read), others are read once the unit's token was checked and
refused before parsing when their JSON has too many elements (413); uvicorn's protocol is given deadlines
(`_guarded_protocol`: a request's head whole within the idle timeout of the connection opening or its last
reply, its body within the body timeout, whatever trickles in) and a pool of at most `max_idle_connections`
connections between requests (one more closes the one idle longest). A unit has at most
`max_requests_per_owner` requests in progress (then 429), and at most `max_tool_calls_per_owner` of its
tool calls run at once, on a thread limiter of its own: the others wait their turn, and no unit's calls wait
for another's (anyio's default limiter, 40 threads for the whole process, is not used).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import secrets
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import ToolResult
from ..providers.http_limits import OwnerLoad, RequestRefused, ServerLimits, body_length, check_json_elements
from .bridge import AgentSession

if TYPE_CHECKING:
    import anyio
    from mcp import types
    from starlette.types import Message, Receive, Scope, Send

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = (
    "anyio",
    "mcp",
    "mcp.server.lowlevel",
    "mcp.server.streamable_http_manager",
    "uvicorn",
    "uvicorn.protocols.http.h11_impl",
)


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
    limits: ServerLimits = field(default_factory=ServerLimits)
    load: OwnerLoad = field(init=False)  # its requests in progress
    _tool_threads: anyio.CapacityLimiter | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.load = OwnerLoad(self.limits)

    def tool_threads(self) -> anyio.CapacityLimiter:
        """The unit's own limit on tool calls running at once (created on the server's loop, on first use)."""
        import anyio

        if self._tool_threads is None:
            self._tool_threads = anyio.CapacityLimiter(self.limits.max_tool_calls_per_owner)
        return self._tool_threads

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

    def __init__(self, limits: ServerLimits | None = None) -> None:
        self.limits = limits or ServerLimits()
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
        unit = McpUnit(session, token or secrets.token_urlsafe(24), limits=self.limits)
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

        limits = self.limits
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_level="warning",
            access_log=False,
            http=_guarded_protocol(limits, _IdlePool(limits.max_idle_connections)),
            timeout_keep_alive=limits.idle_timeout_s,  # type: ignore[arg-type]  # uvicorn takes any number
            h11_max_incomplete_event_size=limits.max_head_bytes,
        )
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
            call = functools.partial(unit.call, name, dict(arguments or {}))
            result = await anyio.to_thread.run_sync(call, limiter=unit.tool_threads())
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
            await _reply(send, 404, "no such unit (it ended, or the URL is wrong)", close=True)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not secrets.compare_digest(given.encode(), unit.token.encode()):
            await _reply(send, 401, "invalid token for this unit", close=True)
            return
        scope = {**scope, UNIT_SCOPE_KEY: unit}
        if scope["method"] != "POST":  # GET (no stream in stateless mode) and DELETE carry no body
            await manager.handle_request(scope, receive, send)
            return
        try:
            length = body_length(
                headers.get("content-length"), headers.get("transfer-encoding"), unit.limits.max_body_bytes
            )
            with unit.load.admitted(length):
                body = await _read_body(receive)
                if body is None:  # the client went away (or was hung up on) before its body arrived
                    return
                check_json_elements(body, unit.limits.max_json_elements)
                await manager.handle_request(scope, _replayed(body, receive), send)
        except RequestRefused as refused:
            retry = {"retry-after": str(refused.retry_after_s)} if refused.retry_after_s is not None else {}
            await _reply(send, refused.status, str(refused), close=refused.unread, headers=retry)


async def _read_body(receive: Receive) -> bytes | None:
    """A request's whole body (uvicorn keeps it to its Content-Length), or None when the client disconnected."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        body += message.get("body", b"")
        if not message.get("more_body", False):
            return bytes(body)


def _replayed(body: bytes, receive: Receive) -> Receive:
    """`receive` for the MCP handlers: the body already read, then the client's own messages (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay  # type: ignore[return-value]


class _IdlePool:
    """The MCP server's connections between requests, oldest first: one over `limit` closes the one idle
    longest. Used on the server's loop only."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._idle: dict[Any, None] = {}

    def idle(self, connection: Any) -> None:
        self._idle.pop(connection, None)
        self._idle[connection] = None
        while len(self._idle) > self.limit:
            oldest = next(iter(self._idle))
            del self._idle[oldest]
            oldest.transport.close()

    def busy(self, connection: Any) -> None:
        self._idle.pop(connection, None)

    def __len__(self) -> int:
        return len(self._idle)


def _guarded_protocol(limits: ServerLimits, pool: _IdlePool) -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol with deadlines (module docstring): uvicorn's own keep-alive timer starts only
    after a first reply and any byte stops it, so a silent or trickling connection would live for ever."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None
        _timed: Any = None  # the request whose body the deadline is for

        def connection_made(self, transport: asyncio.BaseTransport) -> None:  # type: ignore[override]
            super().connection_made(transport)  # type: ignore[arg-type]
            self._owe(limits.idle_timeout_s)
            pool.idle(self)

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if cycle is None or cycle.response_complete or self.transport.is_closing():
                return  # between requests: the idle deadline runs on
            if cycle is not self._timed:  # a request's head arrived: its body is due
                self._timed = cycle
                pool.busy(self)
                self._owe(limits.body_timeout_s)
            if not cycle.more_body:  # the whole request arrived: it is being answered, nothing is owed
                self._owe(None)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._owe(limits.idle_timeout_s)
                pool.idle(self)

        def connection_lost(self, exc: Exception | None) -> None:
            self._owe(None)
            pool.busy(self)
            super().connection_lost(exc)

        def _owe(self, seconds: float | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = None if seconds is None else self.loop.call_later(seconds, self._late)

        def _late(self) -> None:
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedProtocol


def tool_result(result: ToolResult) -> types.CallToolResult:
    """A tool's result as MCP's: its text (what a built-in system's model reads), an error flag."""
    from mcp import types

    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.content)], isError=not result.success
    )


async def _reply(
    send: Send, status: int, message: str, close: bool = False, headers: dict[str, str] | None = None
) -> None:
    """A JSON error; `close`: the request's body was left unread, so the connection ends with the reply."""
    body = json.dumps({"error": message}).encode()
    fields = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    fields += [(name.encode(), value.encode()) for name, value in (headers or {}).items()]
    if close:
        fields.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": fields})
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
