"""A pydantic-ai agent with the task's tools as an MCP toolset.

Runs in its own environment (`PydanticAiAgent.requirements`), started by the suite per unit. The model is
pydantic-ai's OpenAI Chat model pointed at the gateway; the tools are an `MCPToolset` on the unit's URL,
opened with the unit's token. Its final text is its output; an `answer` call, if made, is the answer.
"""

import os
from pathlib import Path

from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider


def main() -> None:
    question = Path(os.environ["DAC_QUESTION_FILE"]).read_text(encoding="utf-8")
    instructions = Path(os.environ["DAC_SYSTEM_PROMPT_FILE"]).read_text(encoding="utf-8")
    client = AsyncOpenAI(base_url=os.environ["DAC_MODEL_BASE_URL"], api_key=os.environ["DAC_TOKEN"], max_retries=0)
    model = OpenAIChatModel(os.environ["DAC_MODEL"], provider=OpenAIProvider(openai_client=client))
    tools = MCPToolset(os.environ["DAC_MCP_URL"], auth=os.environ["DAC_TOKEN"], tool_error_behavior="failed")
    agent = Agent(model, instructions=instructions, toolsets=[tools])
    result = agent.run_sync(question)
    print(result.output)


if __name__ == "__main__":
    main()
