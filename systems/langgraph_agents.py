"""LangGraph and LangChain 1.x agents as systems under test.

`LangGraphSystem` is the base of the family: it gives a LangChain `ChatOpenAI` pointed at the
metered gateway (retries off: the gateway retries), the task's tools as LangChain `StructuredTool`s
whose calls go through the run context, and runs the compiled graph that `build_graph` returns on
`{"messages": [task prompt]}`. A user's own graph becomes a system by overriding `build_graph`
(README "Add your own framework system").

- `langgraph_react`: LangChain 1.x's prebuilt tool-calling agent, `langchain.agents.create_agent`
  (it replaces the deprecated `langgraph.prebuilt.create_react_agent`), with our `answer` tool
  marked `return_direct`, so the graph ends when the agent answers — the framework's twin of `tool_use`.
- `langchain_agent`: in LangChain 1.x the "standard agent" is the same `create_agent` on the same
  LangGraph runtime, so this system differs where LangChain's own features differ: the answer is
  LangChain's structured output (`response_format=ToolStrategy(<the answer schema>)`, the agent's
  artificial output tool) instead of our answer tool, and tool errors come back to the model
  through LangChain's own tool-error handling.
- `langgraph_plan_execute`: a LangGraph `StateGraph` with the planning workflow's prompts:

      START ──► planner ──plan──► executor ◄──┐ next step
                  ▲                  │ ───────┘
                  │ a step failed or │
                  └──found nothing───┤ (one replan)
                                     ▼ plan done
                                  writer ──► END        (a step that ends the task ──► END)

  The planner's plan is structured output (`with_structured_output`, JSON schema: one branch per
  tool with that tool's own arguments); the executor runs one step per visit; the writer is made to
  call the `answer` tool.

Phases come from the trace (`bridge` docstring): the planner's and agents' tool-choosing calls are
DECISION, tool calls EXECUTE, the call after a failed tool call (and the replan) RETRY, the call
that answers GENERATE.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from ..core import ANSWER_TOOL, Endpoint, prompt_hash
from ..workflows.planning import ANSWER_SYSTEM, MAX_PLAN_STEPS, PLAN_SYSTEM, REPLAN_PROMPT, plan_schema
from .bridge import (
    AGENT_HEADER,
    AgentSession,
    BridgedTool,
    FrameworkSystem,
    check_model_arguments,
    check_tool_argument,
    distribution_versions,
)

if TYPE_CHECKING:  # the framework is imported when a task runs, not when `compare systems` lists us
    from langchain_core.language_models import BaseChatModel
    from langchain_core.tools import BaseTool

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = (
    "langchain.agents",
    "langchain.agents.structured_output",
    "langchain_core.messages",
    "langchain_core.tools",
    "langchain_openai",
    "langgraph.graph",
)


def chat_model(endpoint: Endpoint, session: AgentSession, *, agent: str | None = None) -> BaseChatModel:
    """LangChain's OpenAI chat model at the gateway. Its own retries are off: the gateway retries."""
    check_model_arguments("chat_model", endpoint, session, agent)
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model=endpoint.model,
        base_url=endpoint.base_url,
        api_key=endpoint.api_key,
        max_retries=0,
        default_headers={AGENT_HEADER: agent} if agent else None,
        http_client=session.http_client(),
        http_async_client=session.async_http_client(),  # built but unused: graphs run synchronously here
    )


def langchain_tool(tool: BridgedTool) -> BaseTool:
    """One of our tools as a LangChain tool: our JSON schema as its argument schema; a tool that ends
    the task returns directly, which ends LangGraph's agent loop."""
    check_tool_argument("langchain_tool", tool)
    from langchain_core.tools import StructuredTool

    schema = {"type": "object", "properties": {}, **tool.parameters}
    return StructuredTool.from_function(
        func=lambda **arguments: tool(arguments),
        name=tool.name,
        description=tool.description,
        args_schema=schema,
        return_direct=tool.ends_task,
    )


def last_text(messages: list[Any]) -> str | None:
    """The text of the graph's last AI message that carries text (its final answer, if any)."""
    from langchain_core.messages import AIMessage

    for message in reversed(messages):
        if isinstance(message, AIMessage) and not message.tool_calls:
            return message.text if isinstance(message.text, str) else str(message.text)
    return None


class LangGraphSystem(FrameworkSystem):
    """Base of LangGraph/LangChain systems: override `build_graph` to run your own graph."""

    framework_packages: ClassVar[tuple[str, ...]] = ("langgraph", "langchain", "langchain-core", "langchain-openai")
    framework_modules = ("langchain.agents", "langchain_openai", "langgraph.graph")

    def framework_versions(self) -> dict[str, str]:
        return distribution_versions(*self.framework_packages)

    @abstractmethod
    def build_graph(self, model: BaseChatModel, tools: list[BaseTool], session: AgentSession) -> Any:
        """A compiled LangGraph graph whose state has `messages`; it runs on the task prompt."""

    def drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        tools = [langchain_tool(tool) for tool in session.tools()]
        graph = self.build_graph(chat_model(endpoint, session), tools, session)
        limit = {"recursion_limit": 4 * self.max_iterations(session)}  # the step budget stops it first
        state = graph.invoke({"messages": [{"role": "user", "content": self.prompt(session)}]}, config=limit)
        return self.final_text(state, session)

    def final_text(self, state: dict[str, Any], session: AgentSession) -> str | None:
        return last_text(state.get("messages", []))


