"""AutoGen AgentChat 0.7 agents and teams as systems under test.

`AutoGenSystem` is the base of the family: it gives an `OpenAIChatCompletionClient` pointed at the
metered gateway (retries off; a `model_info` because the gateway's model id is not an OpenAI one),
the task's tools as AutoGen tools that keep our JSON schemas and call through the run context, and
runs what `build_agent` returns — an agent or a team — with `run_stream`, stopping the stream as
soon as a tool that ends the task was called (AutoGen's own loop would go on: an AssistantAgent
keeps calling tools until its iteration bound). A user's own team becomes a system by overriding
`build_agent` (README "Add your own framework system").

- `autogen_assistant`: one `AssistantAgent` with our tools and the tool-use workflow's prompt, looping
  over tool calls (`max_tool_iterations` above the step budget, so the budget stops it first).
- `autogen_team`: AutoGen's multi-agent pattern, a `SelectorGroupChat` of the multi-agent workflow's
  specialists (SQL analyst, document researcher, Python analyst, each with its own tools) and its
  report writer (the `answer` tool); a model call picks the next speaker each turn. It ends on
  `FunctionCallTermination` of the answer tool, or `MaxMessageTermination`.

Phases (per agent: every agent's client sends its name as `X-Compare-Agent`, and its tools are
called with that agent's label): a call choosing a tool is DECISION, the tool call EXECUTE, an
agent's call after its failed tool call RETRY, the call that answers GENERATE; the selector's
speaker choices are DECISION calls of agent `selector`.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from abc import abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from ..core import ANSWER_TOOL, Endpoint, prompt_hash
from ..workflows.multi_agent import SPECIALIST_ROLES, SPECIALIST_SYSTEM, SPECIALIST_TOOLS, WRITER_SYSTEM
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
    from autogen_core.models import ChatCompletionClient
    from autogen_core.tools import BaseTool

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = (
    "autogen_agentchat.agents",
    "autogen_agentchat.conditions",
    "autogen_agentchat.messages",
    "autogen_agentchat.teams",
    "autogen_core",
    "autogen_core.tools",
    "autogen_ext.models.openai",
)


# What AutoGen must be told about a model it does not know by name (the gateway serves any model).
GATEWAY_MODEL_INFO = {
    "vision": False,
    "function_calling": True,
    "json_output": True,
    "structured_output": True,
    "family": "unknown",
    "multiple_system_messages": True,
}


def model_client(endpoint: Endpoint, session: AgentSession, *, agent: str | None = None) -> ChatCompletionClient:
    """AutoGen's OpenAI client at the gateway; its own retries are off (the gateway retries). Build it
    inside the run's event loop: its HTTP client is closed there (`AgentSession.aclose`)."""
    check_model_arguments("model_client", endpoint, session, agent)
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    return OpenAIChatCompletionClient(
        model=endpoint.model,
        base_url=endpoint.base_url,
        api_key=endpoint.api_key,
        max_retries=0,
        model_info=GATEWAY_MODEL_INFO,
        default_headers={AGENT_HEADER: agent} if agent else None,
        http_client=session.async_http_client(),
    )


class _AnyArguments(BaseModel):
    """AutoGen validates arguments with a pydantic model; ours validates them (ToolEnvironment)."""

    model_config = ConfigDict(extra="allow")


def autogen_tool(tool: BridgedTool) -> BaseTool[Any, str]:
    """One of our tools as an AutoGen tool: our JSON schema as its schema, its arguments passed as
    they came, the call run in a worker thread (our tools block; AutoGen's loop is asyncio)."""
    check_tool_argument("autogen_tool", tool)
    from autogen_core import CancellationToken
    from autogen_core.tools import BaseTool, ToolSchema

    class BridgedAutoGenTool(BaseTool[_AnyArguments, str]):
        def __init__(self) -> None:
            super().__init__(_AnyArguments, str, tool.name, tool.description)

        @property
        def schema(self) -> ToolSchema:
            return ToolSchema(name=tool.name, description=tool.description, parameters=tool.parameters)  # type: ignore[typeddict-item]

        async def run(self, args: _AnyArguments, cancellation_token: CancellationToken) -> str:
            return await asyncio.to_thread(tool, args.model_dump())

        async def run_json(
            self, args: Mapping[str, Any], cancellation_token: CancellationToken, call_id: str | None = None
        ) -> str:
            return await asyncio.to_thread(tool, dict(args))

    return BridgedAutoGenTool()


