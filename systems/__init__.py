"""Systems under test beyond our own workflows: external frameworks, semantic-operator pipelines, RAG.

The framework adapters share one bridge (`systems/bridge.py`): the metered gateway as their only model,
our tools with their JSON schemas and every call through the run context, budgets stopping them with
the budget's status, no network. One base class per framework family turns a user's own graph, team
or agent into a system by overriding one method:

    LangGraphSystem.build_graph(model, tools, session)   a compiled LangGraph graph (systems/langgraph_agents.py)
    AutoGenSystem.build_agent(endpoint, session)         an AgentChat agent or team (systems/autogen_agents.py)
    LlamaIndexSystem.build_agent(endpoint, session)      a LlamaIndex agent workflow (systems/llamaindex_agents.py)

Each system is registered by name in pyproject.toml (entry points `data_agent_compare.systems`).
Framework imports stay inside the functions a run calls: `compare systems` imports every system
module to list it, and must stay fast.
"""

from .autogen_agents import AutoGenSystem, autogen_tool, model_client
from .bridge import AgentSession, BridgedTool, FrameworkSystem
from .langgraph_agents import LangGraphSystem, chat_model, langchain_tool
from .llamaindex_agents import LlamaIndexSystem, llamaindex_tool, llm

__all__ = [
    "AgentSession",
    "AutoGenSystem",
    "BridgedTool",
    "FrameworkSystem",
    "LangGraphSystem",
    "LlamaIndexSystem",
    "autogen_tool",
    "chat_model",
    "langchain_tool",
    "llamaindex_tool",
    "llm",
    "model_client",
]