class LangGraphReactAgent(LangGraphSystem):
    """LangChain 1.x's prebuilt tool-calling agent (create_agent) on LangGraph, answering by our answer tool."""

    name = "langgraph_react"

    def build_graph(self, model: BaseChatModel, tools: list[BaseTool], session: AgentSession) -> Any:
        from langchain.agents import create_agent

        return create_agent(model, tools, system_prompt=self.system_prompt)


class LangChainAgent(LangGraphSystem):
    """LangChain's standard agent (create_agent) with LangChain's structured output as the answer."""

    name = "langchain_agent"

    def build_graph(self, model: BaseChatModel, tools: list[BaseTool], session: AgentSession) -> Any:
        from langchain.agents import create_agent
        from langchain.agents.structured_output import ToolStrategy

        answer = session.ctx.tool_specs([ANSWER_TOOL])
        if not answer:  # a function-calling task: its first tool call is the answer
            return create_agent(model, tools, system_prompt=self.system_prompt)
        schema = {"title": ANSWER_TOOL, "description": answer[0].description, **answer[0].parameters}
        others = [tool for tool in tools if tool.name != ANSWER_TOOL]
        return create_agent(model, others, system_prompt=self.system_prompt, response_format=ToolStrategy(schema))

    def final_text(self, state: dict[str, Any], session: AgentSession) -> str | None:
        structured = state.get("structured_response")
        if isinstance(structured, dict) and not session.finished:
            session.answer_from_structured(structured)  # traced as the answer tool's call
            return None
        return super().final_text(state, session)


class PlanState(TypedDict, total=False):
    messages: list[Any]  # the task prompt (the graph's input)
    steps: list[dict[str, Any]]  # the plan's steps not yet run
    results: list[str]  # one line per step run, fed to the replanner and the writer
    failure: str | None  # why the last step is no use to the plan
    replans: int


class LangGraphPlanExecute(LangGraphSystem):
    """A LangGraph StateGraph: planner → executor loop → writer, with one replan (planning's prompts)."""

    name = "langgraph_plan_execute"
    max_replans: ClassVar[int] = 1

    def describe(self) -> dict[str, Any]:
        prompts = prompt_hash(PLAN_SYSTEM, REPLAN_PROMPT, ANSWER_SYSTEM)
        return {**super().describe(), "prompt_hash": prompts, "max_replans": self.max_replans}

    def build_graph(self, model: BaseChatModel, tools: list[BaseTool], session: AgentSession) -> Any:
        from langgraph.graph import END, START, StateGraph

        runnable = {tool.name: tool for tool in session.tools()}
        step_tools = [spec for spec in session.ctx.tool_specs() if spec.name != ANSWER_TOOL]
        schema = {"title": "plan", "description": "The plan's tool calls, in order.", **plan_schema(step_tools)}
        planner = model.with_structured_output(schema, method="json_schema")
        answer_tools = [t for t in tools if t.name == ANSWER_TOOL]  # none in a function-calling task
        writer = model.bind_tools(answer_tools, tool_choice=ANSWER_TOOL) if answer_tools else model
        listing = "\n".join(f"- {t.name}: {t.description}" for t in step_tools)
        question = f"{session.ctx.task_prompt(answer_format=False)}\n\nTools:\n{listing}"

        def plan(state: PlanState) -> PlanState:
            messages = [("system", PLAN_SYSTEM), ("user", question), *self._progress(state)]
            if state.get("failure"):
                messages.append(("user", REPLAN_PROMPT.format(failure=state["failure"])))
            replans = state.get("replans", -1) + 1
            steps = (planner.invoke(messages) or {}).get("steps") or []
            if not steps:  # the writer answers from what there is
                session.ctx.warn("planner_fallback", "the plan had no usable steps")
            return {"steps": list(steps)[:MAX_PLAN_STEPS], "failure": None, "replans": replans}

        def execute(state: PlanState) -> PlanState:
            step, *rest = state["steps"]
            tool, arguments = str(step.get("tool", "")), dict(step.get("arguments") or {})
            result = session.call_result(tool, arguments) if tool in runnable else None
            content = result.content if result else f"unknown tool {tool!r}"
            failure = None if result and result.success and content.strip() else f"step ({tool}): {content[:300]}"
            line = f"{tool} {arguments}: {'ok' if failure is None else 'failed'}\n{content}"
            return {"steps": rest, "results": [*state.get("results", []), line], "failure": failure}

        def write(state: PlanState) -> PlanState:
            reply = writer.invoke([("system", ANSWER_SYSTEM), ("user", question), *self._progress(state)])
            for call in getattr(reply, "tool_calls", None) or []:
                session.call(call["name"], call["args"])
            return {"messages": [*state.get("messages", []), reply]}

        def after_step(state: PlanState) -> str:
            if session.finished:
                return END
            if state.get("failure") and state.get("replans", 0) < self.max_replans:
                return "planner"
            return "executor" if state.get("steps") else "writer"

        graph = StateGraph(PlanState)
        graph.add_node("planner", plan)
        graph.add_node("executor", execute)
        graph.add_node("writer", write)
        graph.add_edge(START, "planner")
        graph.add_conditional_edges("planner", lambda s: "executor" if s.get("steps") else "writer")
        graph.add_conditional_edges("executor", after_step)
        graph.add_edge("writer", END)
        return graph.compile()

    @staticmethod
    def _progress(state: PlanState) -> list[tuple[str, str]]:
        results = state.get("results") or []
        return [("user", "Results of the steps so far:\n\n" + "\n\n".join(results))] if results else []
