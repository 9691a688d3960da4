"""OpenAI chat-completions JSON ⇄ the gateway's `Message`/`ToolSpec`/`ModelResponse`.

Both directions live here because both are needed: the HTTP provider writes requests
and reads responses; the loopback gateway server reads requests and writes responses.
Keeping one module makes the round trip lossless, so a call metered through HTTP sees
exactly the request the in-process call would have seen.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, Literal

from ..core.model import FieldRefused, Message, ModelRequest, ModelResponse, ToolSpec
from ..core.safe_load import load_json
from ..core.task import ToolCall
from ..core.trace import Usage

log = logging.getLogger(__name__)

ToolChoice = Literal["auto", "required", "none"]
RAW_ARGUMENTS_KEY = "_raw"  # holds tool-call arguments that were not valid JSON


# ---------------------------------------------------------------- messages and tools


def message_to_openai(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.tool_calls:
        out["tool_calls"] = [tool_call_to_openai(call) for call in message.tool_calls]
    if message.tool_call_id is not None:
        out["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        out["name"] = message.name
    if message.role == "tool" and out["content"] is None:
        out["content"] = ""  # tool messages must carry a string
    return out


def message_from_openai(raw: dict[str, Any]) -> Message:
    role = raw.get("role")
    if role == "developer":  # newer OpenAI clients' name for the system role
        role = "system"
    calls = [tool_call_from_openai(call) for call in raw.get("tool_calls") or []]
    return Message(
        role=role,
        content=content_text(raw.get("content")),
        tool_calls=calls or None,
        tool_call_id=raw.get("tool_call_id"),
        name=raw.get("name"),
    )


def content_text(content: Any) -> str | None:
    """Plain text of an OpenAI content field (a string, or a list of typed parts)."""
    if content is None or isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    raw = call.arguments.get(RAW_ARGUMENTS_KEY) if set(call.arguments) == {RAW_ARGUMENTS_KEY} else None
    arguments = raw if isinstance(raw, str) else json.dumps(call.arguments)
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": arguments}}


def tool_call_from_openai(raw: dict[str, Any]) -> ToolCall:
    function = raw.get("function") or {}
    return ToolCall(id=raw.get("id") or "", name=function.get("name") or "", arguments=parse_arguments(function))


def parse_arguments(function: dict[str, Any]) -> dict[str, Any]:
    """Arguments arrive as a JSON string; a model may emit broken JSON, which must not crash the run."""
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some OpenAI-compatible servers send an object
        return arguments
    if not arguments:
        return {}
    try:
        parsed = load_json(arguments)
    except ValueError:  # not JSON, or nested too deep
        parsed = None
    if isinstance(parsed, dict):
        return parsed
    log.warning("tool call %r: arguments are not a JSON object; kept under %r", function.get("name"), RAW_ARGUMENTS_KEY)
    return {RAW_ARGUMENTS_KEY: arguments}


def tool_to_openai(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def tool_from_openai(raw: dict[str, Any]) -> ToolSpec:
    function = raw.get("function") or {}
    return ToolSpec(
        name=function.get("name", ""),
        description=function.get("description") or "",
        parameters=function.get("parameters") or {"type": "object", "properties": {}},
    )


def tool_choice_from_openai(raw: Any) -> ToolChoice:
    """A forced named function is "required" for a provider that reads only the choice's kind; the named
    choice itself travels as the request's `tool_choice` option (`request_from_openai`)."""
    if raw in ("auto", "required", "none"):
        return raw
    return "required" if isinstance(raw, dict) else "auto"


def response_schema_from_openai(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    if raw.get("type") == "json_schema":
        return (raw.get("json_schema") or {}).get("schema") or {"type": "object"}
    if raw.get("type") == "json_object":
        return {"type": "object"}
    return None


# ---------------------------------------------------------------- requests


def request_to_openai(request: ModelRequest, model_id: str) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model_id, "messages": [message_to_openai(m) for m in request.messages]}
    if request.tools:
        body["tools"] = [tool_to_openai(t) for t in request.tools]
        body["tool_choice"] = request.tool_choice
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.seed is not None:
        body["seed"] = request.seed
    if request.response_schema is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": "response",
                "schema": request.response_schema,
                "strict": strict_compatible(request.response_schema),
            },
        }
    body.update(request.options)  # as the system sent them: its own response_format and tool_choice included
    return body


