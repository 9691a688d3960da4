"""The OpenAI-compatible provider lends each request a client of one kept-alive connection (`ClientPool`):
requests in flight at once never share a connection pool that each request scans, connections are reused
across requests, and closing the provider closes every client."""

from __future__ import annotations

import contextlib
import ssl
import threading

import pytest

from data_agent_compare.core.model import Message, MeteredModel, ModelConfig, RetrySettings
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.providers.http_deadline import ClientPool
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider

from helpers import FakeOpenAIServer, text_response


def test_eight_threads_of_requests_use_at_most_eight_clients_and_close_them_all():
    provider = OpenAIHTTPProvider()
    with FakeOpenAIServer(latency_s=0.02, default=text_response("ok")) as fake:
        config = ModelConfig(alias="fake", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        failures: list[BaseException] = []

        def calls() -> None:
            recorder = TraceRecorder(Trace(task_id="t", system="s", model="fake"), Budgets(max_steps=100))
            model = MeteredModel(config, provider, recorder, system="s", retries=RetrySettings(max_attempts=1))
            for _ in range(5):
                try:
                    assert model.generate([Message(role="user", content="hi")]).message.content == "ok"
                except BaseException as failure:
                    failures.append(failure)

        threads = [threading.Thread(target=calls) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures
        assert len(fake.requests) == 40
        clients = list(provider._clients._every)
        assert 1 <= len(clients) <= 8  # one per request in flight at most, reused after
    provider.close()
    assert all(client.is_closed for client in clients)


def test_a_client_returned_is_lent_again_before_a_new_one_is_made():
    pool = ClientPool()
    with pool.lend() as first:
        pass
    with pool.lend() as again, pool.lend() as other:
        assert again is first and other is not first
    pool.close()
    assert first.is_closed and other.is_closed


def test_the_pools_clients_load_the_certificate_authorities_once(monkeypatch: pytest.MonkeyPatch):
    """httpx parses the CA bundle for every client it makes (25 ms of CPU); the pool's clients share one."""
    loaded: list[object] = []
    load = ssl.SSLContext.load_verify_locations

    def counted(context: ssl.SSLContext, *args: object, **options: object) -> None:
        loaded.append(args or options)
        load(context, *args, **options)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
    pool = ClientPool()
    with contextlib.ExitStack() as lent:
        clients = [lent.enter_context(pool.lend()) for _ in range(6)]
    assert len({id(client) for client in clients}) == 6
    assert len(loaded) == 1
    pool.close()
