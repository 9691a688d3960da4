"""OpenRouter through its official Python SDK (`openrouter`), one attempt per `complete`.

The SDK's own retries are off (by default it retries 5xx for up to an hour and never 429), so
`MeteredModel`'s retry policy applies as for every provider. Its HTTP client is ours
(`http_deadline.deadline_client`), so every attempt has a hard deadline. Usage is read typed from
the SDK's result: tokens, reasoning and cached tokens, and the USD cost OpenRouter charged.

The SDK validates replies strictly (`system_fingerprint` is required, for instance). A reply it
refuses is read by the suite's own lenient parser (`openai_http.parse_reply`): a complete answer
missing an optional-in-practice field is used, an incomplete one (no choices, empty body, not JSON,
OpenRouter's 200 whose body is an error) is a retryable failure.

`OPENROUTER_BASE_URL` overrides OpenRouter's address (a proxy, or a local fake server in tests);
a model alias's `base_url` overrides both.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import os
import threading
import typing
from typing import Any

import httpx
from openrouter import OpenRouter, components
from openrouter import errors as sdk_errors
from pydantic import BaseModel, ConfigDict, create_model

from ..core.model import (
    CallContext,
    FieldRefused,
    ModelConfig,
    ModelError,
    ModelProvider,
    ModelRequest,
    ModelResponse,
)
from ..core.safe_load import load_json
from ..core.trace import Usage
from .http_deadline import deadline, deadline_client, malformed, redact, retry_after_s, status_error, transport_error
from .openai_http import error_message, parse_reply, usage_on_error
from .openai_protocol import (
    GOVERNED_FIELDS,
    arguments_defect,
    request_to_openai,
    response_from_openai,
    usage_from_openai,
)

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("openrouter", "openrouter.chat", "openrouter.utils")


OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"
BASE_URL_ENV = "OPENROUTER_BASE_URL"


def _cache_sdk_models() -> None:
    """Build the SDK's (un)marshalling models once per type, not once per call.

    The SDK (1.3) makes a new pydantic model class with `create_model` for every argument of every call
    and for the reply (`utils.serializers.unmarshal`, `marshal_json`), and resolves the request class's
    type hints again on every call: ~55 ms of CPU per chat call under the GIL, against ~1 ms for the
    HTTP round trip. The same class per type validates exactly the same, and a class's hints do not
    change; built once, they are reused. Applied once, on import."""
    from openrouter import utils
    from openrouter.utils import forms, queryparams, requestbodies, serializers, url, values

    if getattr(serializers, "_compare_models_cached", False):
        return
    config = ConfigDict(populate_by_name=True, arbitrary_types_allowed=True)
    built: dict[tuple[str, Any], type[BaseModel]] = {}

    def model_for(name: str, typ: Any) -> type[BaseModel]:
        try:
            return built[(name, typ)]
        except KeyError:
            model = built[(name, typ)] = create_model(name, body=(typ, ...), __config__=config)
            return model
        except TypeError:  # an unhashable type: build it each time, as the SDK does
            return create_model(name, body=(typ, ...), __config__=config)

    def unmarshal(val: Any, typ: Any, coerce_iterables: bool = True) -> Any:
        if coerce_iterables:
            val = serializers._coerce_iterables_for_type(val, typ)
        return model_for("Unmarshaller", typ)(body=val).body

    def marshal_json(val: Any, typ: Any) -> str:
        if serializers.is_nullable(typ) and val is None:
            return "null"
        dumped = model_for("Marshaller", typ)(body=val).model_dump(by_alias=True, mode="json", exclude_none=True)
        return "" if not dumped else json.dumps(dumped[next(iter(dumped))], separators=(",", ":"))

    hints = functools.lru_cache(maxsize=1024)(typing.get_type_hints)  # per request class, not per call

    serializers.unmarshal = utils.unmarshal = unmarshal  # unmarshal_json and get_pydantic_model call it by name
    for module in (serializers, utils, forms, requestbodies, values):
        module.marshal_json = marshal_json  # type: ignore[attr-defined]
    for module in (forms, queryparams, url):
        module.get_type_hints = hints  # type: ignore[attr-defined]
    serializers._compare_models_cached = True  # type: ignore[attr-defined]


_cache_sdk_models()

# The SDK logs whole requests and replies at debug level: never let that reach a log handler.
_SILENT = logging.getLogger("data_agent_compare.openrouter_sdk")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False
_SILENT.disabled = True


# Parameters of the SDK's `chat.send` that are its own, not fields of the request body.
_SDK_OWN_PARAMETERS = frozenset(
    {"self", "retries", "server_url", "timeout_ms", "http_headers", "http_referer"}
    | {"x_open_router_title", "x_open_router_categories", "x_open_router_metadata"}
)


@functools.cache
def sdk_request_fields() -> frozenset[str]:
    """The request options OpenRouter takes: the parameters of the SDK's `chat.send` (`stop`, `response_format`,
    `logprobs`, `reasoning_effort`, `top_k`, ...), less the fields the gateway governs and the SDK's own."""
    from openrouter.chat import Chat

    return frozenset(inspect.signature(Chat.send).parameters) - GOVERNED_FIELDS - _SDK_OWN_PARAMETERS


def openrouter_base_url(config: ModelConfig | None = None) -> str:
    """The alias's base_url, else $OPENROUTER_BASE_URL, else OpenRouter's."""
    return (config.base_url if config else None) or os.environ.get(BASE_URL_ENV) or OPENROUTER_BASE_URL


