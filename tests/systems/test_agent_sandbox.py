"""A hostile external agent in its sandbox (systems/agent_sandbox.py): each attack issue 35 found an agent could
make on the host, made by tests/systems/agents/hostile_agent.py (two units at once where it matters), refused.
The agent reports what it reached as its answer; each test asserts that nothing was."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from data_agent_compare.core import SYSTEMS, QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.systems.external import external_system
from data_agent_compare.systems.mcp_server import shared_tool_server
from data_agent_compare.tools.agent_sandbox import AGENT_UID_BASE, UID_SLOTS, agent_sandbox_problem, agent_uid

from helpers import (
    FIXTURES,
    ROOT,
    LoopbackNamespace,
    compare_command,
    load_tasks,
    make_plan,
    processes_with,
    read_records,
)

AGENTS = Path(__file__).resolve().parent / "agents"
API_KEY = "sk-or-v1-must-never-reach-an-agent"
GOLD = ROOT / "tasks" / "bundled" / "tasks.jsonl"  # every bundled task's gold answer
DAB_GOLD = FIXTURES / "dab" / "query_bookreview" / "query1" / "ground_truth.csv"
SOURCE = ROOT / "core" / "model.py"

pytestmark = pytest.mark.skipif(agent_sandbox_problem() is not None, reason=f"no sandbox: {agent_sandbox_problem()}")


def factoids(count: int):
    return [t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID][:count]


def agent_uid_processes() -> list[int]:
    """Processes of any agent's uid on this machine (none may outlive its unit)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            uid = next(int(line.split()[1]) for line in status.read_text().splitlines() if line.startswith("Uid:"))
        except (OSError, StopIteration, ValueError):
            continue
        if AGENT_UID_BASE <= uid < AGENT_UID_BASE + UID_SLOTS:
            found.append(int(status.parent.name))
    return found


@pytest.fixture
def hostile() -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        SYSTEMS.unregister(name)


def define(names: list[str], mode: str, **env: str) -> str:
    name = f"test_hostile_{mode}_{len(names)}"
    external_system(name, ["{python}", "{agent_dir}/hostile_agent.py", mode], agent_dir=AGENTS, env=env)
    names.append(name)
    return name


def reports(run_dir: Path) -> list[dict]:
    records = read_records(run_dir)
    assert all(r.status == "completed" for r in records), [(r.status, r.error) for r in records]
    return [json.loads(r.answer["text"] or "{}") for r in records]


