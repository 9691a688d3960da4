"""The four agents shipped as external systems (systems/external_agents/): smolagents' CodeAgent, the OpenAI
Agents SDK, pydantic-ai and a TypeScript agent, each unchanged in its own environment (built once, cached),
complete a bundled task against a scripted model: their model calls reach the metered gateway and their tool
calls the MCP tools, both in the unit's trace."""

from __future__ import annotations

import os
import shutil
from collections import deque
from typing import Any

import pytest

from data_agent_compare.core import CallContext, Message, ModelRequest, QuestionType, create_system
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, no_network, run_task

SQL = "SELECT COUNT(*) FROM Customers"

# smolagents' CodeAgent reads code from the model's text; the others ask for tool calls.
CODE_REPLIES = [
    f'Thought: count the customers.\n<code>\nprint(execute_sql(sql="{SQL}"))\n</code>',
    'Thought: I know it.\n<code>\nanswer(answer="50")\nfinal_answer("50")\n</code>',
]
TOOL_REPLIES = [
    tool_call_message("execute_sql", {"sql": SQL}, "call_sql"),
    tool_call_message("answer", {"answer": "50"}, "call_answer"),
    Message(role="assistant", content="50"),  # pydantic-ai ends on text after the tool results
]


class Script:
    """A scripted test model: its replies in order, then the answer as text; it records the requests."""

    def __init__(self, replies: list[Any]) -> None:
        self.replies = deque(replies)
        self.requests: list[ModelRequest] = []

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        self.requests.append(request)
        reply = self.replies.popleft() if self.replies else "50"
        return Message(role="assistant", content=reply) if isinstance(reply, str) else reply


def factoid():
    return next(t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID)


@pytest.mark.slow  # builds each agent's environment once (uv / npm from the registry), then cached
@pytest.mark.parametrize(
    "system", ["smolagents_code", "openai_agents_sdk", "pydantic_ai_agent", "typescript_mcp_agent", "go_mcp_agent"]
)
def test_scripted_model_drives_each_shipped_agent_through_gateway_and_mcp_tools(tmp_path, scripted_model, system):
    if system == "typescript_mcp_agent" and shutil.which("npm") is None:
        pytest.skip("no node/npm on this machine")
    if system == "go_mcp_agent" and shutil.which("go") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs golang-go (setup.sh), yet go is not on PATH")
        pytest.skip("no Go toolchain on this machine (apt-get install golang-go)")
    script = Script(CODE_REPLIES if system == "smolagents_code" else TOOL_REPLIES)
    with no_network() as attempts:
        record, trace, manifest = run_task(tmp_path, scripted_model(script), factoid(), system)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["text"] == "50"
    tools = [(s["tool"], s["success"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools[:2] == [("execute_sql", True), ("answer", True)]
    model_calls = [s for s in trace["steps"] if s["kind"] == "model_call"]
    assert len(model_calls) >= 2 and all(s["via_http"] and s["success"] for s in model_calls)
    if system != "smolagents_code":  # a tool-calling agent offers the MCP tools to the model under their names
        offered = {tool.name for tool in script.requests[0].tools}
        assert {"execute_sql", "answer"} <= offered
    described = manifest["systems"][system]
    assert described["kind"] == "external" and described["environment"]["resolved"]
    assert attempts == []


def test_shipped_agents_declare_their_environments():
    for system in ("smolagents_code", "openai_agents_sdk", "pydantic_ai_agent", "typescript_mcp_agent", "go_mcp_agent"):
        cls = type(create_system(system))
        assert cls.kind == "external" and (cls.requirements is not None or cls.build is not None)
        assert cls.agent_dir is not None and cls.agent_dir.is_dir()
