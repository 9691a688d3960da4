"""The model gateway as an OpenAI-compatible HTTP endpoint on loopback.

External frameworks (LangGraph, AutoGen, LlamaIndex, LOTUS, ...) speak the OpenAI protocol,
so a task run opens a session on the run's one server (`RunContext.openai_endpoint()`), with
its own base URL `http://127.0.0.1:PORT/s/<session>/v1` and key, bound to that run's
`MeteredModel`. Every request goes through `MeteredModel.generate(via_http=True)`, so HTTP
calls are budget-checked, timed, priced, phase-labelled and traced exactly like in-process
calls. A request without the session's key is refused (401): the port is reachable by any
process on the machine.

A request reaches the provider as the framework sent it, less what the run governs
(`openai_protocol.GOVERNED_FIELDS`: the model, the generation settings, streaming): `stop`,
`response_format`, a named `tool_choice`, `logprobs`, `user`, ... go unchanged, recorded in the call's
trace step (`request_options`). A field the gateway refuses (`openai_protocol.REFUSED_FIELDS`, `n`
above 1) or the provider cannot take (`ModelProvider.request_fields`) is answered 400 naming it
(`param`), before anything is sent; a provider's own refusal of the request (HTTP 400/413/422 upstream)
is a 400 too, other model failures a 502.

A call refused by a budget gets HTTP 402 (OpenAI clients retry 429 on their own, and an
exhausted budget must stop them) with `{"error": {"type": "budget_exceeded", "code":
"max_steps", ...}}`; the task then ends with that budget's status, whatever the framework
does with the error. `X-Compare-Agent` labels a call's agent (multi-agent frameworks).

`stream: true` is answered with a minimal server-sent-event stream: the whole completion
in one delta chunk, then the finish chunk, then a usage chunk (no token-by-token streaming;
the model call completes before the first byte is sent).

Under a hostile client (`http_limits.py` has the numbers and why): a body over the cap is refused from
its Content-Length alone (413, never read), others are read in pieces after the session's key was
checked, and JSON with too many elements is refused before it is parsed (413). A request's head must
arrive whole within the idle timeout of the connection opening or its last reply, its body within the
body timeout (a reaper thread hangs up on connections past their deadline, however regular their
trickle; a silent one times out by itself). Connections between requests are a pool of at most
`max_idle_connections`: one more closes the one idle longest. A session has at most
`max_requests_per_owner` requests in progress, holding at most `max_body_bytes_per_owner` of bodies
(then 429), and `max_calls_per_owner` model calls running (the others wait their turn). Each connection
is a thread, so these caps are what bound the threads: 1,500 idle connections hold at most 256.
"""

from __future__ import annotations

import contextlib
import http.client
import itertools
import json
import logging
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from ..core.context import Endpoint
from ..core.model import REQUEST_FAULTS, FieldRefused, MeteredModel, ModelError, ModelResponse
from ..core.safe_load import load_json
from ..core.trace import BudgetExceeded
from .http_limits import (
    READ_CHUNK_BYTES,
    OwnerLoad,
    RequestRefused,
    ServerLimits,
    body_length,
    check_json_elements,
    quiet,
)
from .openai_protocol import request_from_openai, response_to_openai, stream_chunks

log = logging.getLogger(__name__)

AGENT_HEADER = "X-Compare-Agent"
# 402 rather than 429: OpenAI-based clients retry 429 on their own; an exhausted budget must stop them.
BUDGET_STATUS = HTTPStatus.PAYMENT_REQUIRED
EVICTION_SCAN = 32  # of the connections idle longest, one with nothing pending is closed first


