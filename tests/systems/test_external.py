"""External systems (systems/external.py): any command as an agent, run per unit in its own sandbox with the
unit's wall time, its model calls through the metered gateway by the unit's token, its tool calls over MCP;
torn down with everything it started at the deadline; a killed agent is that unit's error and the run goes on.
(The attacks a hostile agent tries are tests/systems/test_agent_sandbox.py.)"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from data_agent_compare.core import SYSTEMS, Message, QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.systems.external import ExternalSystemError, external_system
from data_agent_compare.systems.external_yaml import load_external_systems

from helpers import compare_command, load_tasks, make_plan, processes_with, read_records, run_task

# A scripted agent in the suite's own Python: it reads the question, asks the gateway's model (the unit's
# token), calls the tool the model names over MCP, and answers; it also reports what was refused.
SCRIPTED_AGENT = textwrap.dedent(
    """
    import asyncio, json, os
    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    token, base = os.environ["DAC_TOKEN"], os.environ["DAC_MODEL_BASE_URL"]
    auth = {"Authorization": f"Bearer {token}"}
    question = open(os.environ["DAC_QUESTION_FILE"]).read()
    bad = httpx.post(f"{base}/chat/completions", json={"model": "x", "messages": []}, headers={"Authorization": "x"})
    report = {"env": sorted(os.environ), "model_without_token": bad.status_code}

    def model(messages):
        body = {"model": os.environ["DAC_MODEL"], "messages": messages}
        return httpx.post(f"{base}/chat/completions", headers=auth, json=body, timeout=60).json()["choices"][0]

    async def main():
        async with (
            httpx.AsyncClient(headers=auth, timeout=60) as client,
            streamable_http_client(os.environ["DAC_MCP_URL"], http_client=client) as (read, write, _),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            messages = [{"role": "user", "content": question}]
            while True:
                message = model(messages)["message"]
                messages.append(message)
                if not message.get("tool_calls"):
                    return message.get("content")
                for call in message["tool_calls"]:
                    name, arguments = call["function"]["name"], json.loads(call["function"]["arguments"])
                    result = await mcp.call_tool(name, arguments)
                    messages.append({"role": "tool", "tool_call_id": call["id"], "content": result.content[0].text})
                    if name == "answer":
                        return None

    report["text"] = asyncio.run(main())
    if os.environ.get("PRINT_REPORT"):  # its standard output, the answer when it did not call `answer`
        print(json.dumps(report))
    """
)


@pytest.fixture
def external() -> Iterator[list[str]]:
    """Names of external systems a test defines, unregistered afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        SYSTEMS.unregister(name)


def define(names: list[str], name: str, command: list[str], **options: object) -> str:
    external_system(name, command, **options)  # type: ignore[arg-type]
    names.append(name)
    return name


def agent_folder(tmp_path: Path, **scripts: str) -> Path:
    """A folder of agent scripts the agent's uid can read (pytest makes tmp_path readable by its owner only)."""
    tmp_path.chmod(0o755)
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def factoid():
    return next(t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID)


def test_scripted_agent_process_calls_the_gateway_and_the_mcp_tools_and_answers(
    tmp_path, scripted_model, external, monkeypatch
):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-must-not-leak")
    folder = agent_folder(tmp_path, **{"agent.py": SCRIPTED_AGENT})
    name = define(external, "test_scripted_external", ["{python}", "{agent_dir}/agent.py"], agent_dir=folder)
    replies = iter(
        [
            tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"}, "c1"),
            tool_call_message("answer", {"answer": "50"}, "c2"),
        ]
    )
    model = scripted_model(lambda request, context: next(replies))
    record, trace, manifest = run_task(tmp_path, model, factoid(), name)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["text"] == "50"
    steps = [(s["kind"], s.get("tool"), s["phase"]) for s in trace["steps"]]
    assert steps == [
        ("model_call", None, "decision"),
        ("tool_call", "execute_sql", "execute"),
        ("model_call", None, "generate"),
        ("tool_call", "answer", "generate"),
    ]
    assert all(s["via_http"] for s in trace["steps"] if s["kind"] == "model_call")
    assert manifest["systems"][name]["kind"] == "external"


def test_scripted_agent_sees_only_its_own_variables_and_a_model_call_without_the_token_is_refused(
    tmp_path, scripted_model, external, monkeypatch
):
    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-must-not-leak")
    folder = agent_folder(tmp_path, **{"agent.py": SCRIPTED_AGENT})
    command = ["{python}", "{agent_dir}/agent.py"]
    name = define(external, "test_scripted_external_env", command, agent_dir=folder, env={"PRINT_REPORT": "1"})
    model = scripted_model(lambda request, context: Message(role="assistant", content="done"))
    record, _, _ = run_task(tmp_path, model, factoid(), name)

    assert record["status"] == "completed", record["error"]
    report = json.loads(record["answer"]["text"])
    assert report["model_without_token"] == 401
    assert "OPENROUTER_API_KEY" not in report["env"] and "DAC_MCP_URL" in report["env"]
    assert "OPENAI_API_KEY" in report["env"]  # the unit's token, under the name any OpenAI client reads


def test_scripted_agent_whose_stdout_is_its_answer(tmp_path, scripted_model, external):
    name = define(external, "test_scripted_echo", ["sh", "-c", "echo 50"])
    model = scripted_model(lambda request, context: pytest.fail("this agent asks no model"))
    record, _, _ = run_task(tmp_path, model, factoid(), name)
    assert record["status"] == "completed" and record["answer"]["text"] == "50"


def test_scripted_agent_that_hangs_is_killed_at_its_deadline_with_its_children(tmp_path, scripted_model, external):
    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"  # a sleep no other process runs
    name = define(external, "test_scripted_hang", ["sh", "-c", f"sleep {marker} & sleep {marker}"])
    model = scripted_model(lambda request, context: pytest.fail("no model"))
    record, _, _ = run_task(tmp_path, model, factoid(), name, budgets={"wall_time_s": 1.5})

    assert record["status"] == "time_limit", record["error"]
    assert record["model_calls"] == 0 and "killed with everything it started" in record["error"]
    assert processes_with(marker) == [], "the agent's child outlived the deadline"


def test_scripted_agent_killed_with_signal_9_is_that_units_error_and_the_run_goes_on(
    tmp_path, scripted_model, external
):
    tasks = [t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID][:2]
    first = tasks[0].id
    script = f'if [ "$DAC_TASK_ID" = "{first}" ]; then kill -9 $$; fi; echo 50'
    name = define(external, "test_scripted_kill9", ["sh", "-c", script])
    model = scripted_model(lambda request, context: pytest.fail("no model"))
    plan = make_plan(tmp_path, tasks, model, [name])
    execute(plan)

    records = {r.task_id: r for r in read_records(plan.run_dir)}
    assert records[first].status == "error" and "signal 9" in (records[first].error or "")
    assert records[tasks[1].id].status == "completed"


def test_external_systems_file_defines_systems_and_a_wrong_field_is_named(tmp_path, external):
    good = tmp_path / "agents.yaml"
    good.write_text(
        'systems:\n  test_yaml_agent:\n    command: ["sh", "-c", "echo {model}"]\n    env: {A: "{token}"}\n'
    )
    external += load_external_systems(good)
    assert SYSTEMS.load("test_yaml_agent").kind == "external"

    bad = tmp_path / "bad.yaml"
    bad.write_text('systems:\n  test_yaml_bad:\n    command: ["run", "{question}"]\n')
    with pytest.raises(ExternalSystemError, match=r"bad.yaml: system 'test_yaml_bad': field command: .*question"):
        load_external_systems(bad)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("systems:\n  test_yaml_unknown:\n    command: [x]\n    comand: [y]\n")
    with pytest.raises(
        ExternalSystemError, match=r"unknown.yaml: system 'test_yaml_unknown': field 'comand' is unknown"
    ):
        load_external_systems(unknown)


# A scripted agent that starts the unit's tools as a stdio MCP server (DAC_MCP_STDIO), as agents configured
# with a command rather than a URL do.
STDIO_AGENT = textwrap.dedent(
    """
    import asyncio, os, shlex
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def main():
        command, *args = shlex.split(os.environ["DAC_MCP_STDIO"])
        async with (
            stdio_client(StdioServerParameters(command=command, args=args)) as (read, write),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            names = [tool.name for tool in (await mcp.list_tools()).tools]
            assert "execute_sql" in names and "answer" in names, names
            counted = await mcp.call_tool("execute_sql", {"sql": "SELECT COUNT(*) FROM Customers"})
            await mcp.call_tool("answer", {"answer": counted.content[0].text.split()[-1]})

    asyncio.run(main())
    """
)


def test_scripted_agent_reaches_the_same_tools_over_stdio(tmp_path, scripted_model, external):
    folder = agent_folder(tmp_path, **{"stdio_agent.py": STDIO_AGENT})
    name = define(external, "test_scripted_stdio", ["{python}", "{agent_dir}/stdio_agent.py"], agent_dir=folder)
    model = scripted_model(lambda request, context: pytest.fail("this agent asks no model"))
    record, trace, _ = run_task(tmp_path, model, factoid(), name)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["text"] == "50"
    tools = [(s["tool"], s["phase"], s["success"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools == [("execute_sql", "execute", True), ("answer", "generate", True)]


def test_compare_lists_a_systems_file_given_as_plugin_and_refuses_a_wrong_one_in_one_line(tmp_path):
    good, bad = tmp_path / "agents.yaml", tmp_path / "bad.yaml"
    good.write_text('systems:\n  test_cli_echo_agent:\n    command: ["sh", "-c", "echo {model}"]\n')
    bad.write_text('systems:\n  test_cli_bad_agent:\n    command: ["x", "{nope}"]\n')
    listed = subprocess.run(compare_command("systems", "--plugin", str(good)), capture_output=True, text=True)
    assert listed.returncode == 0 and "test_cli_echo_agent" in listed.stdout and "external" in listed.stdout
    refused = subprocess.run(compare_command("systems", "--plugin", str(bad)), capture_output=True, text=True)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "bad.yaml: system 'test_cli_bad_agent': field command" in refused.stderr


def test_stopping_the_run_kills_a_running_agent_and_its_children(tmp_path):
    """Ctrl-C of `compare` while an external agent runs: the run stops at once and no process of the agent survives."""
    import signal

    marker = f"300.{os.getpid()}{time.monotonic_ns() % 10**6}"
    agents = tmp_path / "agents.yaml"
    hang = f"sleep {marker} & sleep {marker}"
    agents.write_text(f"systems:\n  test_cli_hang:\n    command: [sh, -c, {json.dumps(hang)}]\n")
    flags = ("--plugin", str(agents), "--systems", "test_cli_hang", "--models", "local", "--limit", "1")
    run = subprocess.Popen(
        compare_command(*flags, "--out", str(tmp_path / "run")), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while len(processes_with(marker)) < 2:
        assert time.monotonic() < deadline and run.poll() is None, run.communicate()
        time.sleep(0.2)
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=60)
    gone_by = time.monotonic() + 10  # the sandbox dies with bwrap's parent, a moment after the exit
    while processes_with(marker) and time.monotonic() < gone_by:
        time.sleep(0.1)
    assert processes_with(marker) == [], "the agent's processes outlived the run"


def test_gateway_reply_to_an_agent_killed_during_its_model_call_prints_no_traceback(capfd):
    """An agent killed at its deadline leaves its model call in flight; the gateway's reply then meets a closed
    connection, which is no error of the gateway's (nothing on the console)."""
    import socket

    from data_agent_compare.core import MeteredModel
    from data_agent_compare.providers.endpoint import GatewayServer
    from data_agent_compare.providers.scripted import ScriptedProvider

    from helpers import SCRIPTED, recorder

    def slow(request, context):
        time.sleep(1.0)  # test-only latency: the client is gone before the reply
        return tool_call_message("answer", {"answer": "50"})

    model = MeteredModel(SCRIPTED, ScriptedProvider(slow), recorder(), system="test")
    with GatewayServer() as gateway, gateway.open_session(model) as endpoint:
        body = json.dumps({"model": endpoint.model, "messages": [{"role": "user", "content": "hi"}]}).encode()
        path = endpoint.base_url.split(str(gateway.port), 1)[1] + "/chat/completions"
        head = f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {endpoint.api_key}\r\n"
        client = socket.create_connection(("127.0.0.1", gateway.port))
        client.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, as a killed process
        client.close()
        time.sleep(2.0)
    assert "Traceback" not in capfd.readouterr().err


def test_scripted_agent_stopped_by_the_step_budget_ends_with_its_status(tmp_path, scripted_model, external):
    """The gateway refuses the agent's model call past the budget (HTTP 402); the agent fails on it, and the unit
    ends max_steps, as a built-in system's would, not error."""
    folder = agent_folder(tmp_path, **{"agent.py": SCRIPTED_AGENT})
    name = define(external, "test_scripted_budget", ["{python}", "{agent_dir}/agent.py"], agent_dir=folder)
    model = scripted_model(lambda request, context: tool_call_message("execute_sql", {"sql": "SELECT 1"}))
    record, trace, _ = run_task(tmp_path, model, factoid(), name, budgets={"max_steps": 2})

    assert record["status"] == "max_steps", record["error"]
    assert record["model_calls"] == 2
    assert [s["tool"] for s in trace["steps"] if s["kind"] == "tool_call"] == ["execute_sql", "execute_sql"]


ASKS_FOR_ITS_OWN_SAMPLING = textwrap.dedent(
    """
    import os
    import httpx

    body = {
        "model": os.environ["DAC_MODEL"],
        "messages": [{"role": "user", "content": open(os.environ["DAC_QUESTION_FILE"]).read()}],
        "temperature": 0.9,
        "max_tokens": 77,
    }
    headers = {"Authorization": "Bearer " + os.environ["DAC_TOKEN"]}
    reply = httpx.post(os.environ["DAC_MODEL_BASE_URL"] + "/chat/completions", json=body, headers=headers, timeout=60)
    print(reply.json()["choices"][0]["message"]["content"])
    """
)


def test_scripted_agent_asking_for_its_own_sampling_gets_the_runs_settings_and_the_record_says_both(
    tmp_path, scripted_model, external
):
    folder = agent_folder(tmp_path, **{"agent.py": ASKS_FOR_ITS_OWN_SAMPLING})
    name = define(external, "test_scripted_own_sampling", ["{python}", "{agent_dir}/agent.py"], agent_dir=folder)
    seen = []

    def reply(request, context):
        seen.append((request.temperature, request.max_output_tokens))
        return Message(role="assistant", content="50")

    generation = {"temperature": 0.3, "max_output_tokens": 123}
    record, _, _ = run_task(tmp_path, scripted_model(reply), factoid(), name, generation=generation)

    assert record["status"] == "completed", record["error"]
    assert seen == [(0.3, 123)]  # the gateway sent the run's settings, not the agent's 0.9 / 77
    assert record["generation_asked"]["temperature"] == {"0.9": 1}
    assert record["generation_sent"]["temperature"] == {"0.3": 1}


@pytest.mark.slow  # three `compare` processes, each loading the embedded model
def test_a_relative_plugin_and_agent_dir_work_from_another_folder_and_are_recorded_absolute(tmp_path):
    """`--plugin agents.yaml` given relative to the working folder, the agent's folder relative to that file:
    the run works, the manifest records both absolute, and `resume` and `rescore` find them from elsewhere."""
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / "agents").mkdir(parents=True)
    elsewhere.mkdir()
    for folder in (tmp_path, project, project / "agents"):
        folder.chmod(0o755)
    (project / "agents" / "answer.sh").write_text("echo 50\n")
    (project / "agents.yaml").write_text(
        'systems:\n  test_relative_agent:\n    command: [sh, "{agent_dir}/answer.sh"]\n    agent_dir: agents\n'
    )
    flags = ("--plugin", "agents.yaml", "--systems", "test_relative_agent", "--models", "local", "--limit", "1")
    done = subprocess.run(
        compare_command(*flags, "--out", "run"), cwd=project, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((project / "run" / "manifest.json").read_text())
    assert manifest["config"]["plugins"] == [str(project / "agents.yaml")]
    (record,) = read_records(project / "run")
    assert record.status == "completed" and record.answer["text"] == "50", record.error
    for verb in (["resume", str(project / "run")], ["rescore", str(project / "run"), "--out", str(tmp_path / "re")]):
        again = subprocess.run(compare_command(*verb), cwd=elsewhere, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
