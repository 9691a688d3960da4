"""HTTP with a hard deadline per attempt, shared by the HTTP providers (httpx and the OpenRouter SDK).

httpx's read timeout bounds the silence between two bytes, not a request: a server trickling one
byte every 0.25 s keeps a request alive forever. Here every socket operation (connect, TLS, write,
read) gets `min(its own timeout, time left before the deadline)`, and one that starts after the
deadline fails at once, so no request outlives its deadline by more than one scheduling delay —
headers and body alike, without a watchdog thread. The deadline and the per-operation timeouts are
set around a request by `deadline(...)` (a context variable: httpx's sync client does its I/O in the
calling thread).
"""

from __future__ import annotations

import contextlib
import contextvars
import email.utils
import functools
import json
import re
import ssl
import threading
import time
import typing
from collections.abc import Iterator
from dataclasses import dataclass

import httpcore
import httpx
import pydantic_core

from ..core.model import ModelError, RetrySettings
from ..core.redaction import redact_credentials


@dataclass(frozen=True)
class _Limits:
    deadline: float  # time.monotonic()
    connect_s: float
    read_s: float  # also bounds a write


_limits: contextvars.ContextVar[_Limits | None] = contextvars.ContextVar("compare_http_limits", default=None)


@contextlib.contextmanager
def deadline(timeout_s: float, settings: RetrySettings) -> Iterator[None]:
    """Every socket operation of requests made in this block ends by `timeout_s` from now."""
    token = _limits.set(_Limits(time.monotonic() + timeout_s, settings.connect_timeout_s, settings.read_timeout_s))
    try:
        yield
    finally:
        _limits.reset(token)


def _bounded(timeout: float | None, own: str, expired: type[Exception]) -> float | None:
    limits = _limits.get()
    if limits is None:
        return timeout
    left = limits.deadline - time.monotonic()
    if left <= 0:
        raise expired("the attempt's deadline passed")
    bound = min(left, limits.connect_s if own == "connect" else limits.read_s)
    return bound if timeout is None else min(timeout, bound)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, stream: httpcore.NetworkStream) -> None:
        self._stream = stream

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, "read", httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, "read", httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, "connect", httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, bounded))

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self) -> None:
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, "connect", httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_tcp(host, port, bounded, local_address, socket_options))

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        bounded = _bounded(timeout, "connect", httpcore.ConnectTimeout)
        return _DeadlineStream(self._backend.connect_unix_socket(path, bounded, socket_options))

    def sleep(self, seconds: float) -> None:
        self._backend.sleep(seconds)


REPLY_MAX_BYTES = 16 << 20  # one reply's body: a completion is kilobytes; 100 MB took the runner to 1.5 GB


class ReplyTooLarge(httpx.TransportError):
    """A reply whose body passed REPLY_MAX_BYTES: reading stopped there (not retried, `transport_error`)."""

    def __init__(self) -> None:
        super().__init__(f"the reply is larger than {REPLY_MAX_BYTES >> 20} MB; refused before parsing")