def test_two_hostile_agents_at_once_reach_no_gold_key_process_file_port_or_each_other(
    tmp_path, scripted_model, hostile, monkeypatch
):
    monkeypatch.setenv("OPENROUTER_API_KEY", API_KEY)
    host_marker = Path("/tmp") / f"dac-host-file-{os.getpid()}"
    host_marker.write_text("on the host")
    listener = socket.create_server(("127.0.0.1", 0))  # a host service: a database, Ray, another tool
    shared_tool_server().start()
    run_dir = tmp_path / "run"
    marker = f"3.{os.getpid()}{time.monotonic_ns() % 10**6}"
    reads = [GOLD, DAB_GOLD, SOURCE, ROOT, Path.home() / ".ssh", run_dir, Path("/tmp"), Path("/home")]
    writes = [run_dir / "results.jsonl", run_dir / "planted", Path("/tmp") / f"dac-written-{os.getpid()}"]
    ports = [listener.getsockname()[1], shared_tool_server().port, 5432, 6379, 22]
    name = define(
        hostile,
        "probe",
        HOSTILE_READ=os.pathsep.join(map(str, reads)),
        HOSTILE_WRITE=os.pathsep.join(map(str, writes)),
        HOSTILE_PORTS=os.pathsep.join(map(str, ports)),
        HOSTILE_KILL=str(os.getpid()),
        HOSTILE_MARKER=marker,
        HOSTILE_RESULTS=str(run_dir / "results.jsonl"),
    )
    try:
        model = scripted_model(lambda r, c: pytest.fail("no model"))
        plan = make_plan(tmp_path, factoids(2), model, [name], concurrency=2)
        execute(plan)
        first, second = reports(run_dir)
    finally:
        host_marker.unlink()
        listener.close()

    for report, other in ((first, second), (second, first)):
        said = json.dumps(report)
        assert API_KEY not in said and "OPENROUTER" not in said  # not in its environment nor any it can read
        assert other["env"]["DAC_TOKEN"] not in said  # nor the other unit's token
        assert set(report["env"]) - {"PWD", "LC_CTYPE"} <= EXPECTED_ENV  # the documented variables and its own
        assert len(report["processes"]) <= 3, report["processes"]  # its sandbox's init, itself: no suite, no unit
        assert report["uid"] >= AGENT_UID_BASE
        reached = {path: how for path, how in report["reads"].items() if not how.startswith("refused")}
        assert not any(how.startswith("read") for how in reached.values()), reached
        listed = {path: how for path, how in reached.items() if how.startswith("listed")}
        assert set(listed) <= {str(ROOT), "/tmp"}, listed  # the suite's folder shows only its interpreter
        shown = set(listed.get(str(ROOT), "listed: ").removeprefix("listed: ").split(","))
        assert shown <= {".venv", "tests"}  # its interpreter, the way to its own agent folder; no source, no tasks
        assert host_marker.name not in listed.get("/tmp", "")  # its own /tmp, not the host's
        into_run = {path: how for path, how in report["writes"].items() if path.startswith(str(run_dir))}
        assert all(how.startswith("refused") for how in into_run.values()), into_run  # its own /tmp takes the rest
        assert all(how.startswith("refused") for how in report["ports"].values()), report["ports"]
        assert report["kill"].startswith("refused")
    assert not (run_dir / "planted").exists() and not Path(f"/tmp/dac-written-{os.getpid()}").exists()
    assert processes_with(marker) == [] and agent_uid_processes() == []  # the setsid double-fork child is gone
    assert all(line.startswith("{") for line in (run_dir / "results.jsonl").read_text().splitlines())


EXPECTED_ENV = {
    "PATH", "HOME", "TMPDIR", "LANG", "PYTHONUNBUFFERED", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
    "HF_HUB_DISABLE_TELEMETRY", "LITELLM_LOCAL_MODEL_COST_MAP", "ANONYMIZED_TELEMETRY", "DO_NOT_TRACK",
    "OTEL_SDK_DISABLED", "OPENAI_AGENTS_DISABLE_TRACING", "SMOLAGENTS_TELEMETRY", "LOGFIRE_IGNORE_NO_CONFIG",
    "npm_config_update_notifier", "DAC_QUESTION_FILE", "DAC_MCP_URL", "DAC_MODEL_BASE_URL", "DAC_MODEL", "DAC_TOKEN",
    "DAC_TASK_ID", "DAC_WORKDIR", "DAC_DEADLINE_S", "DAC_SYSTEM_PROMPT_FILE", "DAC_MAX_STEPS", "DAC_MCP_STDIO",
    "OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL", "HOSTILE_READ", "HOSTILE_WRITE", "HOSTILE_PORTS",
    "HOSTILE_KILL", "HOSTILE_MARKER", "HOSTILE_RESULTS",
}  # fmt: skip


def test_units_in_flight_at_once_get_uids_of_their_own():
    with agent_uid() as first, agent_uid() as second:
        assert AGENT_UID_BASE <= first < AGENT_UID_BASE + UID_SLOTS and second != first


def run_one(tmp_path: Path, scripted_model, name: str, **tools: object):
    plan = make_plan(
        tmp_path, factoids(1), scripted_model(lambda r, c: pytest.fail("no model")), [name], tools=tools
    )
    execute(plan)
    (record,) = read_records(plan.run_dir)
    return record


