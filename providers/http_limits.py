"""What the suite's two loopback HTTP servers take from a client before giving up on it: the model gateway
(`providers/endpoint.py`) and the MCP tool server (`systems/mcp_server.py`). Any process on the machine can
connect to them, a hostile agent included, so neither may let one client hold memory, threads or time that
another unit needs.

    ServerLimits()                        the numbers below, one object per server (tests pass smaller ones)
    OwnerLoad(limits).admitted(n)         one request of a session or unit in progress, or a 429
    body_length(content_length, ...)      the declared body size, or a `RequestRefused` (411, 400, 413)
    check_json_elements(raw, limit)       a `RequestRefused` (413) for JSON with more elements than `limit`
    quiet(sock)                           whether a connection has nothing waiting to be read

Why these numbers (each far above what a legitimate request needs, far below what hurts the run):

- a body of at most 16 MiB. A conversation filling a 128k-token context is about 1 MB of JSON; the largest
  context windows offered (1-2M tokens, 4-8 MB of text) stay under 12 MB with JSON's escaping. A larger body is
  refused with 413 from its Content-Length alone, never read.
- at most 250,000 JSON elements (containers and commas outside strings). Parsing allocates per element, not per
  byte: `[[],[],...]` costs ~50 bytes of Python objects per 3 bytes of body (a 64 MB one grew the runner by
  3.1 GB). A full 128k-token conversation with tools has a few thousand elements (its text is in strings, which
  do not count); 250,000 elements allocate at most ~25 MB.
- a request's head (request line and headers) within 64 KiB, whole within `idle_timeout_s` of the connection
  opening or of its last reply, and its body whole within `body_timeout_s` of the head: a client that sends
  nothing, or one byte at a time, is closed however regular its trickle. 30 s is above the keep-alive expiry of
  the usual clients (httpx 5 s, undici 4 s), so they close their idle connections before the server does.
- connections between requests (new, or idle keep-alive ones) belong to no one: at most `max_idle_connections`
  of them; one more closes the one idle longest (preferring one with nothing pending), so a flood of idle
  connections only ever pushes out its own oldest. A request in progress belongs to its session or unit, which
  may have `max_requests_per_owner` at once (LOTUS alone sends 64 in parallel), whose bodies hold at most
  `max_body_bytes_per_owner` together; one more is refused with 429. So one session holds at most four
  largest bodies in memory, however many connections it opens.
"""

from __future__ import annotations

import re
import select
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http import HTTPStatus

MAX_BODY_BYTES = 16 << 20
MAX_JSON_ELEMENTS = 250_000
MAX_HEAD_BYTES = 64 << 10
READ_CHUNK_BYTES = 64 << 10  # a body is read in pieces of this size, never asked for at once

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


@dataclass(frozen=True)
class ServerLimits:
    """One server's limits (module docstring)."""

    max_body_bytes: int = MAX_BODY_BYTES
    max_json_elements: int = MAX_JSON_ELEMENTS
    max_head_bytes: int = MAX_HEAD_BYTES
    idle_timeout_s: float = 30.0
    body_timeout_s: float = 60.0
    max_idle_connections: int = 256
    max_requests_per_owner: int = 128  # a session's (gateway) or unit's (MCP) requests in progress at once
    max_body_bytes_per_owner: int = 4 * MAX_BODY_BYTES  # the bodies of those requests, together
    max_calls_per_owner: int = 64  # of those, model calls (gateway) running at once; the others wait their turn
    max_tool_calls_per_owner: int = 8  # of those, tool calls (MCP) running at once; the others wait their turn


class RequestRefused(Exception):
    """A request refused for its size or shape, or for its owner's load: the HTTP status, whether its body was
    left unread (then the connection must close), and when the client may try again (a 429)."""

    def __init__(
        self, status: HTTPStatus, message: str, *, unread: bool = False, retry_after_s: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.unread = unread
        self.retry_after_s = retry_after_s


@dataclass
class OwnerLoad:
    """What one session (gateway) or unit (MCP) has in progress: requests, and the bytes of their bodies."""

    limits: ServerLimits
    requests: int = 0
    body_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @contextmanager
    def admitted(self, body_bytes: int) -> Iterator[None]:
        """One more request in progress for the block, its body of `body_bytes` not read yet; a 429 when the
        owner is at its limits."""
        limits = self.limits
        with self._lock:
            if self.requests >= limits.max_requests_per_owner:
                why = f"{self.requests} requests of this client are in progress, the most it may have at once"
                raise RequestRefused(HTTPStatus.TOO_MANY_REQUESTS, why, unread=True, retry_after_s=1)
            if self.requests and self.body_bytes + body_bytes > limits.max_body_bytes_per_owner:
                why = f"this client's requests in progress hold {self.body_bytes:,} bytes of bodies already"
                raise RequestRefused(HTTPStatus.TOO_MANY_REQUESTS, why, unread=True, retry_after_s=1)
            self.requests += 1
            self.body_bytes += body_bytes
        try:
            yield
        finally:
            with self._lock:
                self.requests -= 1
                self.body_bytes -= body_bytes


def body_length(content_length: str | None, transfer_encoding: str | None, limit: int) -> int:
    """The size of the body a request declares, checked before any of it is read."""
    if transfer_encoding:
        raise RequestRefused(
            HTTPStatus.LENGTH_REQUIRED, "send the body with a Content-Length, not Transfer-Encoding", unread=True
        )
    if content_length is None:
        raise RequestRefused(HTTPStatus.LENGTH_REQUIRED, "a request body needs a Content-Length", unread=True)
    text = content_length.strip()
    if not text.isdigit():
        raise RequestRefused(HTTPStatus.BAD_REQUEST, f"invalid Content-Length {content_length[:40]!r}", unread=True)
    length = int(text)
    if length > limit:
        raise RequestRefused(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"request body of {length:,} bytes is over the limit of {limit:,} bytes",
            unread=True,
        )
    return length


def check_json_elements(raw: bytes, limit: int) -> None:
    """Refuse (413) a JSON text with more than `limit` elements, counted before it is parsed: containers and
    commas outside strings. Counting every bracket and comma is an upper bound and costs one pass in C; only a
    text over the limit by that count has its strings taken out and is counted again."""
    if raw.count(b"[") + raw.count(b"{") + raw.count(b",") <= limit:
        return
    bare = _JSON_STRING.sub(b"", raw)
    elements = bare.count(b"[") + bare.count(b"{") + bare.count(b",")
    if elements > limit:
        raise RequestRefused(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            f"request body holds {elements:,} JSON elements, over the limit of {limit:,}",
        )


def quiet(sock: socket.socket) -> bool:
    """Whether nothing waits to be read on `sock` (an idle or trickling connection, not one whose request has
    just arrived); a closed socket is quiet."""
    try:
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return not poller.poll(0)
    except (OSError, ValueError):
        return True