def strict_compatible(schema: Any) -> bool:
    """Whether OpenAI's strict structured-output mode accepts the schema: every object closed
    (additionalProperties false) with all its properties required. Otherwise we ask non-strict
    rather than have the provider refuse the request."""
    if isinstance(schema, list):
        return all(strict_compatible(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        if schema.get("additionalProperties", True) is not False or set(schema.get("required", [])) != set(properties):
            return False
    return all(strict_compatible(value) for key, value in schema.items() if key not in ("enum", "const", "required"))


# The fields of a chat-completions request the gateway governs: the run's model, the request itself, the run's
# generation settings (what was asked is recorded: `ModelCallStep.generation_asked`), and the reply's form (the
# gateway streams the whole completion itself, usage included, from a call made without streaming).
GOVERNED_FIELDS = frozenset(
    {"model", "messages", "tools", "temperature", "top_p", "seed", "max_tokens", "max_completion_tokens"}
    | {"stream", "stream_options"}
)
# Fields no provider behind the gateway gets, whatever it could take: each would step outside the run.
REFUSED_FIELDS = {
    "models": "the run chooses the model (OpenRouter's list of fallback models)",
    "plugins": "an agent reaches the web and files only through its task's tools (OpenRouter's plugins)",
    "web_search_options": "an agent reaches the web only through its task's tools",
    "functions": "the deprecated form of tools: send `tools`",
    "function_call": "the deprecated form of tool_choice: send `tool_choice`",
}


def request_from_openai(body: dict[str, Any]) -> ModelRequest:
    """The gateway's view of an incoming request: every field it does not govern kept as an option, as sent.
    Raises FieldRefused for a field it refuses, ValueError/ValidationError on bad input."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    options = {name: value for name, value in body.items() if name not in GOVERNED_FIELDS}
    for name, why in REFUSED_FIELDS.items():
        if options.get(name) is not None:
            raise FieldRefused(name, why)
    if options.get("n") not in (None, 1):
        raise FieldRefused("n", "the gateway answers one choice per request")
    if not isinstance(options.get("tool_choice"), dict):  # "auto", "required", "none": the request's own field
        options.pop("tool_choice", None)
    return ModelRequest(
        messages=[message_from_openai(m) for m in messages],
        tools=[tool_from_openai(t) for t in body.get("tools") or []],
        tool_choice=tool_choice_from_openai(body.get("tool_choice", "auto")),
        response_schema=response_schema_from_openai(body.get("response_format")),
        temperature=body.get("temperature"),
        max_output_tokens=body.get("max_completion_tokens") or body.get("max_tokens"),
        top_p=body.get("top_p"),
        seed=body.get("seed"),
        options=options,
    )


# ---------------------------------------------------------------- responses


def usage_from_openai(raw: dict[str, Any] | None) -> Usage:
    """The usage a response reported; a count the server did not report is unknown (None), never 0."""
    raw = raw or {}
    details = raw.get("completion_tokens_details") or {}
    prompt_details = raw.get("prompt_tokens_details") or {}
    usage = Usage(
        input_tokens=_count(raw.get("prompt_tokens")),
        output_tokens=_count(raw.get("completion_tokens")),
        reasoning_tokens=details.get("reasoning_tokens") or 0,
        cached_tokens=prompt_details.get("cached_tokens") or 0,
        cache_write_tokens=prompt_details.get("cache_write_tokens") or 0,
    )
    if isinstance(raw.get("cost"), int | float):  # OpenRouter reports the charged USD amount
        usage.cost_usd, usage.cost_source = float(raw["cost"]), "provider"
    return usage


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def usage_to_openai(usage: Usage) -> dict[str, Any]:
    # Frameworks behind the gateway count tokens as integers; the meter keeps the unknown as unknown.
    return {
        "prompt_tokens": usage.input_tokens or 0,
        "completion_tokens": usage.output_tokens or 0,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {
            "cached_tokens": usage.cached_tokens or 0,
            "cache_write_tokens": usage.cache_write_tokens or 0,
        },
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens or 0},
        "cost": usage.cost_usd,
    }


def response_from_openai(body: dict[str, Any]) -> ModelResponse:
    """Parse a successful completion body; raises ValueError when it has no choice."""
    choices = body.get("choices") or []
    if not choices:
        raise ValueError("response has no choices")
    choice = choices[0]
    message = message_from_openai({**(choice.get("message") or {}), "role": "assistant"})
    if message.content == "" and message.tool_calls:
        message.content = None  # providers differ on "" vs null beside tool calls
    return ModelResponse(
        message=message,
        usage=usage_from_openai(body.get("usage")),
        finish_reason=choice.get("finish_reason"),
        provider_model=body.get("model") or "",
        defect=arguments_defect(message),
        logprobs=choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else None,
    )


def arguments_defect(message: Message) -> str | None:
    """Why the reply's tool calls cannot be used as they are: arguments that are not a JSON object."""
    broken = [call.name for call in message.tool_calls or [] if set(call.arguments) == {RAW_ARGUMENTS_KEY}]
    return f"tool-call arguments are not a JSON object: {', '.join(broken)}" if broken else None


def response_to_openai(response: ModelResponse, model: str) -> dict[str, Any]:
    """A complete chat.completion, as strict clients (the OpenAI and OpenRouter SDKs) validate it."""
    message = message_to_openai(response.message)
    message.setdefault("refusal", None)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,  # required (nullable) by the OpenRouter SDK
        "choices": [
            {"index": 0, "message": message, "finish_reason": finish_reason(response), "logprobs": response.logprobs}
        ],
        "usage": usage_to_openai(response.usage),
    }


def finish_reason(response: ModelResponse) -> str:
    if response.message.tool_calls:
        return "tool_calls"
    return response.finish_reason or "stop"


def stream_chunks(response: ModelResponse, model: str) -> list[dict[str, Any]]:
    """The whole response as SSE chunks: one delta with everything, then finish, then usage."""
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }
    delta = message_to_openai(response.message)
    for index, call in enumerate(delta.get("tool_calls") or []):
        call["index"] = index  # stream deltas address tool calls by position
    return [
        {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": None, "logprobs": response.logprobs}]},
        {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason(response), "logprobs": None}]},
        {**head, "choices": [], "usage": usage_to_openai(response.usage)},
    ]
