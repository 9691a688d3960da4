"""smolagents' CodeAgent (the family of DABstep's baseline agent) over the task's MCP tools.

Runs in its own environment (`SmolagentsCodeAgent.requirements`), started by the suite per unit; everything
it needs comes from the environment variables the suite sets (docs/bring-your-own-agent.md). Its code
calls the tools over MCP (`answer` records the answer); its model calls go to the metered gateway.
"""

import os
from pathlib import Path

from smolagents import CodeAgent, MCPClient, OpenAIServerModel

ANSWER_NOTE = (
    "\n\nWhen you know the answer, call the tool `answer` with it (its arguments as its schema says), "
    "then call final_answer with the same text."
)


def main() -> None:
    question = Path(os.environ["DAC_QUESTION_FILE"]).read_text(encoding="utf-8")
    instructions = Path(os.environ["DAC_SYSTEM_PROMPT_FILE"]).read_text(encoding="utf-8")
    model = OpenAIServerModel(
        model_id=os.environ["DAC_MODEL"],
        api_base=os.environ["DAC_MODEL_BASE_URL"],
        api_key=os.environ["DAC_TOKEN"],
        client_kwargs={"max_retries": 0},  # the gateway's provider retries; a budget's 402 must stop the agent
    )
    server = {
        "url": os.environ["DAC_MCP_URL"],
        "transport": "streamable-http",
        "headers": {"Authorization": f"Bearer {os.environ['DAC_TOKEN']}"},
    }
    timeout_s = float(os.environ.get("DAC_DEADLINE_S", "300"))
    adapter = {"client_session_timeout_seconds": timeout_s}
    with MCPClient(server, adapter_kwargs=adapter, structured_output=False) as tools:
        agent = CodeAgent(
            tools=tools, model=model, instructions=instructions, max_steps=int(os.environ.get("DAC_MAX_STEPS", "12"))
        )
        result = agent.run(question + ANSWER_NOTE)
    print(result)


if __name__ == "__main__":
    main()
