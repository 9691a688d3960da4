"""A pydantic-ai agent with the task's tools as an MCP toolset.

Runs in its own environment (`PydanticAiAgent.requirements`), started by the suite per unit. The model is
pydantic-ai's OpenAI Chat model pointed at the gateway; the tools are an `MCPToolset` on the unit's URL,
opened with the unit's token. A successful `answer` call ends the run (pydantic-ai itself ends only on a final
text, which a model that keeps calling tools never gives); without one, its final text is its output.
"""

import os
from pathlib import Path

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

answered = False


class Answered(Exception):
    """The `answer` tool took the answer: the run is over."""


async def stop_at_answer(ctx, call_tool, name, arguments):
    global answered
    result = await call_tool(name, arguments)  # a failed call raises here (tool_error_behavior="failed")
    if name == "answer":
        answered = True
        raise Answered()
    return result


def main() -> None:
    question = Path(os.environ["DAC_QUESTION_FILE"]).read_text(encoding="utf-8")
    instructions = Path(os.environ["DAC_SYSTEM_PROMPT_FILE"]).read_text(encoding="utf-8")
    client = AsyncOpenAI(base_url=os.environ["DAC_MODEL_BASE_URL"], api_key=os.environ["DAC_TOKEN"], max_retries=0)
    model = OpenAIChatModel(os.environ["DAC_MODEL"], provider=OpenAIProvider(openai_client=client))
    tools = MCPToolset(
        os.environ["DAC_MCP_URL"],
        auth=os.environ["DAC_TOKEN"],
        tool_error_behavior="failed",
        process_tool_call=stop_at_answer,
    )
    agent = Agent(model, instructions=instructions, toolsets=[tools])
    try:
        print(agent.run_sync(question).output)
    except BaseException:  # pydantic-ai may wrap Answered in its own error or an exception group
        if not answered:
            raise


if __name__ == "__main__":
    main()
