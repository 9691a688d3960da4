"""Agents shipped with the suite as external systems (`systems/external.py`): each runs unchanged in a sandbox
and an environment of its own, reaches the task's tools over MCP and the model through the metered gateway, and
is listed by `compare systems` like every system. They prove that nothing here is adapter- or
Python-specific; docs/bring-your-own-agent.md explains how to bring your own.
"""

from __future__ import annotations

from pathlib import Path

from ..environments import Requirements
from ..external import ExternalSystem

HERE = Path(__file__).resolve().parent


class SmolagentsCodeAgent(ExternalSystem):
    """smolagents 1.26 CodeAgent (DABstep's baseline family) writing Python that calls the MCP tools."""

    name = "smolagents_code"
    agent_dir = HERE
    command = ("{python}", "{agent_dir}/smolagents_agent.py")
    # mcpadapt 0.1.19 (smolagents' MCP client) imports names that mcp 2.x removed: mcp 1.x here.
    requirements = Requirements(
        python=("smolagents[openai]==1.26.0", "mcpadapt==0.1.19", "mcp==1.30.0", "websockets>=13")
    )


class OpenAIAgentsSdkAgent(ExternalSystem):
    """The OpenAI Agents SDK 0.24 Agent with the MCP server as its tool source, stopping at `answer`."""

    name = "openai_agents_sdk"
    agent_dir = HERE
    command = ("{python}", "{agent_dir}/openai_agents_agent.py")
    requirements = Requirements(python=("openai-agents==0.24.0",))


class PydanticAiAgent(ExternalSystem):
    """A pydantic-ai 2.68 Agent with the task's tools as an MCPToolset."""

    name = "pydantic_ai_agent"
    agent_dir = HERE
    command = ("{python}", "{agent_dir}/pydantic_ai_agent.py")
    requirements = Requirements(python=("pydantic-ai-slim[openai,mcp]==2.68.0",))


class TypeScriptMcpAgent(ExternalSystem):
    """A tool-calling loop in TypeScript: @modelcontextprotocol/sdk for the tools, the openai client for the model."""

    name = "typescript_mcp_agent"
    agent_dir = HERE / "typescript"
    agent_files = ("agent.ts",)
    command = ("{node_modules}/.bin/tsx", "{workdir}/agent.ts")
    requirements = Requirements(node=("@modelcontextprotocol/sdk@1.32.2", "openai@7.59.0", "tsx@4.23.15"))


class GoMcpAgent(ExternalSystem):
    """A tool-calling loop in Go (standard library only), built once by the suite with `go build`."""

    name = "go_mcp_agent"
    agent_dir = HERE / "go"
    # cgo off: a static binary needs no C compiler; -trimpath: no build folder in it
    build = "CGO_ENABLED=0 go build -trimpath -o {build_dir}/agent ."
    command = ("{build_dir}/agent",)
