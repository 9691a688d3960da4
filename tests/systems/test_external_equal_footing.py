"""Equal footing for external agents (issue 27, item 5): worker processes (`--executor process`) give the thread
executor's results; a replay serves their gateway calls from the recorded run; the response cache answers their
repeated calls; resume finishes a run of them. `compare` children run a scripted test model and an external
agent from a --plugin file, as tests/app/test_executors.py does for the built-in systems."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from data_agent_compare.core.runlog import read_run

from helpers import ROOT, compare_command

PLUGIN = '''
"""A test plugin: the scripted test model (provider "scripted") and an external agent that uses it."""

import sys
from pathlib import Path

from data_agent_compare.core import register_provider
from data_agent_compare.providers.scripted import ScriptedProvider, tool_call_message
from data_agent_compare.systems.external import external_system


def respond(request, context):
    if not any(m.role == "assistant" for m in request.messages):
        return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"}, "c1")
    return tool_call_message("answer", {"answer": "50"}, "c2")


register_provider("scripted")(lambda: ScriptedProvider(respond))
external_system("test_scripted_footing_agent", ["{python}", "{agent_dir}/agent.py"], agent_dir=Path(__file__).parent)
'''

# The external agent: a model call through the gateway, the tool it names over MCP, until `answer`.
AGENT = """
import asyncio, json, os
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

auth = {"Authorization": f"Bearer {os.environ['DAC_TOKEN']}"}


async def main():
    async with (
        httpx.AsyncClient(headers=auth, timeout=120) as client,
        streamable_http_client(os.environ["DAC_MCP_URL"], http_client=client) as (read, write, _),
        ClientSession(read, write) as mcp,
    ):
        await mcp.initialize()
        messages = [{"role": "user", "content": open(os.environ["DAC_QUESTION_FILE"]).read()}]
        while True:
            body = {"model": os.environ["DAC_MODEL"], "messages": messages}
            reply = await client.post(os.environ["DAC_MODEL_BASE_URL"] + "/chat/completions", json=body)
            reply.raise_for_status()
            message = reply.json()["choices"][0]["message"]
            messages.append(message)
            for call in message.get("tool_calls") or []:
                name = call["function"]["name"]
                result = await mcp.call_tool(name, json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content[0].text})
                if name == "answer":
                    return


asyncio.run(main())
"""


@pytest.fixture
def setup(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)  # the agent's folder: its sandbox's uid reads agent.py there
    (tmp_path / "plugin.py").write_text(textwrap.dedent(PLUGIN).lstrip())
    (tmp_path / "agent.py").write_text(AGENT)
    (tmp_path / "models.yaml").write_text("models:\n  scripted: {provider: scripted, model_id: v1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"plugins: [{tmp_path / 'plugin.py'}]\nmodels_file: {tmp_path / 'models.yaml'}\nmodels: [scripted]\n"
        "systems: [test_scripted_footing_agent]\nbenchmark: bundled\ntask_ids: [BND003, BND007]\nconcurrency: 2\n"
    )
    return config


def compare(*flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ)
    )


def outcome(run_dir: Path) -> dict[tuple, tuple]:
    records = read_run(run_dir).records
    return {r.key: (r.status, r.answer, r.model_calls, [(c.tool, c.success) for c in r.tool_calls]) for r in records}


@pytest.mark.slow  # five `compare` processes, one with worker processes
def test_scripted_external_agent_under_process_executor_replay_cache_and_resume(tmp_path, setup):
    config = str(setup)
    threads, processes, replayed = tmp_path / "threads", tmp_path / "processes", tmp_path / "replayed"
    done = compare("--config", config, "--out", str(threads))
    assert done.returncode == 0, done.stderr
    expected = outcome(threads)
    assert len(expected) == 2 and all(v[0] == "completed" and v[2] == 2 for v in expected.values())
    assert all(v[3] == [("execute_sql", True), ("answer", True)] for v in expected.values())

    done = compare("--config", config, "--out", str(processes), "--executor", "process")
    assert done.returncode == 0, done.stderr
    assert outcome(processes) == expected

    # --allow-drift: other code of the suite may change between these runs (the system under test does not)
    done = compare("--replay", str(threads), "--out", str(replayed), "--allow-drift")
    assert done.returncode == 0, done.stderr
    assert outcome(replayed) == expected  # every gateway call of the agent was found in the recording

    first, second = tmp_path / "cached1", tmp_path / "cached2"
    for out in (first, second):
        done = compare("--config", config, "--out", str(out), "--cache")
        assert done.returncode == 0, done.stderr
    assert outcome(second) == expected
    cached = read_run(second)
    assert cached.cached_calls == cached.journaled_calls == 4  # every gateway call of the agent, from the cache

    done = compare("--resume", "--out", str(threads), "--allow-drift")  # a finished run resumes to nothing new
    assert done.returncode == 0, done.stderr
    assert outcome(threads) == expected
