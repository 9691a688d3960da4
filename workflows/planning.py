"""Planning workflow: the model writes a whole plan of tool calls first, the plan runs, then the model answers.

    ┌────────────┐ plan  ┌───────────────┐ all steps ok  ┌────────────────┐
    │ plan (LLM) │ ────► │ execute steps │ ────────────► │ answer (LLM)   │ ──► Answer
    │ DECISION   │       │ EXECUTE       │               │ GENERATE       │
    └────────────┘       └───────────────┘               └────────────────┘
                                 │ a step fails or returns nothing     ▲
                                 ▼ (once; never in planning_static)    │
                         ┌──────────────────┐  new plan, its steps     │
                         │ replan (LLM)     │ ─────────────────────────┘
                         │ RETRY            │  run in RETRY
                         └──────────────────┘

The plan is structured output (`response_schema`): up to MAX_PLAN_STEPS steps, each one
tool of the environment with that tool's own argument schema. "planning" replans once, at
the first failing step, for the remaining work; "planning_static" runs its first plan to the
end whatever happens. A step that fails or finds nothing is a rejected result, so the replan
is a RETRY (core.trace.PhaseRules). Replans and failures are noted in the trace as messages
between the executor and the planner. Budgets are enforced by the core: when one runs out, the
task ends with that status.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ValidationError

from ..core import (
    ANSWER_TOOL,
    Answer,
    BudgetExceeded,
    Message,
    Phase,
    RunContext,
    System,
    Task,
    ToolResult,
    ToolSpec,
    prompt_hash,
)
from ..core.tool import to_json

PLANNING_VERSION = "1"
PLAN_SYSTEM = """You are a data analyst agent. Before acting, write a plan: an ordered list of at most 6 tool calls \
that gather everything the question needs (inspect schemas, run read-only SQL, search the company documents for \
definitions and rules the tables do not contain, run Python for calculations). Give each step its purpose, its tool \
and the tool's exact arguments. Do not answer yet: the answer is written after the plan has run."""
REPLAN_PROMPT = """The plan went wrong at {failure}
Write a new plan for the remaining work only (at most 6 steps), fixing the failed step. The steps above already ran."""
ANSWER_SYSTEM = """You are a data analyst agent. Your plan has run; the results of its steps follow the question. \
Answer from these results; do not guess numbers they do not show. Call the `answer` tool."""
ANSWER_REFUSED = "The answer was refused: {error} Call the `answer` tool again with a valid answer."

MAX_PLAN_STEPS = 6
MAX_ANSWER_ATTEMPTS = 2  # like tool_use, the model may correct an answer the answer tool refused


class PlanStep(BaseModel):
    purpose: str = ""
    tool: str
    arguments: dict[str, Any]


class Plan(BaseModel):
    steps: list[PlanStep]


def plan_schema(tools: list[ToolSpec]) -> dict[str, Any]:
    """The plan's JSON schema: each step is one tool with that tool's argument schema.

    One branch per tool (instead of a tool enum and a free `arguments` object) lets a
    schema-constrained model produce only arguments the chosen tool accepts.
    """
    steps = [
        {
            "type": "object",
            # `purpose` first: the model states why before it writes the call.
            "properties": {"purpose": {"type": "string"}, "tool": {"const": t.name}, "arguments": t.parameters},
            "required": ["purpose", "tool", "arguments"],
            "additionalProperties": False,
        }
        for t in tools
    ]
    return {
        "type": "object",
        # At least one step: every task has data to look at, and a schema-constrained small model
        # otherwise always takes the shortcut of an empty plan.
        "properties": {
            "steps": {"type": "array", "items": {"anyOf": steps}, "minItems": 1, "maxItems": MAX_PLAN_STEPS}
        },
        "required": ["steps"],
        "additionalProperties": False,
    }


def read_plan(text: str | None) -> tuple[list[PlanStep], str | None]:
    """The plan's steps, or no steps and why the reply is not a plan."""
    try:
        return Plan.model_validate_json(text or "").steps[:MAX_PLAN_STEPS], None
    except ValidationError as invalid:
        return [], f"the plan itself: it is not a valid plan ({invalid.errors()[0]['msg']})"


def step_failure(result: ToolResult) -> str | None:
    """Why a step's result is no use to the plan, or None: it failed, or it ran and found nothing."""
    if not result.success:
        return result.error or result.content
    data = result.data
    # Zero SQL rows, no passages found, a program that printed nothing.
    found_nothing = data == [] or (isinstance(data, dict) and (data.get("rows") == [] or data.get("stdout") == ""))
    return "it returned no data" if found_nothing or not result.content.strip() else None


def step_message(number: int, step: PlanStep, result: ToolResult) -> Message:
    """A step and its (already truncated) result, as the replan and answer calls read it."""
    status = "ok" if result.success else "failed"
    header = f"Result of step {number} [{status}]: {step.tool} {to_json(step.arguments)}"
    purpose = f"\nPurpose: {step.purpose}" if step.purpose else ""
    return Message(role="user", content=f"{header}{purpose}\n{result.content}")


