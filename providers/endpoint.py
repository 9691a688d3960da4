"""The model gateway as an OpenAI-compatible HTTP endpoint on loopback.

External frameworks (LangGraph, AutoGen, LlamaIndex, LOTUS, ...) speak the OpenAI protocol,
so a task run opens a session on the run's one server (`RunContext.openai_endpoint()`), with
its own base URL `http://127.0.0.1:PORT/s/<session>/v1` and key, bound to that run's
`MeteredModel`. Every request goes through `MeteredModel.generate(via_http=True)`, so HTTP
calls are budget-checked, timed, priced, phase-labelled and traced exactly like in-process
calls. A request without the session's key is refused (401): the port is reachable by any
process on the machine.

A call refused by a budget gets HTTP 402 (OpenAI clients retry 429 on their own, and an
exhausted budget must stop them) with `{"error": {"type": "budget_exceeded", "code":
"max_steps", ...}}`; the task then ends with that budget's status, whatever the framework
does with the error. `X-Compare-Agent` labels a call's agent (multi-agent frameworks).

`stream: true` is answered with a minimal server-sent-event stream: the whole completion
in one delta chunk, then the finish chunk, then a usage chunk (no token-by-token streaming;
the model call completes before the first byte is sent).
"""

from __future__ import annotations

import json
import logging
import secrets
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from ..core.context import Endpoint
from ..core.model import MeteredModel, ModelError, ModelResponse
from ..core.safe_load import load_json
from ..core.trace import BudgetExceeded
from .openai_protocol import request_from_openai, response_to_openai, stream_chunks

log = logging.getLogger(__name__)

AGENT_HEADER = "X-Compare-Agent"
# 402 rather than 429: OpenAI-based clients retry 429 on their own; an exhausted budget must stop them.
BUDGET_STATUS = HTTPStatus.PAYMENT_REQUIRED
REQUEST_MAX_BYTES = 64 << 20  # a framework's request body; a larger one is not read (a 400 answers it)


class GatewayError(Exception):
    """An error to send back as an OpenAI-shaped JSON error body."""

    def __init__(self, status: HTTPStatus, message: str, kind: str, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.code = code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": str(self), "type": self.kind, "code": self.code}}


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # a framework's parallel calls must not stall in the listen backlog
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away before its reply (an external agent killed at its deadline) is no error of
        the gateway's: noted, not printed as a traceback on the run's console."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            log.debug("gateway: the client %s went away before its reply", client_address)
            return
        super().handle_error(request, client_address)


@dataclass(frozen=True)
class _Session:
    model: MeteredModel
    key: str
    agent: str | None


class GatewayServer:
    """One loopback HTTP server per run, started on first use; one session per task run.

    `with server.open_session(model) as endpoint:` gives `endpoint.base_url` and `endpoint.api_key`."""

    def __init__(self, port: int = 0) -> None:
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", port), _handler_for(self))  # loopback only
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
            self._sessions[session_id] = _Session(model, secrets.token_urlsafe(24), agent)
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

    def _authorized(self, session_id: str, headers: dict[str, str]) -> _Session:
        session = self._session(session_id)
        given = headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not secrets.compare_digest(given, session.key):
            raise GatewayError(HTTPStatus.UNAUTHORIZED, "invalid API key for this session", "invalid_api_key")
        return session

    def start(self) -> None:
        with self._lock:
            if not self._thread.is_alive() and self._thread.ident is None:
                self._thread.start()

    def stop(self) -> None:
        """Stop the server (also when it never started); idempotent."""
        with self._lock:
            started = self._thread.ident is not None
        if started:
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()

    def __enter__(self) -> GatewayServer:
        self.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # ------------------------------------------------------------ the two endpoints

    def chat_completion(
        self, session_id: str, body: Any, headers: dict[str, str]
    ) -> tuple[MeteredModel, ModelResponse]:
        session = self._authorized(session_id, headers)
        if not isinstance(body, dict):
            raise GatewayError(HTTPStatus.BAD_REQUEST, "request body must be a JSON object", "invalid_request_error")
        try:
            request = request_from_openai(body)
        except ValueError as error:  # pydantic's ValidationError included
            raise GatewayError(HTTPStatus.BAD_REQUEST, str(error), "invalid_request_error") from None
        try:
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
            )
        except BudgetExceeded as error:
            message = f"budget exceeded ({error.status}): {error}"
            raise GatewayError(BUDGET_STATUS, message, "budget_exceeded", error.status) from None
        except ModelError as error:
            code = str(error.status_code) if error.status_code else None
            raise GatewayError(HTTPStatus.BAD_GATEWAY, str(error), "model_error", code) from None
        return session.model, response

    def models(self, session_id: str, headers: dict[str, str]) -> dict[str, Any]:
        model = self._authorized(session_id, headers).model
        entry = {"id": model.alias, "object": "model", "created": 0, "owned_by": "compare"}
        return {"object": "list", "data": [entry]}


def _route(path: str) -> tuple[str, str]:
    """`/s/<session>/v1/<endpoint>` → (session, endpoint)."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if len(parts) >= 4 and parts[0] == "s" and parts[2] == "v1":
        return parts[1], "/".join(parts[3:])
    raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {path!r}", "not_found")


def _handler_for(gateway: GatewayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: frameworks reuse their connections
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:
            try:
                session_id, endpoint = _route(self.path)
                if endpoint != "models":
                    raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {self.path!r}", "not_found")
                headers = {k.lower(): v for k, v in self.headers.items()}
                self._send_json(HTTPStatus.OK, gateway.models(session_id, headers))
            except GatewayError as error:
                self._send_json(error.status, error.body())

        def do_POST(self) -> None:
            body = self._read_json()  # read first so an error reply leaves the connection usable
            try:
                session_id, endpoint = _route(self.path)
                if endpoint != "chat/completions":
                    raise GatewayError(HTTPStatus.NOT_FOUND, f"no such endpoint {self.path!r}", "not_found")
                headers = {k.lower(): v for k, v in self.headers.items()}
                model, response = gateway.chat_completion(session_id, body, headers)
            except GatewayError as error:
                self._send_json(error.status, error.body())
                return
            name = response.provider_model or model.config.model_id
            if isinstance(body, dict) and body.get("stream"):
                self._send_stream(stream_chunks(response, name))
            else:
                self._send_json(HTTPStatus.OK, response_to_openai(response, name))

        def _read_json(self) -> Any:
            length = self.headers.get("Content-Length") or "0"
            if not length.isdigit() or int(length) > REQUEST_MAX_BYTES:
                self.close_connection = True  # its body stays unread
                return None
            raw = self.rfile.read(int(length))
            try:
                return load_json(raw)
            except ValueError:  # not JSON, not UTF-8, or nested too deep
                return None

        def _send_json(self, status: HTTPStatus, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status != HTTPStatus.OK:
                self.send_header("x-should-retry", "false")  # the OpenAI SDK's hint: our provider already retried
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
