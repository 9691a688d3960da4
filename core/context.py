"""The run context: what a system gets besides the task, for one task run.

    ctx.generate(messages, tools)        a model call: budget-checked, timed, priced, traced
    ctx.call_tool(name, arguments)       a tool call: validated, timed, traced
    with ctx.tool_step(name, args) as s: a step the system carries out itself, traced as a tool call
    ctx.tool_specs(["execute_sql"])      the task's tools as a model sees them
    ctx.task_prompt()                    the task as every system shows it to a model
    ctx.answer_from_tool(arguments)      the Answer of an `answer` tool call
    ctx.answer_from_text(text)           the Answer of a reply's text (that call becomes GENERATE)
    ctx.redo(agent)                      a result was rejected: the agent's next call is a RETRY
    ctx.message(sender, recipient, text) a message between agents of a multi-agent system
    ctx.warn(code, detail)               the system skipped its main step (no operator ran, nothing retrieved)
    with ctx.openai_endpoint() as ep:    ep.base_url, ep.api_key, ep.model for an OpenAI client

Phases follow one set of rules (`trace.PhaseRules`); a system labels nothing itself. Budgets
are enforced by the model and the endpoint: when one runs out, the call raises BudgetExceeded
(an HTTP 402 through the endpoint) and the task ends with the budget's status.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from .model import Message, MeteredModel, ModelResponse, ToolSpec
from .prompt import task_prompt
from .task import Answer, Task, answer_from_text, answer_from_tool
from .tool import SystemStep, ToolEnvironment, ToolResult
from .trace import BudgetExceeded, Budgets, Phase


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint serving this task's metered model (one session per task)."""

    base_url: str  # e.g. http://127.0.0.1:PORT/s/<session>/v1
    api_key: str  # the session's key; the endpoint refuses any other
    model: str  # the model name to send (the alias)


EndpointFactory = Callable[[MeteredModel, str | None], AbstractContextManager[Endpoint]]


class NoEndpointError(RuntimeError):
    """This run has no OpenAI-compatible endpoint (a RunContext built without one)."""


class RunContext:
    """Tools, model, budgets, phases and the endpoint of one task run (module docstring)."""

    def __init__(
        self, task: Task, tools: ToolEnvironment, model: MeteredModel, *, endpoint: EndpointFactory | None = None
    ) -> None:
        self.task = task
        self.tools = tools
        self.model = model
        self._endpoint = endpoint

    @property
    def budgets(self) -> Budgets:
        return self.model.recorder.budgets

    def generate(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None = None,
        *,
        agent: str | None = None,
        tool_choice: Literal["auto", "required", "none"] = "auto",
        response_schema: dict[str, Any] | None = None,
        temperature: float | None = None,
        max_output_tokens: int | None = None,
    ) -> ModelResponse:
        return self.model.generate(
            messages,
            tools,
            agent=agent,
            tool_choice=tool_choice,
            response_schema=response_schema,
            temperature=temperature,
            max_output_tokens=max_output_tokens,
        )

    def call_tool(self, name: str, arguments: dict[str, Any], *, agent: str | None = None) -> ToolResult:
        return self.tools.call(name, arguments, agent=agent)

    def tool_step(
        self, name: str, arguments: dict[str, Any], *, agent: str | None = None
    ) -> AbstractContextManager[SystemStep]:
        """A step the system's own code carries out (a framework's retriever, a semantic operator),
        timed and traced as a call of tool `name`; report the outcome on the yielded step."""
        return self.tools.step(name, arguments, agent=agent)

    def ends_task(self, tool: str) -> bool:
        """Whether calling `tool` gives the final answer (a framework should stop its loop after it)."""
        return self.tools.ends_task(tool)

    @property
    def budget_stop(self) -> BudgetExceeded | None:
        """The budget that refused a model call of this task run, if one did (the task ends with its status)."""
        return self.model.recorder.stopped_by

    def tool_specs(self, names: list[str] | None = None) -> list[ToolSpec]:
        """The task's tools (or those named, in that order, aliases included) as a model sees them."""
        return self.tools.specs(names)

    def task_prompt(self, *, answer_format: bool = True) -> str:
        return task_prompt(self.task, answer_format=answer_format)

    def answer_from_tool(self, arguments: dict[str, Any]) -> Answer:
        return answer_from_tool(self.task, arguments)

    def answer_from_text(self, text: str, *, agent: str | None = None) -> Answer:
        """The answer given as the text of the agent's last model call, which becomes GENERATE."""
        self.model.recorder.mark_answer(agent)
        return answer_from_text(self.task, text)

    def redo(self, agent: str | None = None) -> None:
        """A result of the agent's was rejected: its next model call redoes a step (RETRY)."""
        self.model.recorder.phases.redo(agent)

    def message(self, sender: str, recipient: str, content: str, *, phase: Phase = Phase.DECISION) -> None:
        self.model.recorder.message(sender, recipient, content, phase)

    def warn(self, code: str, detail: str = "") -> None:
        """Say that this run skipped the system's main step and went on (its plan ran no operator, it retrieved
        nothing, its planner fell back): the record carries it and the summary counts it per system and model.
        Codes with a phrase: `trace.WARNING_PHRASES` (no_operator, no_retrieval, no_answer, planner_fallback)."""
        self.model.recorder.warn(code, detail)

    def check_budget(self) -> None:
        """Raise BudgetExceeded if no further model call would be admitted."""
        self.model.recorder.check_budget()

    @contextmanager
    def openai_endpoint(self, *, agent: str | None = None) -> Iterator[Endpoint]:
        """A base URL and key of the gateway's OpenAI-compatible endpoint, bound to this task's
        metered model until the block ends. Calls through it are metered like `generate`; `agent`
        labels them (a client may also send the header X-Compare-Agent per call)."""
        if self._endpoint is None:
            raise NoEndpointError("this run context has no OpenAI-compatible endpoint")
        with self._endpoint(self.model, agent) as endpoint:
            yield endpoint
