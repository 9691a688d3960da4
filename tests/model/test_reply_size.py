"""Issue 26, item 3: a model reply is capped in size before it is parsed or stored. A scripted loopback
server streams a 100 MB reply (it took the runner to 1.55 GB and ended in a traceback writing
results.parquet); both HTTP providers stop reading at REPLY_MAX_BYTES and fail the call once, clearly."""

from __future__ import annotations

import socket
import threading
import tracemalloc
from collections.abc import Iterator

import pytest

from data_agent_compare.core.model import MeteredModel, ModelConfig, ModelError, RetrySettings
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.providers.http_deadline import REPLY_MAX_BYTES
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openrouter import OpenRouterProvider

from helpers import KEY, QUESTION

REPLY_BYTES = 100 << 20
CHUNK = b'{"choices": [{"message": {"content": "' + b"x" * (1 << 20)


def serve_huge_replies(listener: socket.socket, stop: threading.Event, declare_length: bool) -> None:
    """Answers every request with 100 MB, written a megabyte at a time (never held whole)."""
    while not stop.is_set():
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            connection.recv(65536)
            length = f"Content-Length: {REPLY_BYTES}\r\n" if declare_length else ""
            connection.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{length}\r\n".encode())
            try:
                for _ in range(REPLY_BYTES // len(CHUNK)):
                    connection.sendall(CHUNK)
            except OSError:  # the client stopped reading: what the cap should do
                pass


@pytest.fixture(params=[True, False], ids=["declared length", "no length"])
def huge_server(request: pytest.FixtureRequest) -> Iterator[str]:
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    thread = threading.Thread(target=serve_huge_replies, args=(listener, stop, request.param), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    stop.set()
    listener.close()


@pytest.mark.parametrize("provider_name", ["openai-compatible", "openrouter"])
def test_a_100_mb_reply_is_refused_once_without_being_held(huge_server, provider_name, monkeypatch):
    monkeypatch.setenv("OPENROUTER_API_KEY", KEY)
    provider = OpenAIHTTPProvider() if provider_name == "openai-compatible" else OpenRouterProvider()
    config = ModelConfig(alias="m", provider=provider_name, model_id="m", base_url=huge_server)
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="m"), Budgets())
    retries = RetrySettings(max_attempts=3, base_backoff_s=0.01, max_backoff_s=0.05, attempt_timeout_s=60)
    model = MeteredModel(config, provider, recorder, system="s", retries=retries)
    tracemalloc.start()
    try:
        with pytest.raises(ModelError, match=f"larger than {REPLY_MAX_BYTES >> 20} MB") as failed:
            model.generate(QUESTION)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        provider.close()
    assert failed.value.attempts == 1  # not retried: the same server would send the same reply
    assert peak < 3 * REPLY_MAX_BYTES, f"{peak >> 20} MB held while reading"