def test_a_fork_bomb_stops_at_the_process_limit_and_leaves_nothing(tmp_path, scripted_model, hostile):
    record = run_one(tmp_path, scripted_model, define(hostile, "forkbomb"), agent_processes=64)
    assert record.status == "completed", record.error
    report = json.loads(record.answer["text"] or "{}")
    assert 0 < report["children"] < 64 and report["stopped"] == "Resource temporarily unavailable"
    assert agent_uid_processes() == []


def test_a_2_gb_allocation_is_killed_at_the_memory_limit_and_the_unit_says_so(tmp_path, scripted_model, hostile):
    record = run_one(tmp_path, scripted_model, define(hostile, "memory"), agent_memory_mb=256)
    assert record.status == "error"
    assert "memory limit of 256 MB" in (record.error or ""), record.error


def test_a_disk_fill_stops_at_the_scratch_size_and_writes_nothing_to_the_host(tmp_path, scripted_model, hostile):
    record = run_one(tmp_path, scripted_model, define(hostile, "disk"), agent_scratch_mb=32)
    assert record.status == "completed", record.error
    report = json.loads(record.answer["text"] or "{}")
    assert report["stopped"] == "No space left on device" and report["written"] <= 32 << 20


# ---------------------------------------------------------------- worker processes and Ray actors

PLUGIN = '''
"""A test plugin: the scripted test model (it is never called) and the hostile agent."""

from data_agent_compare.core import register_provider
from data_agent_compare.providers.scripted import ScriptedProvider
from data_agent_compare.systems.external import external_system

register_provider("scripted")(lambda: ScriptedProvider(lambda request, context: "50"))
external_system("test_hostile_worker", ["{python}", "{agent_dir}/hostile_agent.py", "probe"], agent_dir=AGENTS)
'''


def hostile_run(tmp_path: Path, executor: str) -> Path:
    """A `compare` run configuration: two units at once of the hostile agent under `executor`."""
    plugin = tmp_path / "plugin.py"
    plugin.write_text(f"AGENTS = {str(AGENTS)!r}\n" + textwrap.dedent(PLUGIN))
    (tmp_path / "models.yaml").write_text("models:\n  scripted: {provider: scripted, model_id: v1}\n")
    config = tmp_path / "run.yaml"
    config.write_text(
        f"plugins: [{plugin}]\nmodels_file: {tmp_path / 'models.yaml'}\nmodels: [scripted]\n"
        f"systems: [test_hostile_worker]\ntask_ids: [BND003, BND007]\nconcurrency: 2\nexecutor: {executor}\n"
    )
    return config


def assert_apart(run_dir: Path) -> None:
    """Each worker's agent saw no key of the suite's, no other unit's token and no process of another."""
    first, second = reports(run_dir)
    for report, other in ((first, second), (second, first)):
        said = json.dumps(report)
        assert API_KEY not in said and other["env"]["DAC_TOKEN"] not in said
        assert len(report["processes"]) <= 3
    assert agent_uid_processes() == []


@pytest.mark.slow  # a `compare` child with worker processes
def test_hostile_agents_under_worker_processes_reach_no_key_and_no_other_unit(tmp_path):
    config = hostile_run(tmp_path, "process")
    env = {**os.environ, "OPENROUTER_API_KEY": API_KEY}  # every worker's environment holds it
    done = subprocess.run(
        compare_command("--config", str(config), "--out", str(tmp_path / "run")),
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_apart(tmp_path / "run")


@pytest.mark.slow  # a local Ray cluster in a loopback-only network namespace: ~30 s
def test_hostile_agents_under_ray_actors_reach_no_key_and_no_other_unit(tmp_path):
    namespace = LoopbackNamespace()
    try:
        config = hostile_run(tmp_path, "ray")
        done = namespace.run(
            *compare_command("--config", str(config), "--out", str(tmp_path / "run")),
            timeout=600, OPENROUTER_API_KEY=API_KEY, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled",
        )  # fmt: skip
    finally:
        namespace.close()
    assert done.returncode == 0, done.stderr
    assert_apart(tmp_path / "run")