class OpenRouterProvider(ModelProvider):
    """OpenRouter: the key from OPENROUTER_API_KEY (or the alias's api_key_env), read at call time."""

    name = "openrouter"
    default_concurrency = 8  # its paid models take many requests at once; `limits:` caps a key's rate
    params_in_body = True  # `params` go into the body: their sampling keys are checked against the run's

    def __init__(self) -> None:
        self._client = deadline_client(follow_redirects=True)
        self._sdks: dict[str, OpenRouter] = {}
        self._lock = threading.Lock()

    @classmethod
    def key_variable(cls, config: ModelConfig) -> str | None:
        return config.api_key_env or OPENROUTER_KEY_ENV

    @classmethod
    def refused_field(cls, request: ModelRequest) -> FieldRefused | None:
        """An option the SDK has no parameter for (`n` above 1, a field of another API) cannot be sent."""
        taken = sdk_request_fields()
        missing = next((name for name in request.asked_options() if name not in taken), None)
        return None if missing is None else FieldRefused(missing, "OpenRouter's SDK has no such parameter")

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        variable = self.key_variable(config)
        key = os.environ.get(variable) if variable else None
        if not key:
            raise ModelError(f"OpenRouter needs an API key: set the environment variable {variable}", attempts=0)
        arguments = self._arguments(request, config)
        try:
            with deadline(timeout_s, context.retries):
                result = self._sdk(openrouter_base_url(config)).chat.send(
                    **arguments, retries=None, http_headers={"Authorization": f"Bearer {key}"}
                )
        except sdk_errors.OpenRouterError as error:
            with usage_on_error((error.body or "").encode()):
                if error.status_code == 200:  # a reply the SDK refused: read leniently, or say what is missing
                    return parse_reply(200, (error.body or "").encode(), error.headers, key)
                raise _status_failure(error, key) from None
        except httpx.TransportError as error:  # timeouts included
            raise transport_error(error, key) from None
        except sdk_errors.NoResponseError as error:
            raise ModelError(f"no response: {error}", retryable=True, kind="connection") from None
        except (TypeError, ValueError) as error:  # the SDK refused the request itself (an unknown or bad param)
            message = f"model {config.alias!r}: the OpenRouter SDK refused the request: {str(error).splitlines()[0]}"
            raise ModelError(redact(message, key), attempts=0) from None  # attempts 0: nothing was sent
        if not isinstance(result, components.ChatResult):
            raise malformed(f"unexpected result {type(result).__name__}")
        return _response(result)

    def prepare(self, config: ModelConfig) -> None:
        """Import the SDK's chat module and build its request and reply models now (~0.6 s on first use),
        before any task's clock starts."""
        from openrouter.utils import serializers

        sdk = self._sdk(openrouter_base_url(config))
        sdk.chat.sdk_configuration  # noqa: B018 - the SDK imports `chat` lazily, on first access
        messages = [{"role": "user", "content": "warm-up"}]
        serializers.get_pydantic_model(messages, typing.List[components.ChatMessages])  # noqa: UP006 - the SDK's own key
        serializers.unmarshal_json(json.dumps(_WARM_UP_REPLY), components.ChatResult)

    def close(self) -> None:
        self._client.close()

    def _sdk(self, base_url: str) -> OpenRouter:
        with self._lock:
            if base_url not in self._sdks:  # retries off; our client, so our deadlines; no debug logging
                self._sdks[base_url] = OpenRouter(
                    server_url=base_url, client=self._client, retry_config=None, debug_logger=_SILENT
                )
            return self._sdks[base_url]

    @staticmethod
    def _arguments(request: ModelRequest, config: ModelConfig) -> dict[str, Any]:
        body = request_to_openai(request, config.model_id)
        for name in set(request.options) - sdk_request_fields():  # at its default (`n: 1`): asks for nothing
            del body[name]
        for name, value in config.params.items():
            if name in ("retries", "server_url", "http_headers", "stream"):
                raise ModelError(f"model {config.alias!r}: params may not set {name!r}", attempts=0)
            body[name] = value
        return body


_WARM_UP_REPLY = {
    "id": "warm-up",
    "object": "chat.completion",
    "created": 0,
    "model": "warm-up",
    "system_fingerprint": None,
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def _response(result: components.ChatResult) -> ModelResponse:
    """The suite's response from the SDK's typed result (message through the shared OpenAI parser)."""
    if not result.choices:
        raise malformed("response has no choices")
    response = response_from_openai(result.model_dump(mode="json", by_alias=True))
    response.usage = usage_from_sdk(result.usage)
    response.defect = arguments_defect(response.message)
    return response


def usage_from_sdk(usage: components.ChatUsage | None) -> Usage:
    """Typed usage: tokens, reasoning and cached tokens, and the cost OpenRouter charged. A reply without
    usage has unknown tokens and cost (as on every OpenAI-compatible server), never 0."""
    if usage is None:
        return usage_from_openai(None)
    completion = usage.completion_tokens_details or None
    prompt = usage.prompt_tokens_details or None
    out = Usage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        reasoning_tokens=(completion.reasoning_tokens if completion else None) or 0,
        cached_tokens=(prompt.cached_tokens if prompt else None) or 0,
        cache_write_tokens=(prompt.cache_write_tokens if prompt else None) or 0,
    )
    if isinstance(usage.cost, int | float):
        out.cost_usd, out.cost_source = float(usage.cost), "provider"
    return out


def _status_failure(error: sdk_errors.OpenRouterError, key: str) -> ModelError:
    """A ModelError for an error status the SDK raised (retryable when transient)."""
    content = (error.body or "").encode()
    try:
        data = load_json(content) if content else None
    except ValueError:
        data = None
    body = data.get("error") if isinstance(data, dict) else None
    text = f"HTTP {error.status_code}: {redact(error_message(body, content), key)}"
    code = body.get("code") if isinstance(body, dict) else None
    return status_error(error.status_code, text, retry_after_s(error.headers), code)
