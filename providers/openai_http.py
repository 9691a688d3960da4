"""Any OpenAI-compatible endpoint (vLLM, Ollama, LM Studio, a company proxy) over plain HTTP (httpx).

One attempt per `complete`: the retry policy is `MeteredModel`'s, the same for every provider, so
this only classifies what went wrong (`ModelError.retryable`, `kind`, Retry-After). Each attempt
has a hard deadline (`http_deadline`): a server that trickles or hangs cannot hold it past
`timeout_s`. The API key is read at call time and kept out of every error message.

OpenRouter has its own provider on the official SDK (`providers/openrouter.py`).
"""

from __future__ import annotations

import base64
import functools
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from ..core.model import CallContext, ModelConfig, ModelError, ModelProvider, ModelRequest, ModelResponse
from ..core.safe_load import load_json
from ..core.trace import Usage
from .http_deadline import (
    ClientPool,
    deadline,
    malformed,
    post_json,
    redact,
    retry_after_s,
    status_error,
    transport_error,
)
from .openai_protocol import request_to_openai, response_from_openai, usage_from_openai


class OpenAIHTTPProvider(ModelProvider):
    """POSTs `{base_url}/chat/completions`, each request on a client of its own from a pool (`ClientPool`)."""

    name = "openai-compatible"
    default_concurrency = 4  # an unknown server (a hosted API, vLLM, llama-server): a few requests at once
    params_in_body = True  # `params` go into the body: their sampling keys are checked against the run's

    def __init__(self) -> None:
        self._clients = ClientPool()

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        key = os.environ.get(config.api_key_env) if config.api_key_env else None  # read at call time, never stored
        if not config.base_url:
            raise ModelError(f"model {config.alias!r}: an openai-compatible provider needs base_url", attempts=0)
        url = config.base_url.rstrip("/") + "/chat/completions"
        body = {**request_to_openai(request, config.model_id), **config.params}
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if config.basic_auth:  # the alias says the URL's user info is HTTP Basic auth: sent as the header
            url, headers["Authorization"] = basic_auth(url)
        try:
            with deadline(timeout_s, context.retries), self._clients.lend() as client:
                reply = post_json(client, url, body, headers)
        except httpx.TransportError as error:  # timeouts included
            raise transport_error(error, key) from None
        with usage_on_error(reply.content):
            return parse_reply(reply.status_code, reply.content, reply.headers, key)

    def close(self) -> None:
        self._clients.close()


@functools.lru_cache(maxsize=64)
def basic_auth(url: str) -> tuple[str, str]:
    """`url` without its user info, and the Basic auth header value that user info makes."""
    parsed = httpx.URL(url)
    token = base64.b64encode(f"{parsed.username}:{parsed.password}".encode()).decode()
    return str(parsed.copy_with(userinfo=b"")), f"Basic {token}"


def parse_reply(status: int, content: bytes, headers: httpx.Headers, key: str | None) -> ModelResponse:
    """A completion from an HTTP reply, or the ModelError that says what was wrong with it
    (also OpenRouter's 200 whose body is an error)."""
    try:
        data = load_json(content) if content else None
    except ValueError:  # not JSON, not UTF-8, or nested too deep
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if status == 200 and isinstance(data, dict) and not error:
        try:
            return response_from_openai(data)
        except (ValueError, TypeError, AttributeError) as problem:
            raise malformed(str(problem)) from None
    if status == 200 and isinstance(error, dict) and isinstance(error.get("code"), int):
        code = error["code"]  # OpenRouter: the upstream failure's code, inside a 200 reply
        raise status_error(code, f"HTTP 200, error {code}: {redact(error_message(error, content), key)}")
    if status == 200:
        raise malformed("empty body" if not content else redact(f"not JSON: {content[:200]!r}", key))
    text = f"HTTP {status}: {redact(error_message(error, content), key)}"
    raise status_error(status, text, retry_after_s(headers), error.get("code") if isinstance(error, dict) else None)


@contextmanager
def usage_on_error(content: bytes) -> Iterator[None]:
    """An error reply that reports usage was billed: the ModelError raised for it carries that usage."""
    try:
        yield
    except ModelError as failure:
        failure.usage = failure.usage or reported_usage(content)
        raise


def reported_usage(content: bytes) -> Usage | None:
    """The usage an error reply reports (some providers bill a failed generation), else None."""
    try:
        data = load_json(content) if content else None
    except ValueError:  # not JSON, not UTF-8, or nested too deep
        return None
    raw = data.get("usage") if isinstance(data, dict) else None
    return usage_from_openai(raw) if isinstance(raw, dict) and raw else None


def error_message(error: Any, content: bytes) -> str:
    if isinstance(error, dict) and error.get("message"):
        raw = (error.get("metadata") or {}).get("raw")  # OpenRouter: the upstream provider's own error
        return str(error["message"]) + (f" ({str(raw)[:300]})" if raw else "")
    if isinstance(error, str):
        return error
    return content[:500].decode("utf-8", "replace") or "(empty body)"
