"""Reflection workflow: an actor works like tool-use; a critic judges every tool result and the draft answer.

    ┌────────────────────┐ tool call ┌──────────┐ result ┌────────────────────┐
    │ actor              │ ────────► │ execute  │ ─────► │ critic (DECISION)  │
    │ DECISION, or RETRY │           └──────────┘        │ accept | revise    │
    │ when redoing       │ ◄──── accept: next step ───── │                    │
    └────────────────────┘ ◄──── revise + reason: redo ─ └────────────────────┘
          │ draft answer (`answer` call / plain text)              ▲
          └────────────────────────────────────────────────────────┘
                        critic accepts the draft ──► Answer

The actor and the critic are the same model with different prompts (agent "actor" /
"critic" in the trace). At most `max_revisions` "revise" verdicts are acted on per task;
after that the actor continues without critique. Budgets are enforced by the metered
model: when one runs out, the task ends with that status and the latest draft answer.

Phases follow the shared rules (core.trace.PhaseRules): a call of the actor that gives the
answer (an `answer` call, or a plain-text draft) is GENERATE; after a failed tool call or a
"revise" verdict the actor's next call is RETRY, and so are the tools it runs; the critic's
calls are DECISION.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..core import (
    ANSWER_TOOL,
    Answer,
    BudgetExceeded,
    Message,
    RunContext,
    System,
    Task,
    ToolCall,
    ToolResult,
    prompt_hash,
)
from ..core.safe_load import load_json

REFLECTION_VERSION = "1"
ACTOR_SYSTEM = """You are a data analyst agent. You answer questions about the data sources listed below by \
calling tools: inspect schemas, run read-only SQL, search the company documents for definitions, thresholds and \
rules that the tables do not contain, and run Python for calculations. Work step by step: one tool call at a time, \
read each result, then decide the next step. Do not guess numbers that a tool can compute. When you know the answer, \
call the `answer` tool. A reviewer checks each step; when it asks you to redo one, fix that step."""
CRITIC_SYSTEM = """You review one step of a data analyst agent. Reply "accept" if the step worked and helps answer \
the question. Reply "revise" if it failed, returned no rows, or does not fit the question, and give the reason in \
one sentence: quote the error and say what to change."""
STEP_REVIEW = "Step: {tool} {arguments}\nResult ({status}):\n{content}"
DRAFT_REVIEW = "Evidence:\n{evidence}\n\nDraft answer: {answer}"
REVISE_REQUEST = "Reviewer: {reason}\nRedo the rejected step with a corrected tool call or answer."
NOT_RUN = "not run: the reviewer asked to redo an earlier step first"

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["accept", "revise"]}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
ACTOR, CRITIC = "actor", "critic"
EVIDENCE_RESULTS = 3  # latest tool results the critic sees when judging a draft answer
EVIDENCE_CHARS = 600  # of each, to keep the critic's prompt small


class ReflectionWorkflow(System):
    """An actor and a critic: the critic judges every tool result and the draft answer."""

    name = "reflection"
    max_revisions: int = 3  # "revise" verdicts acted on per task

    def __init__(self, max_revisions: int | None = None) -> None:
        if max_revisions is not None:
            if max_revisions < 0:
                raise ValueError("max_revisions must be >= 0")
            self.max_revisions = max_revisions

    def describe(self) -> dict[str, Any]:
        texts = (ACTOR_SYSTEM, CRITIC_SYSTEM, STEP_REVIEW, DRAFT_REVIEW, REVISE_REQUEST, NOT_RUN)
        return {
            **super().describe(),
            "prompt_version": REFLECTION_VERSION,
            "prompt_hash": prompt_hash(*texts, json.dumps(VERDICT_SCHEMA, sort_keys=True)),
            "max_revisions": self.max_revisions,
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        # One episode per run: the system instance is shared by concurrent tasks.
        episode = _Episode(ctx, revisions_left=self.max_revisions)
        try:
            return episode.run()
        except BudgetExceeded as limit:
            answer = episode.draft or Answer()
            return answer.model_copy(update={"status": limit.status, "error": str(limit)})


@dataclass
class _Episode:
    ctx: RunContext
    revisions_left: int
    draft: Answer | None = None  # the latest draft answer, returned as is when a budget ends the run
    messages: list[Message] = field(default_factory=list)

    def run(self) -> Answer:
        self.messages = [
            Message(role="system", content=ACTOR_SYSTEM),
            Message(role="user", content=self.ctx.task_prompt()),
        ]
        tools = self.ctx.tool_specs()
        while True:
            reply = self.ctx.generate(self.messages, tools, agent=ACTOR).message
            self.messages.append(reply)
            answer = self._act(reply)
            if answer is not None:
                return answer

    def _act(self, reply: Message) -> Answer | None:
        """Carry out the actor's reply with the critic's judgement; return the accepted answer, if any."""
        calls = reply.tool_calls or []
        if not calls:
            self.draft = self.ctx.answer_from_text(reply.content or "", agent=ACTOR)
            return self._verdict_on_draft(reply.content or "", [])
        for index, call in enumerate(calls):
            result = self._call(call)
            if call.name == ANSWER_TOOL and result.success:
                self.draft = self.ctx.answer_from_tool(call.arguments)
                return self._verdict_on_draft(
                    json.dumps(call.arguments.get("answer"), ensure_ascii=False), calls[index + 1 :]
                )
            reason = self._critique(_step_review(call, result))
            if reason is not None:
                self._revise(reason, calls[index + 1 :])
                return None
        return None

    def _call(self, call: ToolCall) -> ToolResult:
        result = self.ctx.call_tool(call.name, call.arguments, agent=ACTOR)
        self.messages.append(Message(role="tool", content=result.content, tool_call_id=call.id, name=call.name))
        return result

    def _verdict_on_draft(self, answer: str, unrun: list[ToolCall]) -> Answer | None:
        """The draft is final unless the critic asks for a revision."""
        reason = self._critique(DRAFT_REVIEW.format(evidence=self._evidence(), answer=answer))
        if reason is None:
            return self.draft
        self._revise(reason, unrun)
        return None

    def _critique(self, subject: str) -> str | None:
        """The critic's reason to redo the step, or None when it accepts (or no revisions are left)."""
        if self.revisions_left == 0:
            return None
        messages = [
            Message(role="system", content=CRITIC_SYSTEM),
            Message(role="user", content=f"{self.ctx.task_prompt()}\n\n{subject}"),
        ]
        reply = self.ctx.generate(messages, response_schema=VERDICT_SCHEMA, agent=CRITIC)
        return revise_reason(reply.message.content)

    def _revise(self, reason: str, unrun: list[ToolCall]) -> None:
        """Send the critic's reason to the actor, whose next call then redoes the step."""
        self.revisions_left -= 1
        self.ctx.redo(ACTOR)
        # Every tool call of the reply needs a result before the next user turn (chat-API rule).
        self.messages += [Message(role="tool", content=NOT_RUN, tool_call_id=c.id, name=c.name) for c in unrun]
        self.messages.append(Message(role="user", content=REVISE_REQUEST.format(reason=reason)))
        self.ctx.message(CRITIC, ACTOR, reason)

    def _evidence(self) -> str:
        results = [m for m in self.messages if m.role == "tool" and m.name != ANSWER_TOOL and m.content != NOT_RUN]
        lines = [f"{m.name}: {(m.content or '')[:EVIDENCE_CHARS]}" for m in results[-EVIDENCE_RESULTS:]]
        return "\n".join(lines) or "(no tool results)"


def _step_review(call: ToolCall, result: ToolResult) -> str:
    status = "ok" if result.success else "failed"
    arguments = json.dumps(call.arguments, ensure_ascii=False)
    return STEP_REVIEW.format(tool=call.name, arguments=arguments, status=status, content=result.content)


def revise_reason(content: str | None) -> str | None:
    """The reason of a "revise" verdict; None for "accept" or output that is not a verdict
    (an unreadable verdict gives no grounds to redo work)."""
    try:
        verdict = load_json(content or "")
    except ValueError:  # not JSON, or nested too deep
        return None
    if not isinstance(verdict, dict) or verdict.get("verdict") != "revise":
        return None
    return str(verdict.get("reason") or "").strip() or "the reviewer rejected this step without a reason"