class _CappedBody(httpx.SyncByteStream):
    """A reply body that fails once more than REPLY_MAX_BYTES arrived (as sent, before decompression)."""

    def __init__(self, stream: typing.Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self._stream:
            received += len(chunk)
            if received > REPLY_MAX_BYTES:
                raise ReplyTooLarge()
            yield chunk

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class _CappedTransport(httpx.BaseTransport):
    """The client's transport, with every reply body capped (the OpenRouter SDK reads bodies itself)."""

    def __init__(self, transport: httpx.BaseTransport) -> None:
        self._transport = transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self._transport.handle_request(request)
        length = response.headers.get("content-length", "")
        if length.isdigit() and int(length) > REPLY_MAX_BYTES:
            response.close()
            raise ReplyTooLarge()
        response.stream = _CappedBody(response.stream)
        return response

    def close(self) -> None:
        self._transport.close()


def deadline_client(keepalive: int = 64, **options: typing.Any) -> httpx.Client:
    """A thread-safe httpx client whose requests obey `deadline(...)`; no timeouts of its own, at most
    `keepalive` idle connections kept. Proxies from the environment (HTTPS_PROXY, ...) are honoured as by
    any httpx client.

    httpx has no public hook for the network backend: each transport's pool gets ours (httpx 0.28,
    httpcore 1.0; checked here so that a change fails loudly rather than losing the deadline)."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=keepalive)
    client = httpx.Client(timeout=None, limits=limits, **options)
    for transport in [client._transport, *(t for t in client._mounts.values() if t is not None)]:
        pool = getattr(transport, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or not hasattr(pool, "_network_backend"):
            raise RuntimeError("httpx's transport changed: cannot install the deadline network backend")
        pool._network_backend = _DeadlineBackend()
    client._transport = _CappedTransport(client._transport)
    client._mounts = {pattern: _CappedTransport(t) if t else t for pattern, t in client._mounts.items()}
    if not callable(getattr(client, "_transport_for_url", None)):  # `post_json` sends through it
        raise RuntimeError("httpx's client changed: no _transport_for_url to send a request through")
    return client


class ClientPool:
    """Deadline clients of one kept-alive connection each, lent one per request and returned after it.

    One shared httpx client makes every request check each idle connection of its pool (a `poll` system
    call each, under the pool's lock): at 256 requests in flight that is 256 system calls and a queue on
    one lock per request, which cost more CPU than the request itself (issue 29). A client lent alone
    checks its one connection. The most recently returned client is lent first, so its connection is warm.

    The clients share one TLS context: httpx builds one per client by parsing the CA bundle, 25 ms of CPU
    each, which at 256 requests in flight cost a run 6.4 s of CPU as its units started (even over plain HTTP)."""

    def __init__(self, **options: typing.Any) -> None:
        self._options = options
        self._idle: list[httpx.Client] = []
        self._every: list[httpx.Client] = []
        self._lock = threading.Lock()

    @functools.cached_property
    def _client_options(self) -> dict[str, typing.Any]:
        """The options each client is made with, the TLS context built once (as httpx would: from the
        environment's SSL_CERT_FILE or SSL_CERT_DIR, else certifi's bundle), unless the caller gave one."""
        if "verify" in self._options:
            return self._options
        trust_env = self._options.get("trust_env", True)
        return {**self._options, "verify": httpx.create_ssl_context(trust_env=trust_env)}

    @contextlib.contextmanager
    def lend(self) -> Iterator[httpx.Client]:
        with self._lock:
            client = self._idle.pop() if self._idle else None
            options = self._client_options if client is None else {}
        if client is None:
            client = deadline_client(keepalive=1, **options)
            with self._lock:
                self._every.append(client)
        try:
            yield client
        finally:
            with self._lock:
                self._idle.append(client)

    def close(self) -> None:
        with self._lock:
            every, self._every, self._idle = self._every, [], []
        for client in every:
            client.close()


def post_json(client: httpx.Client, url: str, body: object, headers: dict[str, str]) -> httpx.Response:
    """`client.post(url, json=body, headers=headers)` without what an API call never uses: the client's
    cookie jar, auth flow, redirect loop and URL merging, which cost a third of httpx's CPU per call. The
    request goes through the transport the client picks for the URL (a proxy from the environment
    included), with the client's default headers; errors are httpx's, as from `post`."""
    payload = pydantic_core.to_json(body)  # compact UTF-8 JSON, as json.dumps writes it, in a third of its time
    if b"NaN" in payload or b"Infinity" in payload:  # to_json writes these as bare words: json.dumps refuses them
        payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    request = httpx.Request("POST", _parsed(url), content=payload, headers={**_json_headers(client), **headers})
    response = client._transport_for_url(request.url).handle_request(request)
    response.request = request
    try:
        response._content = _decoded_body(response)  # what Response.read() sets, with a cap on what it holds
    finally:
        response.close()
    return response


def _decoded_body(response: httpx.Response) -> bytes:
    """The body after decompression, at most REPLY_MAX_BYTES of it (a gzip bomb stays small on the wire)."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > REPLY_MAX_BYTES:
            raise ReplyTooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


@functools.lru_cache(maxsize=256)
def _parsed(url: str) -> httpx.URL:
    """The URL parsed once: httpx parses a string on every request."""
    return httpx.URL(url)


@functools.lru_cache(maxsize=16)
def _json_headers(client: httpx.Client) -> dict[str, str]:
    """The client's default headers (User-Agent, Accept-Encoding, ...) and the JSON content type, once per client."""
    return {**client.headers, "Content-Type": "application/json"}


# ---------------------------------------------------------------- classifying failures

RETRYABLE_STATUS = frozenset({408, 429, 500, 502, 503, 504, 520, 522, 524, 529})


REQUEST_STATUS = frozenset({400, 413, 422})  # the provider refused what was sent: the system's failure
_CONTEXT_OVERFLOW = re.compile(
    r"context.?length|context.?window|maximum context|too many (?:input )?tokens|prompt is too long|"
    r"input is too long|reduce the length|exceeds? the (?:model'?s? )?(?:maximum|max)",
    re.I,
)
_CONTENT_FILTER = re.compile(r"content.?filter|content.?policy|content_policy_violation|moderation|flagged", re.I)


def status_kind(status: int, text: str = "") -> str:
    """The failure's kind (`FailedAttempt.kind`); a refused request (400/413/422) says what was refused, from
    the error's text and code, so that the unit ends with the system's own status (`model.REQUEST_FAULTS`)."""
    if status == 429:
        return "rate_limit"
    if status >= 500:
        return "server_error"
    if status not in REQUEST_STATUS:
        return "client_error"  # 401, 402, 403, 404: the key, the account or the model alias: the run's setup
    if status == 413 or _CONTEXT_OVERFLOW.search(text):
        return "context_overflow"
    return "content_filter" if _CONTENT_FILTER.search(text) else "invalid_request"


def status_error(status: int, text: str, retry_after_s: float | None = None, code: object = None) -> ModelError:
    """A ModelError for an HTTP error status: retryable when the status is transient. `code` is the error's
    own code when the body has one (OpenAI's `context_length_exceeded`): it helps tell what was refused."""
    return ModelError(
        text,
        status_code=status,
        retryable=status in RETRYABLE_STATUS,
        kind=status_kind(status, f"{text} {code or ''}"),
        retry_after_s=retry_after_s,
    )


def transport_error(error: Exception, key: str | None) -> ModelError:
    """A ModelError for a timeout or a lost connection (both retryable); a reply too large is not retried."""
    if isinstance(error, ReplyTooLarge):
        return ModelError(f"malformed completion response: {error}", retryable=False, kind="malformed")
    if isinstance(error, httpx.TimeoutException):
        return ModelError(f"timed out ({type(error).__name__}: {error})", retryable=True, kind="timeout")
    return ModelError(
        f"connection failed: {type(error).__name__}: {redact(str(error), key)}", retryable=True, kind="connection"
    )


def malformed(message: str) -> ModelError:
    """A reply that arrived but is incomplete (no choices, empty body, not JSON): retryable."""
    return ModelError(f"malformed completion response: {message}", retryable=True, kind="malformed")


def retry_after_s(headers: httpx.Headers) -> float | None:
    """Retry-After as seconds or as an HTTP date; None when absent or unreadable."""
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def redact(text: str, key: str | None) -> str:
    """`text` as an error may carry it: the one redaction (`core/redaction.py`), the provider's own key
    masked also when nothing registered it (a provider used from Python, outside a run)."""
    return redact_credentials(text, key)
