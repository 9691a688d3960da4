"""Multi-agent workflow: a coordinator routes the work to specialists; a report writer answers.

    ┌─────────────────────┐  instruction  ┌────────────────────────────────────┐
    │ coordinator (LLM)   │ ────────────► │ specialist: ≤ N tool-calling steps │
    │ {next, instruction} │ ◄──────────── │ sql / documents / python           │
    └─────────────────────┘    summary    └────────────────────────────────────┘
               │ "finish" or round bound
               ▼ findings
    ┌─────────────────────┐  `answer`
    │ report_writer (LLM) │ ─────────► Answer
    └─────────────────────┘

Every agent keeps its own message history; what passes between agents is only the
messages, each recorded as a MessageStep. Work is strictly sequential. Phases follow the
shared rules (core.trace.PhaseRules), per agent: a specialist's call after its failed or
refused tool call is RETRY; the writer's calls are GENERATE. Budgets are enforced by the
metered model: when one runs out, `generate` raises BudgetExceeded and the task ends with
that status.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ..core import (
    ANSWER_TOOL,
    Answer,
    BudgetExceeded,
    Message,
    Phase,
    RunContext,
    System,
    Task,
    ToolCall,
    ToolResult,
    ToolSpec,
    prompt_hash,
)
from ..core.safe_load import load_json

LAZY_IMPORTS = ("jsonschema",)  # imported on first use, and before units run on threads (core/registry.py)

MULTI_AGENT_VERSION = "1"
COORDINATOR_SYSTEM = """You coordinate a team of data specialists. Each turn, pick the specialist who should work \
next and give them one short, concrete instruction, or pick "finish" when the findings suffice. You never answer \
yourself: on "finish" the report writer gives the final answer from the findings. Specialists:"""
SPECIALIST_SYSTEM = """You are the {name} of a data team; you {role}. Carry out the coordinator's instruction with \
your tools, one call at a time, reading each result. Then reply with a short summary of what you found: numbers, \
names, definitions."""
WRITER_SYSTEM = """You are the report writer of a data team. Give the final answer to the question with the \
`answer` tool, based on the team's findings. Do not invent numbers the findings do not contain."""
SPECIALIST_ROLES = {
    "sql_analyst": "inspect database schemas and run read-only SQL",
    "document_researcher": "search the company documents for definitions, thresholds and rules",
    "python_analyst": "run Python for calculations",
}

COORDINATOR = "coordinator"
WRITER = "report_writer"
FINISH = "finish"
SPECIALIST_TOOLS: dict[str, tuple[str, ...]] = {
    "sql_analyst": ("get_schema_info", "execute_sql", "list_db", "query_db"),  # the last two: DAB's names
    "document_researcher": ("search_documents",),
    "python_analyst": ("execute_python",),
}
REPLY_MAX_CHARS = 1_000  # a specialist's reply as the coordinator and writer see it: keeps their context small


@dataclass
class _Agent:
    name: str
    tools: list[ToolSpec]
    memory: list[Message]

    @property
    def tool_names(self) -> set[str]:
        return {tool.name for tool in self.tools}