class AutoGenSystem(FrameworkSystem):
    """Base of AutoGen systems: override `build_agent` to run your own agent or team."""

    framework_packages: ClassVar[tuple[str, ...]] = ("autogen-agentchat", "autogen-core", "autogen-ext")
    framework_modules = ("autogen_agentchat.agents", "autogen_agentchat.teams", "autogen_ext.models.openai")

    def framework_versions(self) -> dict[str, str]:
        return distribution_versions(*self.framework_packages)

    @abstractmethod
    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        """An AgentChat agent or team (anything with `run_stream(task=...)`) over `session.tools(...)`
        (one list per agent, labelled with the agent's name) and `model_client(endpoint, session, agent=...)`;
        called inside the run's event loop."""

    def drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        # AutoGen warns when the server names another model than asked for; the gateway names the real one.
        warnings.filterwarnings("ignore", message="Resolved model mismatch", category=UserWarning)
        # When a budget stops a team, AutoGen's runtime logs each agent's failure with a traceback on the
        # console; the task's status and error already say what happened.
        for name in ("autogen_core", "autogen_agentchat"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        return asyncio.run(self._drive(session, endpoint))

    async def _drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        from autogen_agentchat.messages import TextMessage

        agent = raise_loop_bound(self.build_agent(endpoint, session), self.max_iterations(session))
        text = None
        stream = agent.run_stream(task=self.prompt(session))
        try:
            async for event in stream:
                if isinstance(event, TextMessage) and event.source != "user":
                    text, session.speaker = event.content, event.source  # agents are labelled by name
                if session.finished:  # the answer is in: AutoGen would go on calling the model
                    break
        finally:
            await stream.aclose()
            await session.aclose()
        return text


def raise_loop_bound(agent: Any, bound: int) -> Any:
    """A lone AssistantAgent stops after `max_tool_iterations` tool rounds (AutoGen's default: 1), which
    would end a subclass's agent with no answer long before the step budget: raise it to `bound`, so that
    the budget (with its own status) decides. Teams keep their agents' turns as built."""
    from autogen_agentchat.agents import AssistantAgent

    if isinstance(agent, AssistantAgent) and getattr(agent, "_max_tool_iterations", bound) < bound:
        agent._max_tool_iterations = bound
    return agent


ASSISTANT = "assistant"


class AutoGenAssistant(AutoGenSystem):
    """AutoGen AgentChat's AssistantAgent with our tools, looping over tool calls until it answers."""

    name = "autogen_assistant"

    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        from autogen_agentchat.agents import AssistantAgent

        return AssistantAgent(
            name=ASSISTANT,
            model_client=model_client(endpoint, session, agent=ASSISTANT),
            tools=[autogen_tool(tool) for tool in session.tools(agent=ASSISTANT)],
            system_message=self.system_prompt,
            max_tool_iterations=self.max_iterations(session),
            reflect_on_tool_use=False,
        )


SELECTOR = "selector"
WRITER = "report_writer"


class AutoGenTeam(AutoGenSystem):
    """An AutoGen SelectorGroupChat of specialists (SQL, documents, Python) and a report writer."""

    name = "autogen_team"
    prompt_version = "1"

    def describe(self) -> dict[str, Any]:
        prompts = prompt_hash(SPECIALIST_SYSTEM, WRITER_SYSTEM, *SPECIALIST_ROLES.values())
        return {**super().describe(), "prompt_hash": prompts, "agents": [*SPECIALIST_TOOLS, WRITER]}

    def build_agent(self, endpoint: Endpoint, session: AgentSession) -> Any:
        from autogen_agentchat.agents import AssistantAgent
        from autogen_agentchat.conditions import FunctionCallTermination, MaxMessageTermination
        from autogen_agentchat.teams import SelectorGroupChat

        agents = []
        for name, tools in self.team(session).items():
            role = SPECIALIST_ROLES.get(name, "give the final answer with the `answer` tool")
            prompt = WRITER_SYSTEM if name == WRITER else SPECIALIST_SYSTEM.format(name=name, role=role)
            agents.append(
                AssistantAgent(
                    name=name,
                    description=f"The {name.replace('_', ' ')}: {role}.",
                    model_client=model_client(endpoint, session, agent=name),
                    tools=[autogen_tool(tool) for tool in tools],
                    system_message=prompt,
                    max_tool_iterations=1 if name == WRITER else 3,  # the writer's turn ends with its answer
                    reflect_on_tool_use=False,
                )
            )
        stop = FunctionCallTermination(ANSWER_TOOL) | MaxMessageTermination(4 * self.max_iterations(session))
        selector = model_client(endpoint, session, agent=SELECTOR)
        return SelectorGroupChat(agents, model_client=selector, termination_condition=stop)

    @staticmethod
    def team(session: AgentSession) -> dict[str, list[BridgedTool]]:
        """Each specialist with the task's tools of its speciality (agents without any are left out);
        the writer gets the answer tool; a tool no specialist claims (DBGorilla's functions, file
        reading) goes to the SQL analyst, the team's generalist."""
        specs = {spec.name for spec in session.ctx.tool_specs()}
        claimed = {name for tools in SPECIALIST_TOOLS.values() for name in tools} | {ANSWER_TOOL}
        team: dict[str, list[BridgedTool]] = {}
        for name, tools in SPECIALIST_TOOLS.items():
            own = [tool for tool in tools if tool in specs]
            if name == "sql_analyst":
                own += sorted(specs - claimed)
            if own:
                team[name] = session.tools(own, agent=name)
        if ANSWER_TOOL in specs:
            team[WRITER] = session.tools([ANSWER_TOOL], agent=WRITER)
        return team
