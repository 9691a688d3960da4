"""The OpenAI Agents SDK with the task's MCP server as its tool source.

Runs in its own environment (`OpenAIAgentsSdkAgent.requirements`), started by the suite per unit. The run
stops at the `answer` tool (`tool_use_behavior`); tracing to OpenAI is off; the model is the gateway's,
through the SDK's Chat Completions model with an AsyncOpenAI client at the gateway.
"""

import asyncio
import os
from pathlib import Path

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


async def main() -> None:
    set_tracing_disabled(True)
    question = Path(os.environ["DAC_QUESTION_FILE"]).read_text(encoding="utf-8")
    instructions = Path(os.environ["DAC_SYSTEM_PROMPT_FILE"]).read_text(encoding="utf-8")
    client = AsyncOpenAI(base_url=os.environ["DAC_MODEL_BASE_URL"], api_key=os.environ["DAC_TOKEN"], max_retries=0)
    timeout_s = float(os.environ.get("DAC_DEADLINE_S", "300"))
    params = {
        "url": os.environ["DAC_MCP_URL"],
        "headers": {"Authorization": f"Bearer {os.environ['DAC_TOKEN']}"},
        "timeout": timeout_s,
    }
    async with MCPServerStreamableHttp(
        params=params, cache_tools_list=True, client_session_timeout_seconds=timeout_s
    ) as tools:
        agent = Agent(
            name="data_agent",
            instructions=instructions,
            model=OpenAIChatCompletionsModel(model=os.environ["DAC_MODEL"], openai_client=client),
            mcp_servers=[tools],
            tool_use_behavior={"stop_at_tool_names": ["answer"]},
        )
        result = await Runner.run(agent, question, max_turns=int(os.environ.get("DAC_MAX_STEPS", "12")) + 5)
    print(result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
