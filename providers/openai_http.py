"""OpenRouter and any OpenAI-compatible endpoint over plain HTTP (httpx).

Raw httpx rather than the `openrouter` SDK: the gateway server needs the OpenAI JSON
conversion anyway (`openai_protocol`), and owning the request lets us bound retries by
the call's deadline, honour Retry-After, read OpenRouter's `usage.cost`, and keep the
API key out of every error message.
"""

from __future__ import annotations

import email.utils
import os
import time
from typing import Any

import httpx

from ..compare.model import CallContext, ModelConfig, ModelError, ModelProvider, ModelRequest, ModelResponse
from .openai_protocol import request_to_openai, response_from_openai

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
MAX_ATTEMPTS = 3
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0


class _Transient(Exception):
    """A failure worth retrying (rate limit, server error, lost connection)."""

    def __init__(self, message: str, status_code: int | None, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after_s = retry_after_s


class OpenAIHTTPProvider(ModelProvider):
    """Any OpenAI-compatible server (vLLM, Ollama, LM Studio, a proxy) at the alias's base_url.

    POSTs `{base_url}/chat/completions`; one shared (thread-safe) httpx client."""

    name = "openai-compatible"

    def __init__(self, *, base_backoff_s: float = 1.0) -> None:
        self.base_backoff_s = base_backoff_s
        self._client = httpx.Client(timeout=None)  # each request gets the call's remaining time

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        key = self._api_key(config)
        url = self._base_url(config).rstrip("/") + "/chat/completions"
        body = self._body(request, config)
        deadline = time.monotonic() + timeout_s
        for attempt in range(1, MAX_ATTEMPTS + 1):
            try:
                data = self._post(url, body, key, deadline)
                response = self._parse(data)
            except _Transient as failure:
                delay = _backoff_s(self.base_backoff_s, attempt, failure.retry_after_s)
                if attempt == MAX_ATTEMPTS or time.monotonic() + delay >= deadline:
                    raise ModelError(
                        f"{failure} (gave up after {attempt} attempt(s))",
                        status_code=failure.status_code,
                        attempts=attempt,
                    ) from None
                time.sleep(delay)
                continue
            except ModelError as error:
                error.attempts = attempt
                raise
            response.attempts = attempt
            return response
        raise AssertionError("unreachable: the loop returns or raises")

    def close(self) -> None:
        self._client.close()

    # ------------------------------------------------------------ request

    def _api_key(self, config: ModelConfig) -> str | None:
        """Read at call time so a key set after start-up works; never stored on the provider."""
        env = config.api_key_env or (OPENROUTER_KEY_ENV if self.name == "openrouter" else None)
        key = os.environ.get(env) if env else None
        if self.name == "openrouter" and not key:
            raise ModelError(f"OpenRouter needs an API key: set the environment variable {env}", attempts=0)
        return key or None

    def _base_url(self, config: ModelConfig) -> str:
        if config.base_url:
            return config.base_url
        if self.name == "openrouter":
            return OPENROUTER_BASE_URL
        raise ModelError(f"model {config.alias!r}: an openai-compatible provider needs base_url", attempts=0)

    def _body(self, request: ModelRequest, config: ModelConfig) -> dict[str, Any]:
        body = request_to_openai(request, config.model_id)
        if self.name == "openrouter":
            body["usage"] = {"include": True}  # makes OpenRouter report usage.cost
        body.update(config.params)
        return body

    def _post(self, url: str, body: dict[str, Any], key: str | None, deadline: float) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ModelError("model call timed out before the request was sent")
        try:
            reply = self._client.post(url, json=body, headers=headers, timeout=remaining)
        except httpx.TimeoutException as error:
            raise ModelError(f"model call timed out ({type(error).__name__})") from None
        except httpx.TransportError as error:
            raise _Transient(f"connection failed: {type(error).__name__}: {_redact(str(error), key)}", None) from None
        return _checked_json(reply, key)

    # ------------------------------------------------------------ response

    @staticmethod
    def _parse(data: dict[str, Any]) -> ModelResponse:
        try:
            return response_from_openai(data)
        except (ValueError, TypeError, AttributeError) as error:
            raise ModelError(f"malformed completion response: {error}") from None


def _checked_json(reply: httpx.Response, key: str | None) -> dict[str, Any]:
    """The JSON body of a successful reply; errors (also OpenRouter's 200-with-error) raised."""
    try:
        data = reply.json()
    except ValueError:
        data = None
    error = data.get("error") if isinstance(data, dict) else None
    if reply.status_code == 200 and isinstance(data, dict) and not error:
        return data
    status = reply.status_code
    if reply.status_code == 200 and isinstance(error, dict) and isinstance(error.get("code"), int):
        status = error["code"]  # OpenRouter: the upstream failure's code, inside a 200 reply
    message = _redact(_error_message(error, reply), key)
    text = f"HTTP {status}: {message}" if status == reply.status_code else f"HTTP 200, error {status}: {message}"
    if status in RETRYABLE_STATUS or (reply.status_code == 200 and data is None):
        raise _Transient(text, status, _retry_after_s(reply))
    raise ModelError(text, status_code=status)


def _error_message(error: Any, reply: httpx.Response) -> str:
    if isinstance(error, dict) and error.get("message"):
        raw = (error.get("metadata") or {}).get("raw")  # OpenRouter: the upstream provider's own error
        return str(error["message"]) + (f" ({str(raw)[:300]})" if raw else "")
    if isinstance(error, str):
        return error
    return reply.text[:500] or reply.reason_phrase


def _retry_after_s(reply: httpx.Response) -> float | None:
    """Retry-After as seconds or as an HTTP date; None when absent or unreadable."""
    value = reply.headers.get("retry-after")
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


def _backoff_s(base_s: float, attempt: int, retry_after_s: float | None) -> float:
    if retry_after_s is not None:
        return retry_after_s
    return min(MAX_BACKOFF_S, base_s * 2 ** (attempt - 1))


def _redact(text: str, key: str | None) -> str:
    return text.replace(key, "[redacted]") if key else text


class OpenRouterProvider(OpenAIHTTPProvider):
    """OpenRouter: the key from OPENROUTER_API_KEY (or the alias's api_key_env), cost as it reports it."""

    name = "openrouter"

    @classmethod
    def key_variable(cls, config: ModelConfig) -> str | None:
        return config.api_key_env or OPENROUTER_KEY_ENV
