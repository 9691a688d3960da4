"""Tool-use (ReAct) workflow: the model picks a tool, reads its result, repeats, then answers.

    ┌──────────────┐  tool call   ┌─────────────┐
    │ decide (LLM) │ ───────────► │ execute     │ ─┐
    └──────────────┘ ◄─────────── └─────────────┘  │ result
           │ `answer` call / plain text            │
           ▼                                       │
        Answer  ◄──────────────────────────────────┘

Budgets (steps, tokens, wall time) are enforced by the metered model: when one runs
out, `generate` raises BudgetExceeded and the task ends with that status.
"""

from __future__ import annotations

from typing import Any

from ..core import ANSWER_TOOL, Answer, BudgetExceeded, Message, RunContext, System, Task, ToolCall, prompt_hash

TOOL_USE_VERSION = "1"
TOOL_USE_SYSTEM = """You are a data analyst agent. You answer questions about the data sources listed below by \
calling tools: inspect schemas, run read-only SQL, search the company documents for definitions, thresholds and \
rules that the tables do not contain, and run Python for calculations. Work step by step: one tool call at a time, \
read each result, then decide the next step. Do not guess numbers that a tool can compute. When you know the answer, \
call the `answer` tool."""


class ToolUseWorkflow(System):
    """ReAct: the model calls one tool at a time, reads the result, repeats, then answers."""

    name = "tool_use"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "prompt_version": TOOL_USE_VERSION, "prompt_hash": prompt_hash(TOOL_USE_SYSTEM)}

    def run(self, task: Task, ctx: RunContext) -> Answer:
        messages = [Message(role="system", content=TOOL_USE_SYSTEM), Message(role="user", content=ctx.task_prompt())]
        tools = ctx.tool_specs()
        while True:
            try:
                reply = ctx.generate(messages, tools).message
            except BudgetExceeded as limit:
                return Answer(status=limit.status, error=str(limit))
            messages.append(reply)
            if not reply.tool_calls:
                return ctx.answer_from_text(reply.content or "")
            answer = self._execute(ctx, reply.tool_calls, messages)
            if answer is not None:
                return answer

    def _execute(self, ctx: RunContext, calls: list[ToolCall], messages: list[Message]) -> Answer | None:
        """Run the requested tools in order; return the answer if one of them was `answer`."""
        for call in calls:
            result = ctx.call_tool(call.name, call.arguments)
            if call.name == ANSWER_TOOL and result.success:
                return ctx.answer_from_tool(call.arguments)
            messages.append(Message(role="tool", content=result.content, tool_call_id=call.id, name=call.name))
        return None
