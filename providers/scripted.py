"""A deterministic scripted model for tests: responses come from a Python function.

Like pydantic-ai's FunctionModel: `respond(request, context)` returns the assistant
`Message` (or a full `ModelResponse`). Token counts are computed from the text so
that metering and budgets are exercised exactly as with a real provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ..core.model import CallContext, Message, ModelConfig, ModelProvider, ModelRequest, ModelResponse
from ..core.task import ToolCall
from ..core.trace import Usage

Responder = Callable[[ModelRequest, CallContext], Message | ModelResponse]


def count_tokens(text: str) -> int:
    """A stand-in tokenizer for scripted models: one token per four characters, at least one."""
    return max(1, len(text) // 4)


def request_text(request: ModelRequest) -> str:
    parts = [m.content or "" for m in request.messages]
    parts += [json.dumps(t.model_dump()) for t in request.tools]
    return "\n".join(parts)


def tool_call_message(name: str, arguments: dict, call_id: str = "call_0") -> Message:
    return Message(role="assistant", tool_calls=[ToolCall(id=call_id, name=name, arguments=arguments)])


class ScriptedProvider(ModelProvider):
    """Takes every request option (`request_fields` None): its responder sees them in `request.options`, as a
    server behind the OpenAI-compatible provider would, and may act on them or refuse them as a test needs."""

    name = "scripted"
    bills_nothing = True  # a test double: an alias without a price costs $0 (give one a price to test costs)

    def __init__(self, respond: Responder) -> None:
        self.respond = respond

    def complete(
        self, request: ModelRequest, config: ModelConfig, *, timeout_s: float, context: CallContext
    ) -> ModelResponse:
        produced = self.respond(request, context)
        if isinstance(produced, ModelResponse):
            return produced
        output = (produced.content or "") + "".join(json.dumps(c.arguments) + c.name for c in produced.tool_calls or [])
        usage = Usage(input_tokens=count_tokens(request_text(request)), output_tokens=count_tokens(output))
        finish = "tool_calls" if produced.tool_calls else "stop"
        return ModelResponse(message=produced, usage=usage, finish_reason=finish, provider_model=config.model_id)
