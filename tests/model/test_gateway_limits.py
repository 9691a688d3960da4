"""The gateway under a hostile client (issue 35): a body over the cap refused unread with the runner's memory
bounded, JSON with too many elements refused before it is parsed, silent, idle and trickling connections closed
at their deadlines, a flood of connections held to the idle pool, and one session's load never holding up
another session's call. The clients here are raw sockets on loopback, as a hostile agent's would be."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from data_agent_compare.core import (
    Budgets,
    CallContext,
    Endpoint,
    Message,
    MeteredModel,
    ModelRequest,
    Trace,
    TraceRecorder,
)
from data_agent_compare.providers.endpoint import GatewayServer
from data_agent_compare.providers.http_limits import MAX_BODY_BYTES, ServerLimits
from data_agent_compare.providers.scripted import ScriptedProvider

from helpers import SCRIPTED

BODY = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
CLIENT_WAIT_S = 20.0  # a guard against a test hanging, never what a test asserts


def metered(respond=None, budgets: Budgets | None = None) -> MeteredModel:
    recorder = TraceRecorder(Trace(task_id="t", system="s", model=SCRIPTED.alias), budgets or Budgets(max_steps=100))
    answer = respond or (lambda request, context: Message(role="assistant", content="42"))
    return MeteredModel(SCRIPTED, ScriptedProvider(answer), recorder, system="s")


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> Iterator[GatewayServer]:
    limits = getattr(request, "param", None) or ServerLimits()
    server = GatewayServer(limits=limits)
    server.start()
    yield server
    server.stop()


def address(endpoint: Endpoint) -> tuple[str, int, str]:
    host_port, path = endpoint.base_url.split("//", 1)[1].split("/", 1)
    host, port = host_port.split(":")
    return host, int(port), f"/{path}/chat/completions"


def head(endpoint: Endpoint, length: int | None, extra: str = "") -> bytes:
    host, port, path = address(endpoint)
    declared = "" if length is None else f"Content-Length: {length}\r\n"
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {endpoint.api_key}\r\n"
        f"Content-Type: application/json\r\n{declared}{extra}\r\n"
    ).encode()


def connect(endpoint: Endpoint) -> socket.socket:
    host, port, _ = address(endpoint)
    sock = socket.create_connection((host, port), timeout=CLIENT_WAIT_S)
    return sock


def status_of(sock: socket.socket) -> int:
    reply = b""
    while b"\r\n" not in reply:
        piece = sock.recv(65536)
        if not piece:
            break
        reply += piece
    return int(reply.split(b" ", 2)[1]) if reply else 0


def reply_of(sock: socket.socket) -> tuple[int, bytes]:
    """The status and body of one reply (its Content-Length read)."""
    reply = b""
    while b"\r\n\r\n" not in reply and (piece := sock.recv(65536)):
        reply += piece
    head_part, _, body = reply.partition(b"\r\n\r\n")
    length = int(
        next(line.split(b":")[1] for line in head_part.split(b"\r\n") if line.lower().startswith(b"content-length"))
    )
    while len(body) < length and (piece := sock.recv(65536)):
        body += piece
    return int(head_part.split(b" ", 2)[1]), body


def closed_by_server(sock: socket.socket) -> bool:
    """Read until the server closes the connection (True) or the guard runs out (False)."""
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True
    return True


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # Linux: VmHWM starts again from the current RSS


def post(endpoint: Endpoint, body: dict | None = None) -> httpx.Response:
    payload = body or {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"Authorization": f"Bearer {endpoint.api_key}"}
    return httpx.post(f"{endpoint.base_url}/chat/completions", json=payload, headers=headers, timeout=CLIENT_WAIT_S)


# ---------------------------------------------------------------- bodies


def test_a_64_mb_body_is_refused_at_the_cap_unread_and_the_runners_memory_stays_bounded(gateway) -> None:
    body = b"[" + b"[]," * (64 * 2**20 // 3 - 1) + b"[]]"  # the body: 64 MB of empty lists
    model = metered()
    with gateway.open_session(model) as endpoint, connect(endpoint) as sock:
        reset_peak_rss()
        before = rss_kb("VmRSS")
        sock.sendall(head(endpoint, len(body)))
        sent = 0
        try:
            while sent < len(body):
                sent += sock.send(memoryview(body)[sent : sent + 2**20])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered and hung up without reading the rest
        status = status_of(sock)
        growth_mb = (rss_kb("VmHWM") - before) / 1024

    assert status == 413
    assert growth_mb < 32  # the issue measured +3.2 GB: the body is never read, let alone parsed
    assert model.recorder.trace.model_calls == []


def test_json_with_too_many_elements_under_the_byte_cap_is_refused_before_it_is_parsed(gateway) -> None:
    body = b"[" + b"[]," * (15 * 2**20 // 3 - 1) + b"[]]"  # 15 MB, under the cap; parsed it would take ~750 MB
    assert len(body) < MAX_BODY_BYTES
    with gateway.open_session(metered()) as endpoint, connect(endpoint) as sock:
        reset_peak_rss()
        before = rss_kb("VmRSS")
        sock.sendall(head(endpoint, len(body)))
        sock.sendall(body)
        status, reply = reply_of(sock)
        growth_mb = (rss_kb("VmHWM") - before) / 1024

    assert status == 413 and b"JSON elements" in reply
    assert growth_mb < 2.5 * len(body) / 2**20  # the body and one copy without its strings, no parse


def test_a_body_without_a_usable_length_is_refused_clearly(gateway) -> None:
    with gateway.open_session(metered()) as endpoint:
        replies = []
        for extra_head in (head(endpoint, None), head(endpoint, None, "Transfer-Encoding: chunked\r\n")):
            with connect(endpoint) as sock:
                sock.sendall(extra_head)
                replies.append(status_of(sock))
        with connect(endpoint) as sock:
            sock.sendall(head(endpoint, None, "Content-Length: 12ab\r\n"))
            replies.append(status_of(sock))
        with connect(endpoint) as sock:  # a well-formed request on a fresh connection still works
            sock.sendall(head(endpoint, len(BODY)) + BODY)
            replies.append(status_of(sock))

    assert replies == [411, 411, 400, 200]


def test_a_request_without_the_sessions_key_is_refused_before_its_body_is_read(gateway) -> None:
    with gateway.open_session(metered()) as endpoint:
        stranger = Endpoint(endpoint.base_url, "sk-not-the-key", endpoint.model)
        with connect(endpoint) as sock:
            sock.sendall(head(stranger, MAX_BODY_BYTES))  # declares a full body, sends none of it
            assert status_of(sock) == 401
            assert closed_by_server(sock)


# ---------------------------------------------------------------- slow and idle connections

QUICK = ServerLimits(idle_timeout_s=0.4, body_timeout_s=0.4)


@pytest.mark.parametrize("gateway", [QUICK], indirect=True)
def test_a_header_trickle_is_closed_at_its_deadline_however_regular(gateway) -> None:
    """One byte every 0.1 s never lets a read wait the idle timeout, yet the head's deadline closes it."""
    with gateway.open_session(metered()) as endpoint, connect(endpoint) as sock:
        whole = head(endpoint, len(BODY)) + BODY
        sent = 0
        try:
            for byte in whole:
                sock.send(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass

    assert 0 < sent < len(whole)  # cut off long before the head was complete


@pytest.mark.parametrize("gateway", [QUICK], indirect=True)
def test_a_body_trickle_is_closed_at_its_deadline(gateway) -> None:
    model = metered()
    with gateway.open_session(model) as endpoint, connect(endpoint) as sock:
        sock.sendall(head(endpoint, len(BODY)))
        sent = 0
        try:
            for byte in BODY:
                sock.send(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass

    assert 0 < sent < len(BODY)
    assert model.recorder.trace.model_calls == []


@pytest.mark.parametrize("gateway", [QUICK], indirect=True)
def test_silent_and_idle_keep_alive_connections_are_closed(gateway) -> None:
    with gateway.open_session(metered()) as endpoint, connect(endpoint) as silent, connect(endpoint) as used:
        used.sendall(head(endpoint, len(BODY)) + BODY)
        assert status_of(used) == 200  # kept alive after its reply, then sends nothing more

        assert closed_by_server(silent)
        assert closed_by_server(used)


IDLE_POOL = 24


@pytest.mark.parametrize("gateway", [ServerLimits(max_idle_connections=IDLE_POOL)], indirect=True)
def test_a_flood_of_idle_connections_holds_only_the_pool_and_another_session_is_served(gateway) -> None:
    """600 connections that never send a byte: the oldest are closed as new ones come, so the gateway's
    connections (one thread each) stay within the pool, and another session's call goes through."""
    with gateway.open_session(metered()) as flooder, gateway.open_session(metered()) as other:
        threads_before = threading.active_count()
        flood = [connect(flooder) for _ in range(600)]
        try:
            _wait_until(lambda: gateway.connections.counts()["open"] <= IDLE_POOL)
            open_now = gateway.connections.counts()["open"]
            threads_during = threading.active_count()
            reply = post(other)
        finally:
            for sock in flood:
                sock.close()

    assert open_now <= IDLE_POOL
    assert threads_during - threads_before <= IDLE_POOL + 2  # one per connection in the pool, not 600
    assert reply.status_code == 200 and reply.json()["choices"][0]["message"]["content"] == "42"


def _wait_until(condition, guard_s: float = CLIENT_WAIT_S) -> None:
    stop = time.monotonic() + guard_s
    while not condition() and time.monotonic() < stop:
        time.sleep(0.02)


# ---------------------------------------------------------------- one session's load, another session's call

BUSY = ServerLimits(max_requests_per_owner=6, max_calls_per_owner=2)


@pytest.mark.parametrize("gateway", [BUSY], indirect=True)
def test_one_sessions_many_connections_and_calls_do_not_starve_another_sessions_call(gateway) -> None:
    """Session A keeps its calls hanging on many connections; session B's call is answered meanwhile. A's
    requests beyond its limit are refused with 429 (Retry-After), A's calls beyond its two wait their turn."""
    release = threading.Event()
    running, most = [0], [0]
    lock = threading.Lock()

    def hanging(request: ModelRequest, context: CallContext) -> Message:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(CLIENT_WAIT_S)
        with lock:
            running[0] -= 1
        return Message(role="assistant", content="late")

    with (
        gateway.open_session(metered(hanging)) as a,
        gateway.open_session(metered()) as b,
        ThreadPoolExecutor(max_workers=10) as pool,
    ):
        a_calls = [pool.submit(post, a) for _ in range(10)]
        _wait_until(lambda: running[0] == 2 and sum(f.done() for f in a_calls) == 4)
        b_reply = post(b)
        a_done_before_release = [f.result().status_code for f in a_calls if f.done()]
        release.set()
        a_statuses = sorted(f.result().status_code for f in a_calls)
        refused = next(f.result() for f in a_calls if f.result().status_code == 429)

    assert b_reply.status_code == 200 and b_reply.json()["choices"][0]["message"]["content"] == "42"
    assert a_done_before_release == [429] * 4  # when B was answered, none of A's calls had returned
    assert a_statuses == [200] * 6 + [429] * 4
    assert refused.headers["retry-after"] == "1"
    assert most[0] == 2  # A's calls ran two at a time; the other four waited their turn
