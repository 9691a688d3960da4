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

from compare.model import Message, MeteredModel
from compare.system import System, register_system
from compare.task import Answer, Task, ToolCall, answer_from_text, answer_from_tool
from compare.tools.base import ToolEnvironment
from compare.trace import BudgetExceeded, Phase
from workflows.common import ANSWER_TOOL, prompt_hash, task_prompt

TOOL_USE_VERSION = "1"
TOOL_USE_SYSTEM = """You are a data analyst agent. You answer questions about the data sources listed below by \
calling tools: inspect schemas, run read-only SQL, search the company documents for definitions, thresholds and \
rules that the tables do not contain, and run Python for calculations. Work step by step: one tool call at a time, \
read each result, then decide the next step. Do not guess numbers that a tool can compute. When you know the answer, \
call the `answer` tool."""


@register_system
class ToolUseWorkflow(System):
    name = "tool_use"

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "prompt_version": TOOL_USE_VERSION, "prompt_hash": prompt_hash(TOOL_USE_SYSTEM)}

    def run(self, task: Task, env: ToolEnvironment, model: MeteredModel) -> Answer:
        messages = [Message(role="system", content=TOOL_USE_SYSTEM), Message(role="user", content=task_prompt(task))]
        tools = env.specs()
        while True:
            try:
                reply = model.generate(messages, tools, phase=Phase.DECISION).message
            except BudgetExceeded as limit:
                return Answer(status=limit.status, error=str(limit))
            messages.append(reply)
            if not reply.tool_calls:
                model.recorder.relabel_last_model_call(Phase.GENERATE)
                return answer_from_text(task, reply.content or "")
            answer = self._execute(task, env, model, reply.tool_calls, messages)
            if answer is not None:
                return answer

    def _execute(
        self, task: Task, env: ToolEnvironment, model: MeteredModel, calls: list[ToolCall], messages: list[Message]
    ) -> Answer | None:
        """Run the requested tools in order; return the answer if one of them was `answer`."""
        for call in calls:
            if call.name == ANSWER_TOOL:
                model.recorder.relabel_last_model_call(Phase.GENERATE)
                result = env.call(ANSWER_TOOL, call.arguments, phase=Phase.GENERATE)
                if result.success:
                    return answer_from_tool(task, call.arguments)
            else:
                result = env.call(call.name, call.arguments, phase=Phase.EXECUTE)
            messages.append(Message(role="tool", content=result.content, tool_call_id=call.id, name=call.name))
        return None