class MultiAgentWorkflow(System):
    """A coordinator routes work to SQL, document and Python specialists; a writer answers."""

    name = "multi_agent"
    # Defaults fit the default step budget (12): 3 × (1 decision + 2 steps) + 2 writer attempts.
    max_rounds: ClassVar[int] = 3  # coordinator decisions before the writer is called regardless
    specialist_steps: ClassVar[int] = 2  # model calls per delegation
    writer_attempts: ClassVar[int] = 2  # a refused `answer` call gets one retry

    def describe(self) -> dict[str, Any]:
        prompts = (COORDINATOR_SYSTEM, SPECIALIST_SYSTEM, WRITER_SYSTEM, *SPECIALIST_ROLES.values())
        return {
            **super().describe(),
            "prompt_version": MULTI_AGENT_VERSION,
            "prompt_hash": prompt_hash(*prompts),
            "max_rounds": self.max_rounds,
            "specialist_steps": self.specialist_steps,
            "writer_attempts": self.writer_attempts,
            "specialists": {name: list(tools) for name, tools in SPECIALIST_TOOLS.items()},
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        # Per-run state lives in a _Team: the runner shares this instance across threads.
        try:
            return _Team(self, ctx).run()
        except BudgetExceeded as limit:
            return Answer(status=limit.status, error=str(limit))  # no answer exists before the writer's call


class _Team:
    """The agents of one task run and what they have found so far."""

    def __init__(self, workflow: MultiAgentWorkflow, ctx: RunContext) -> None:
        self.workflow, self.ctx, self.task = workflow, ctx, ctx.task
        agents = (_specialist(name, ctx) for name in SPECIALIST_TOOLS)
        self.specialists = {agent.name: agent for agent in agents if agent.tools}  # skip those without tools
        roster = "\n".join(f"- {name}: {SPECIALIST_ROLES[name]}" for name in self.specialists)
        self.coordinator = [
            Message(role="system", content=f"{COORDINATOR_SYSTEM}\n{roster}"),
            Message(role="user", content=ctx.task_prompt()),
        ]
        self.decision_schema = _decision_schema([*self.specialists, FINISH])
        self.findings: list[str] = []

    def run(self) -> Answer:
        for _ in range(self.workflow.max_rounds):
            choice, instruction = self._decide()
            if choice == FINISH:
                break
            self._delegate(self.specialists[choice], instruction)
        return self._write()

    def _decide(self) -> tuple[str, str]:
        reply = self.ctx.generate(self.coordinator, response_schema=self.decision_schema, agent=COORDINATOR).message
        self.coordinator.append(reply)
        decision = _parse_decision(reply.content, self.decision_schema)
        if decision is None:  # the routing ends rather than guessing a route: the planner fell back
            self.ctx.warn("planner_fallback", "the coordinator's decision could not be read; routing ended")
            return FINISH, ""
        return decision

    def _delegate(self, agent: _Agent, instruction: str) -> None:
        self.ctx.message(COORDINATOR, agent.name, instruction, phase=Phase.DECISION)
        # The question goes with the first instruction only: the specialist remembers it.
        opening = f"Question: {self.task.question}\n\n" if len(agent.memory) == 1 else ""
        agent.memory.append(Message(role="user", content=f"{opening}Instruction: {instruction}"))
        summary = self._work(agent)[:REPLY_MAX_CHARS]
        self.ctx.message(agent.name, COORDINATOR, summary, phase=Phase.EXECUTE)
        self.findings.append(f"- {agent.name}: {summary}")
        self.coordinator.append(Message(role="user", content=f"Reply from {agent.name}: {summary}"))

    def _work(self, agent: _Agent) -> str:
        """The specialist's own tool loop; returns its summary for the coordinator."""
        last_result = ""
        for _ in range(self.workflow.specialist_steps):
            reply = self.ctx.generate(agent.memory, agent.tools, agent=agent.name).message
            agent.memory.append(reply)
            if not reply.tool_calls:
                return reply.content or "(no findings)"
            results = [self._execute(agent, call) for call in reply.tool_calls]
            last_result = results[-1].content
        # Out of steps without a summary: pass on the last result rather than spend a call on summarizing.
        return f"(step limit reached; last tool result) {last_result}"

    def _execute(self, agent: _Agent, call: ToolCall) -> ToolResult:
        if call.name in agent.tool_names:
            result = self.ctx.call_tool(call.name, call.arguments, agent=agent.name)
        else:  # not run: a specialist may use only its own tools (the model call's trace step names the attempt)
            refusal = f"error: {call.name!r} is not one of your tools ({', '.join(sorted(agent.tool_names))})"
            result = ToolResult(success=False, content=refusal, error=refusal)
            self.ctx.redo(agent.name)
        agent.memory.append(Message(role="tool", content=result.content, tool_call_id=call.id, name=call.name))
        return result

    def _write(self) -> Answer:
        findings = "\n".join(self.findings) or "(none)"
        self.ctx.message(COORDINATOR, WRITER, findings, phase=Phase.GENERATE)
        memory = [
            Message(role="system", content=WRITER_SYSTEM),
            Message(role="user", content=f"{self.ctx.task_prompt()}\n\nFindings of the team:\n{findings}"),
        ]
        tools = self.ctx.tool_specs([ANSWER_TOOL])
        for _ in range(self.workflow.writer_attempts):
            reply = self.ctx.generate(memory, tools, tool_choice="required", agent=WRITER).message
            memory.append(reply)
            answer = self._take_answer(reply, memory)
            if answer is not None:
                return answer
        return Answer(status="no_answer", error=f"{WRITER} made no valid `answer` call")

    def _take_answer(self, reply: Message, memory: list[Message]) -> Answer | None:
        """The answer of the writer's first valid `answer` call; otherwise tell it what went wrong."""
        if not reply.tool_calls:
            memory.append(Message(role="user", content="Give the final answer by calling the `answer` tool."))
            return None
        for call in reply.tool_calls:
            if call.name != ANSWER_TOOL:
                content = f"error: only the `{ANSWER_TOOL}` tool is available to you"
            else:
                result = self.ctx.call_tool(ANSWER_TOOL, call.arguments, agent=WRITER)
                if result.success:
                    return self.ctx.answer_from_tool(call.arguments)
                content = result.content
            memory.append(Message(role="tool", content=content, tool_call_id=call.id, name=call.name))
        return None


def _specialist(name: str, ctx: RunContext) -> _Agent:
    system = SPECIALIST_SYSTEM.format(name=name, role=SPECIALIST_ROLES[name])
    return _Agent(name, ctx.tool_specs(list(SPECIALIST_TOOLS[name])), [Message(role="system", content=system)])


def _decision_schema(choices: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"next": {"type": "string", "enum": choices}, "instruction": {"type": "string"}},
        "required": ["next", "instruction"],
        "additionalProperties": False,
    }


def _parse_decision(content: str | None, schema: dict[str, Any]) -> tuple[str, str] | None:
    """(next, instruction); None for a decision that breaks the schema."""
    import jsonschema  # 0.2 s to import: on the first decision, not when the system is listed

    try:
        decision = load_json(content or "")
        jsonschema.validate(decision, schema)
    except (ValueError, jsonschema.ValidationError):
        return None
    return decision["next"], decision["instruction"]
