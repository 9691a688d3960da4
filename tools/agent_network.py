"""The only network a sandboxed agent has: its own unit's model gateway and MCP tools, relayed in.

An agent's sandbox (systems/agent_sandbox.py) has a network namespace of its own with nothing in it but
loopback: no route out, no host service, no other unit, no PostgreSQL server, no Ray. Inside it the sandbox's
launcher listens on two ports and hands the listening sockets to the suite (fd passing); this relay accepts
the agent's connections on them and joins each to the suite's loopback server it stands for (the gateway, the
MCP server). So the agent reaches exactly its two endpoints and nothing else, and no process runs inside the
sandbox for it.

Per unit and endpoint at most MAX_CONNECTIONS connections are open at once (more wait in the listen backlog,
as on a busy server: a burst of one agent takes no other unit's share); every connection of a unit is closed
when the unit ends. Request size and idle limits are the servers' own (providers/endpoint.py,
systems/mcp_server.py): they hold for every client, relayed or not.

One relay per process (a thread running an asyncio loop), started on first use.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field

MAX_CONNECTIONS = 32  # per unit and endpoint: an OpenAI client's pool, an MCP client, their retries
CHUNK = 1 << 16
START_TIMEOUT_S = 10.0


@dataclass
class _Unit:
    """One unit's relayed endpoints: its tasks and open sockets, all closed when the unit ends."""

    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    sockets: set[socket.socket] = field(default_factory=set)
    connections: int = 0  # connections relayed so far (the manifest's count)


class AgentNetwork:
    """Relays per-unit listening sockets (in agents' network namespaces) to loopback ports of this process."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def relay(self, routes: dict[socket.socket, int]) -> Iterator[_Unit]:
        """Serve each listening socket by joining its connections to 127.0.0.1:<port> until the block ends;
        then every connection is closed (the sockets too)."""
        loop = self._running_loop()
        unit = _Unit()
        started: Future[None] = asyncio.run_coroutine_threadsafe(self._open(unit, routes), loop)
        try:
            started.result(START_TIMEOUT_S)
            yield unit
        finally:
            asyncio.run_coroutine_threadsafe(self._close(unit), loop).result(START_TIMEOUT_S)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="compare-agent-network", daemon=True).start()
                self._loop = loop
            return self._loop

    async def _open(self, unit: _Unit, routes: dict[socket.socket, int]) -> None:
        for listener, port in routes.items():
            listener.setblocking(False)
            unit.sockets.add(listener)
            self._spawn(unit, self._accept(unit, listener, port))

    def _spawn(self, unit: _Unit, work: object) -> None:
        task = asyncio.get_running_loop().create_task(work)  # type: ignore[arg-type]
        unit.tasks.add(task)
        task.add_done_callback(unit.tasks.discard)

    async def _accept(self, unit: _Unit, listener: socket.socket, port: int) -> None:
        loop = asyncio.get_running_loop()
        slots = asyncio.Semaphore(MAX_CONNECTIONS)
        while True:
            await slots.acquire()  # at the cap, further connections wait in the sandbox's listen backlog
            try:
                client, _ = await loop.sock_accept(listener)
            except OSError:  # the listener was closed: the unit ended
                slots.release()
                return
            unit.connections += 1
            unit.sockets.add(client)
            self._spawn(unit, self._join(unit, client, port, slots))

    async def _join(self, unit: _Unit, client: socket.socket, port: int, slots: asyncio.Semaphore) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=5)  # loopback: immediate
        except OSError:
            client.close()
            unit.sockets.discard(client)
            slots.release()
            return
        unit.sockets.add(upstream)
        for end in (client, upstream):
            end.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            end.setblocking(False)
        try:
            await asyncio.gather(_pump(client, upstream), _pump(upstream, client))
        finally:
            for end in (client, upstream):
                end.close()
                unit.sockets.discard(end)
            slots.release()

    async def _close(self, unit: _Unit) -> None:
        for task in list(unit.tasks):
            task.cancel()
        for end in list(unit.sockets):
            end.close()
        unit.sockets.clear()
        if unit.tasks:
            await asyncio.gather(*unit.tasks, return_exceptions=True)


async def _pump(source: socket.socket, sink: socket.socket) -> None:
    """Copy bytes one way until the source ends, then end that direction of the sink (a half-close, which
    HTTP/1.1 clients and servers understand)."""
    loop = asyncio.get_running_loop()
    try:
        while data := await loop.sock_recv(source, CHUNK):
            await loop.sock_sendall(sink, data)
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)
    except OSError:  # either side went away: the other direction ends with it
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


_shared: AgentNetwork | None = None
_shared_lock = threading.Lock()


def agent_network() -> AgentNetwork:
    """The process's relay (started on first use; its thread is a daemon and ends with the process)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = AgentNetwork()
        return _shared