class GatewayError(Exception):
    """An error to send back as an OpenAI-shaped JSON error body."""

    def __init__(
        self,
        status: HTTPStatus,
        message: str,
        kind: str,
        code: str | None = None,
        *,
        param: str | None = None,
        retry_after_s: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.code = code
        self.param = param
        self.retry_after_s = retry_after_s  # a 429 of the gateway's own limits: the client may try again

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": str(self), "type": self.kind, "code": self.code}
        if self.param is not None:
            error["param"] = self.param
        return {"error": error}


@dataclass(frozen=True)
class _Session:
    model: MeteredModel
    key: str
    agent: str | None
    load: OwnerLoad  # its requests in progress
    calls: threading.Semaphore  # its model calls running; the others wait for their turn


class _Connections:
    """The gateway's open connections and what each owes by when (module docstring): between requests a
    connection is idle (in the pool, its next head due within the idle timeout), reading (its body due within
    the body timeout) or busy (its call running: nothing owed)."""

    def __init__(self, limits: ServerLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._idle: dict[socket.socket, None] = {}  # oldest first
        self._deadlines: dict[socket.socket, float] = {}  # monotonic
        self._stopped = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="compare-gateway-reaper", daemon=True)

    def opened(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)
        self.idle(sock)

    def idle(self, sock: socket.socket) -> None:
        """Its next request's head is due; a pool over its limit closes the connections idle longest."""
        with self._lock:
            if sock not in self._open:
                return
            self._idle.pop(sock, None)
            self._idle[sock] = None
            self._deadlines[sock] = time.monotonic() + self.limits.idle_timeout_s
            evicted = self._overflow()
        for victim in evicted:
            _hang_up(victim)

    def reading(self, sock: socket.socket) -> None:
        with self._lock:
            self._idle.pop(sock, None)
            if sock in self._open:
                self._deadlines[sock] = time.monotonic() + self.limits.body_timeout_s

    def busy(self, sock: socket.socket) -> None:
        with self._lock:
            self._idle.pop(sock, None)
            self._deadlines.pop(sock, None)

    def closed(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.discard(sock)
            self._idle.pop(sock, None)
            self._deadlines.pop(sock, None)

    def counts(self) -> dict[str, int]:
        """How many connections are open and how many of them idle (for tests and diagnostics)."""
        with self._lock:
            return {"open": len(self._open), "idle": len(self._idle)}

    def _overflow(self) -> list[socket.socket]:
        """The idle connections to close so that the pool keeps its limit: those idle longest, one with nothing
        pending first (a silent or trickling client, not one whose request has just arrived)."""
        excess = len(self._idle) - self.limits.max_idle_connections
        if excess <= 0:
            return []
        oldest = list(itertools.islice(self._idle, max(excess, EVICTION_SCAN)))
        victims = [sock for sock in oldest if quiet(sock)][:excess]
        victims += [sock for sock in oldest if sock not in victims][: excess - len(victims)]
        for victim in victims:
            del self._idle[victim]
            self._deadlines.pop(victim, None)
        return victims

    def start(self) -> None:
        self._reaper.start()

    def stop(self) -> None:
        """Stop reaping and hang up on every connection still open (their threads then end)."""
        self._stopped.set()
        if self._reaper.ident is not None:
            self._reaper.join()
        with self._lock:
            remaining = list(self._open)
        for sock in remaining:
            _hang_up(sock)

    def _reap(self) -> None:
        limits = self.limits
        tick = max(0.02, min(0.5, limits.idle_timeout_s / 4, limits.body_timeout_s / 4))
        while not self._stopped.wait(tick):
            now = time.monotonic()
            with self._lock:
                late = [sock for sock, deadline in self._deadlines.items() if deadline <= now]
                for sock in late:
                    del self._deadlines[sock]
                    self._idle.pop(sock, None)
            for sock in late:
                log.debug("gateway: closing a connection that did not send its request in time")
                _hang_up(sock)


def _hang_up(sock: socket.socket) -> None:
    """End a connection from another thread: its reads return at once, and its own thread closes it."""
    with contextlib.suppress(OSError):  # already gone
        sock.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a framework's parallel calls must not stall in the listen backlog
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], connections: _Connections):
        self.connections = connections
        super().__init__(address, handler)

    def verify_request(self, request: Any, client_address: Any) -> bool:
        self.connections.opened(request)  # before its thread starts: the pool's limit holds at once
        return True

    def shutdown_request(self, request: Any) -> None:
        self.connections.closed(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its reply (an external agent killed at its deadline, a connection
        hung up on) is no error of the gateway's: noted, not printed as a traceback on the run's console."""
        if isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            log.debug("gateway: the client %s went away before its reply", client_address)
            return
        super().handle_error(request, client_address)


class GatewayServer:
    """One loopback HTTP server per run, started on first use; one session per task run.

    `with server.open_session(model) as endpoint:` gives `endpoint.base_url` and `endpoint.api_key`."""

    def __init__(self, port: int = 0, limits: ServerLimits | None = None) -> None:
        self.limits = limits or ServerLimits()
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self.connections = _Connections(self.limits)
        self._server = _Server(("127.0.0.1", port), _handler_for(self), self.connections)  # loopback only
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, name="compare-gateway", daemon=True
        )  # the poll interval bounds how long stop() waits

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def register(self, model: MeteredModel, agent: str | None = None) -> str:
        """A new session for `model`; returns its id (its key: `key(session_id)`)."""
        session_id = secrets.token_hex(8)
        with self._lock:
            load, calls = OwnerLoad(self.limits), threading.Semaphore(self.limits.max_calls_per_owner)
            self._sessions[session_id] = _Session(model, secrets.token_urlsafe(24), agent, load, calls)
        return session_id

    def unregister(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)

    def base_url(self, session_id: str) -> str:
        return f"http://127.0.0.1:{self.port}/s/{session_id}/v1"

    def key(self, session_id: str) -> str:
        return self._session(session_id).key

    @contextmanager
    def open_session(self, model: MeteredModel, agent: str | None = None) -> Iterator[Endpoint]:
        """A session for one task run, closed when the block ends (the server starts on first use)."""
        self.start()
        session_id = self.register(model, agent)
        try:
            yield Endpoint(base_url=self.base_url(session_id), api_key=self.key(session_id), model=model.alias)
        finally:
            self.unregister(session_id)

    def _session(self, session_id: str) -> _Session:
        with self._lock:
            session = self._sessions.get(session_id)
        if session is None:
            raise GatewayError(HTTPStatus.NOT_FOUND, f"unknown session {session_id!r}", "not_found")
        return session

    def authorized(self, session_id: str, headers: dict[str, str]) -> _Session:
        """The session `session_id` when `headers` carry its key; a 404 or 401 otherwise."""
        session = self._session(session_id)
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not secrets.compare_digest(given.encode(), session.key.encode()):
            raise GatewayError(HTTPStatus.UNAUTHORIZED, "invalid API key for this session", "invalid_api_key")
        return session

    def start(self) -> None:
        with self._lock:
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()
                self.connections.start()

    def stop(self) -> None:
        """Stop the server (also when it never started); idempotent."""
        with self._lock:
            started = self._thread.ident is not None
        if started:
            self._server.shutdown()
            self._thread.join()
        self.connections.stop()
        self._server.server_close()

    def __enter__(self) -> GatewayServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------ the two endpoints

    def chat_completion(
        self, session: _Session, body: Any, headers: dict[str, str]
    ) -> tuple[MeteredModel, ModelResponse]:
        if not isinstance(body, dict):
            raise GatewayError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object", "invalid_request_error")
        try:
            request = request_from_openai(body)
        except FieldRefused as refused:
            raise _refusal(refused) from None
        except ValueError as error:  # pydantic's ValidationError included
            raise GatewayError(HTTPStatus.BAD_REQUEST, str(error), "invalid_request_error") from None
        try:
            with session.calls:  # the session's calls beyond its limit wait here for their turn
                response = session.model.generate(
                    request.messages,
                    request.tools,
                    tool_choice=request.tool_choice,
                    response_schema=request.response_schema,
                    temperature=request.temperature,  # what the library asked for; the run's generation is sent
                    max_output_tokens=request.max_output_tokens,
                    top_p=request.top_p,
                    seed=request.seed,
                    agent=headers.get(AGENT_HEADER.lower()) or session.agent,
                    via_http=True,
                    options=request.options,
                )
        except BudgetExceeded as error:
            message = f"budget exceeded ({error.status}): {error}"
            raise GatewayError(BUDGET_STATUS, message, "budget_exceeded", error.status) from None
        except FieldRefused as refused:
            raise _refusal(refused) from None
        except ModelError as error:
            if error.kind in REQUEST_FAULTS:  # the provider refused what was sent: the client's request
                raise GatewayError(HTTPStatus.BAD_REQUEST, str(error), "invalid_request_error", error.kind) from None
            code = str(error.status_code) if error.status_code else None
            raise GatewayError(HTTPStatus.BAD_GATEWAY, str(error), "model_error", code) from None
        return session.model, response

    def models(self, session: _Session) -> dict[str, Any]:
        entry = {"id": session.model.alias, "object": "model", "created": 0, "owned_by": "compare"}
        return {"object": "list", "data": [entry]}


def _refusal(refused: FieldRefused) -> GatewayError:
    """OpenAI's own shape for a parameter a model does not support."""
    return GatewayError(
        HTTPStatus.BAD_REQUEST, str(refused), "invalid_request_error", "unsupported_parameter", param=refused.field
    )


def _refused(refused: RequestRefused) -> GatewayError:
    kind = "rate_limit_exceeded" if refused.status == HTTPStatus.TOO_MANY_REQUESTS else "invalid_request_error"
    return GatewayError(refused.status, str(refused), kind, retry_after_s=refused.retry_after_s)


def _route(path: str) -> tuple[str, str]:
    """`/s/<session>/v1/<endpoint>` → (session, endpoint)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if len(parts) >= 4 and parts[0] == "s" and parts[2] == "v1":
        return parts[1], "/".join(parts[3:])
    raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {path!r}", "not_found")


def _parse(raw: bytes | bytearray, limits: ServerLimits) -> Any:
    """A request body's JSON, refused before it is parsed when it holds too many elements."""
    check_json_elements(raw, limits.max_json_elements)
    try:
        return load_json(raw)
    except ValueError as error:  # not JSON, not UTF-8, or nested too deep
        raise GatewayError(
            HTTPStatus.BAD_REQUEST, f"request body is not usable JSON: {error}", "invalid_request_error"
        ) from None


class _HeadLimit:
    """A connection's reader whose `readline` (the request line and the headers) refuses a request head over
    `limit` bytes (http.server then answers 431); `rearm` before each request. Everything else is the reader's."""

    def __init__(self, reader: Any, limit: int) -> None:
        self._reader = reader
        self._limit = limit
        self._left = limit

    def rearm(self) -> None:
        self._left = self._limit

    def readline(self, size: int = -1) -> bytes:
        if self._left <= 0:
            raise http.client.LineTooLong(f"request head over {self._limit:,} bytes")
        line: bytes = self._reader.readline(self._left if size < 0 else min(size, self._left))
        self._left -= len(line)
        return line

    def __getattr__(self, name: str) -> Any:
        return getattr(self._reader, name)


def _handler_for(gateway: GatewayServer) -> type[BaseHTTPRequestHandler]:
    limits, connections = gateway.limits, gateway.connections

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: frameworks reuse their connections
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall
        timeout = limits.idle_timeout_s  # a read that gets no byte for this long ends the connection
        rfile: Any

        def setup(self) -> None:
            super().setup()
            self.rfile = _HeadLimit(self.rfile, limits.max_head_bytes)

        def handle_one_request(self) -> None:
            self.rfile.rearm()
            super().handle_one_request()

        def do_GET(self) -> None:
            self._serve(self._get)

        def do_POST(self) -> None:
            self._serve(self._post)

        def _serve(self, answer: Any) -> None:
            connections.reading(self.connection)
            try:
                answer()
            except RequestRefused as refused:
                self._send_error(_refused(refused), close=refused.unread)
            except GatewayError as error:  # raised before the body was read: the connection cannot be reused
                self._send_error(error, close=True)
            if not self.close_connection:
                connections.idle(self.connection)

        def _get(self) -> None:
            session_id, endpoint = _route(self.path)
            if endpoint != "models":
                raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {self.path!r}", "not_found")
            session = gateway.authorized(session_id, self._headers())
            self._send_json(HTTPStatus.OK, gateway.models(session), close=bool(self.headers.get("Content-Length")))

        def _post(self) -> None:
            headers = self._headers()
            session_id, endpoint = _route(self.path)
            if endpoint != "chat/completions":
                raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {self.path!r}", "not_found")
            session = gateway.authorized(session_id, headers)  # before any of the body is read
            length = body_length(headers.get("content-length"), headers.get("transfer-encoding"), limits.max_body_bytes)
            with session.load.admitted(length):
                raw = self._read_body(length)
                if raw is None:  # the client went away or ran out of time: no one to answer
                    self.close_connection = True
                    return
                connections.busy(self.connection)
                try:
                    body = _parse(raw, limits)
                    model, response = gateway.chat_completion(session, body, headers)
                except GatewayError as error:  # the body was read: the connection stays usable
                    self._send_error(error, close=False)
                    return
            name = response.provider_model or model.config.model_id
            if body.get("stream"):
                self._send_stream(stream_chunks(response, name))
            else:
                self._send_json(HTTPStatus.OK, response_to_openai(response, name))

        def _headers(self) -> dict[str, str]:
            return {k.lower(): v for k, v in self.headers.items()}

        def _read_body(self, length: int) -> bytearray | None:
            """The body, read in pieces; None when the connection ended first (or was hung up on)."""
            body = bytearray()
            try:
                while len(body) < length:
                    piece = self.rfile.read(min(READ_CHUNK_BYTES, length - len(body)))
                    if not piece:
                        return None
                    body += piece
            except (OSError, ValueError):  # a timeout, a reset, a connection hung up on
                return None
            return body

        def _send_error(self, error: GatewayError, close: bool) -> None:
            headers = {"Retry-After": str(error.retry_after_s)} if error.retry_after_s is not None else {}
            self._send_json(error.status, error.body(), close=close, headers=headers)

        def _send_json(
            self,
            status: HTTPStatus,
            payload: dict[str, Any],
            close: bool = False,
            headers: dict[str, str] | None = None,
        ) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status != HTTPStatus.OK:  # the OpenAI SDK's hint: our provider already retried; our own 429 may wait
                self.send_header("x-should-retry", "true" if status == HTTPStatus.TOO_MANY_REQUESTS else "false")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if close:
                self.send_header("Connection", "close")  # also sets close_connection
            self.end_headers()
            self.wfile.write(data)

        def _send_stream(self, chunks: list[dict[str, Any]]) -> None:
            events = [f"data: {json.dumps(chunk)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
            data = "".join(events).encode()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("gateway: " + format, *args)

    return Handler