class PlanningWorkflow(System):
    """A structured plan of tool calls, executed; one replan when a step fails or finds nothing."""

    name = "planning"
    replan: ClassVar[bool] = True

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "prompt_version": PLANNING_VERSION,
            "prompt_hash": prompt_hash(PLAN_SYSTEM, REPLAN_PROMPT, ANSWER_SYSTEM, ANSWER_REFUSED),
            "replan": self.replan,
            "max_replans": 1 if self.replan else 0,
            "max_plan_steps": MAX_PLAN_STEPS,
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        results: list[Message] = []  # one message per step that ran, fed to the replan and answer calls
        try:
            self._plan_and_execute(ctx, results)
            return self._answer(ctx, results)
        except BudgetExceeded as limit:
            return Answer(status=limit.status, error=str(limit))  # no answer is written before the last call

    def _plan_and_execute(self, ctx: RunContext, results: list[Message]) -> None:
        tools = [spec for spec in ctx.tool_specs() if spec.name != ANSWER_TOOL]
        if not tools:
            return
        schema = plan_schema(tools)
        listing = "\n".join(f"- {t.name}: {t.description}" for t in tools)
        messages = [
            Message(role="system", content=PLAN_SYSTEM),
            Message(role="user", content=f"{ctx.task_prompt(answer_format=False)}\n\nTools:\n{listing}"),
        ]
        plan = ctx.generate(messages, response_schema=schema).message
        steps, failure = read_plan(plan.content)
        if not steps:
            ctx.warn("planner_fallback", failure or "the plan has no steps")
        failure = failure or self._execute(ctx, steps, results, stop_at_failure=self.replan)
        if failure and not self.replan:
            ctx.message("executor", "planner", f"static plan, continued past {failure}", phase=Phase.EXECUTE)
        elif failure:
            messages.append(Message(role="assistant", content=plan.content))
            self._replan(ctx, messages, schema, results, failure)

    def _replan(
        self, ctx: RunContext, messages: list[Message], schema: dict[str, Any], results: list[Message], failure: str
    ) -> None:
        """The one replan: a new plan for the remaining work, given the old plan, the results and the failure."""
        ctx.redo()  # the plan's result was rejected: the new plan redoes it
        ctx.message("executor", "planner", f"replanning after {failure}", phase=Phase.RETRY)
        request = Message(role="user", content=REPLAN_PROMPT.format(failure=failure))
        new_plan = ctx.generate([*messages, *results, request], response_schema=schema).message
        steps, failure = read_plan(new_plan.content)
        failure = failure or self._execute(ctx, steps, results, stop_at_failure=False)
        if failure:  # no second replan: the answer is written from what there is
            ctx.message("executor", "planner", f"replanned, but {failure}", phase=Phase.RETRY)

    def _execute(
        self, ctx: RunContext, steps: list[PlanStep], results: list[Message], *, stop_at_failure: bool
    ) -> str | None:
        """Run the steps in order; return the first failure (where a plan that will be replanned stops)."""
        first_failure = None
        for step in steps:
            ctx.check_budget()  # with the budget spent no call could use more results
            result = ctx.call_tool(step.tool, step.arguments)
            number = len(results) + 1
            results.append(step_message(number, step, result))
            failure = step_failure(result)
            if failure and first_failure is None:
                first_failure = f"step {number} ({step.tool}): {failure}"
                if stop_at_failure:
                    break
        return first_failure

    def _answer(self, ctx: RunContext, results: list[Message]) -> Answer:
        return answer_from_results(ctx, results)


def answer_from_results(ctx: RunContext, results: list[Message], system_prompt: str = ANSWER_SYSTEM) -> Answer:
    """The last model call of a planned system (this workflow, the RAG and semantic-operator systems): the
    results → the `answer` tool, which may refuse an answer (a letter that is no option) up to
    MAX_ANSWER_ATTEMPTS times; a function-calling task, which has no answer tool, answers in text."""
    messages = [Message(role="system", content=system_prompt), Message(role="user", content=ctx.task_prompt())]
    messages += results
    answer_tools = ctx.tool_specs([ANSWER_TOOL])
    if not answer_tools:
        return ctx.answer_from_text(ctx.generate(messages).message.content or "")
    error = "no answer"
    for _ in range(MAX_ANSWER_ATTEMPTS):
        reply = ctx.generate(messages, answer_tools, tool_choice="required").message
        call = next((c for c in reply.tool_calls or [] if c.name == ANSWER_TOOL), None)
        if call is None:
            return ctx.answer_from_text(reply.content or "")
        result = ctx.call_tool(ANSWER_TOOL, call.arguments)
        if result.success:
            return ctx.answer_from_tool(call.arguments)
        error = result.error or result.content
        refused = ANSWER_REFUSED.format(error=error)
        messages += [reply, Message(role="tool", content=refused, tool_call_id=call.id, name=ANSWER_TOOL)]
    return Answer(status="no_answer", error=f"answer refused: {error}")


class StaticPlanningWorkflow(PlanningWorkflow):
    """The planning workflow without replanning: failed steps are simply passed on."""

    name = "planning_static"
    kind = "workflow-variant"  # run on request, not by `--workflows all`
    replan = False
