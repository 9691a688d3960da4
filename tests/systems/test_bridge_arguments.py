"""A wrong argument to the framework bridge's helpers is refused with a message that says what they take,
instead of quietly giving no tools (`session.tools("execute_sql")` once read a string as its letters)."""

import pytest

from data_agent_compare.systems import (
    AgentSession,
    autogen_tool,
    chat_model,
    langchain_tool,
    llamaindex_tool,
    llm,
    model_client,
)


def test_session_tools_refuses_a_bare_string_and_names_the_list_it_takes():
    session = AgentSession(task=None, ctx=None)  # the check comes before the context is read
    with pytest.raises(TypeError, match=r"list of tool names, e\.g\. session\.tools\(\['execute_sql'\]\)"):
        session.tools("execute_sql")
    with pytest.raises(TypeError, match="every name is a str"):
        session.tools([3])
    with pytest.raises(TypeError, match="takes a tool name"):
        session.call_result("execute_sql", "SELECT 1")


@pytest.mark.parametrize("helper", [chat_model, model_client, llm])
def test_model_helpers_refuse_arguments_in_the_wrong_order(helper):
    session = AgentSession(task=None, ctx=None)
    with pytest.raises(TypeError, match=r"\(endpoint, session, \*, agent=None\) takes the Endpoint"):
        helper(session, "http://127.0.0.1:1/v1")


@pytest.mark.parametrize("helper", [langchain_tool, autogen_tool, llamaindex_tool])
def test_tool_helpers_refuse_a_list_and_show_how_to_convert_one(helper):
    with pytest.raises(TypeError, match=r"converts one BridgedTool .* for tool in session\.tools\(\)"):
        helper([])
