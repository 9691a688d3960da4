"""`--executor ray` on a real two-node cluster (two raylets on this machine) in a loopback-only network
namespace: a node lost mid-run costs its units in flight only, and a run with fewer CPUs than --concurrency
goes on at the pace of the actors it has, saying how many run.

The `compare` children run a scripted test model from a --plugin file (provider "scripted", each call
sleeping MODEL_DELAY_S) on a small quiz benchmark over the fixtures' SQLite database. Ray's dashboard probes
cloud metadata addresses at every start: every Ray process here runs inside one network namespace that has
only loopback (`unshare -n`, entered with `nsenter`), so nothing can leave the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from data_agent_compare.core.runlog import read_run

from helpers import FIXTURES, ROOT, LoopbackNamespace, compare_command, quiz_questions, write_quiz_run

TASKS = 40
HEAD_PORT = 6391
SECOND_NODE_IP = "127.0.0.2"  # the second raylet's own address on loopback: the one to kill, found by it
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_AUTH_MODE": "disabled",
    # A dead node is noticed within ~3 s rather than Ray's default ~15-30 s: the test's clock, not the behaviour.
    "RAY_health_check_period_ms": "1000",
    "RAY_health_check_failure_threshold": "3",
    # The scripted model's reply time: actors take their node's environment, as on a real cluster.
    "MODEL_DELAY_S": "0.5",
}


def quiz(tmp_path: Path, tasks: int, concurrency: int) -> Path:
    """A run configuration: `tasks` quiz questions × tool_use × scripted model × 2 epochs."""
    settings = (
        f"workflows: [tool_use]\nepochs: 2\nconcurrency: {concurrency}\n"
        f"executor: ray\nray_address: 127.0.0.1:{HEAD_PORT}\n"
    )
    return write_quiz_run(tmp_path, quiz_questions(tasks), settings)["config"]


def ray_cli(*flags: str) -> list[str]:
    return [str(Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "ray"), *flags]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackNamespace]:
    """Two Ray nodes of 2 CPUs each in one loopback-only namespace; stopped (both) at the end."""
    namespace = LoopbackNamespace()
    temp = tmp_path_factory.mktemp("ray")
    try:
        head = namespace.run(
            *ray_cli(
                "start",
                "--head",
                f"--port={HEAD_PORT}",
                "--num-cpus=2",
                "--node-ip-address=127.0.0.1",
                "--include-dashboard=false",
                "--disable-usage-stats",
                f"--temp-dir={temp}",
            ),
            **RAY_ENV,
        )
        assert head.returncode == 0, head.stdout + head.stderr
        second = namespace.run(
            *ray_cli(
                "start",
                f"--address=127.0.0.1:{HEAD_PORT}",
                "--num-cpus=2",
                f"--node-ip-address={SECOND_NODE_IP}",
                "--disable-usage-stats",
            ),
            **RAY_ENV,
        )
        assert second.returncode == 0, second.stdout + second.stderr
        yield namespace
    finally:
        namespace.run(*ray_cli("stop", "--force"), timeout=60)
        namespace.close()


def second_raylet() -> int:
    """The pid of the second node's raylet (its command line names the node's own address)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"/raylet") and f"--node_ip_address={SECOND_NODE_IP}".encode() in argv:
            return int(entry.name)
    raise AssertionError("the second node's raylet is not running")


def records(run_dir: Path) -> list[dict]:
    path = run_dir / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


def wait_for_records(run_dir: Path, count: int, process: subprocess.Popen[str], limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while len(records(run_dir)) < count:
        assert process.poll() is None, process.communicate()[1]
        assert time.monotonic() < deadline, f"fewer than {count} records after {limit_s} s"
        time.sleep(0.1)


@pytest.mark.slow  # a two-node Ray cluster and one run: ~1-2 minutes
def test_a_node_killed_mid_run_costs_only_its_units_in_flight_scripted(
    cluster: LoopbackNamespace, tmp_path: Path
) -> None:
    config, out = quiz(tmp_path, tasks=TASKS, concurrency=4), tmp_path / "killed"
    env = {**os.environ, "MODEL_DELAY_S": "0.5"}  # 1 s a unit: 4 at a time, 20 s of work; the kill at 12
    command = cluster.command(*compare_command("--config", str(config), "--out", str(out)))
    run = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        wait_for_records(out, 12, run)
        os.kill(second_raylet(), signal.SIGKILL)  # the second node is lost, with the units its actors ran
        stdout, stderr = run.communicate(timeout=150)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, stdout + stderr
    lines = records(out)
    keys = [(r["task_id"], r["system"], r["model"], r["epoch"]) for r in lines]
    assert len(keys) == len(set(keys)) == TASKS * 2  # every unit, each recorded once, without --resume
    assert all(r["status"] == "completed" for r in lines)
    retried = [r for r in lines if r["retried_attempts"]]
    assert retried, "the units in flight on the lost node carry their lost attempts"
    assert all(r["attempt"] not in r["retried_attempts"] for r in retried)
    run_log = read_run(out)
    assert not run_log.interrupted  # the lost attempts' spend is in their units' records, not lost
    described = run_log.manifest.executor
    assert described["lost_attempts"] >= len(retried)
    assert any(change["waiting"] for change in described["capacity"])  # the lost actors waited for a CPU
    assert "running units on 2 of 4 actors; 2 wait for resources" in stderr, stderr


def lose_second_node(cluster: LoopbackNamespace) -> None:
    """The cluster without its second node (if a test before did not already kill it): 2 CPUs left."""
    with contextlib.suppress(AssertionError):
        os.kill(second_raylet(), signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        probe = cluster.run(
            str(ROOT / ".venv" / "bin" / "python"),
            "-c",
            f"import ray; ray.init(address='127.0.0.1:{HEAD_PORT}', log_to_driver=False); "
            "print(int(ray.cluster_resources().get('CPU', 0)))",
            **RAY_ENV,
        )
        if probe.stdout.strip().splitlines()[-1:] == ["2"]:
            return
        time.sleep(1)
    raise AssertionError("the cluster still counts the second node's CPUs")


@pytest.mark.slow  # a run stopped, then resumed on 2 CPUs with 4 actors asked: ~1-2 minutes
def test_a_resume_with_more_actors_than_cpus_runs_at_the_pace_of_those_it_has_and_says_so_scripted(
    cluster: LoopbackNamespace, tmp_path: Path
) -> None:
    lose_second_node(cluster)
    config, out = quiz(tmp_path, tasks=20, concurrency=4), tmp_path / "resumed"
    env = {**os.environ, "MODEL_DELAY_S": "0.5"}
    flags = ("--config", str(config), "--out", str(out))
    first = subprocess.Popen(
        cluster.command(*compare_command(*flags)),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    said: list[str] = []  # the first run's stderr, read as it comes: the capacity is said once it held 2 s
    reader = threading.Thread(target=lambda: said.extend(first.stderr), daemon=True)  # type: ignore[arg-type]
    reader.start()
    capacity_said = "running units on 2 of 4 actors; 2 wait for resources"
    try:
        wait_for_records(out, 4, first)
        deadline = time.monotonic() + 60  # 4 records can come before the capacity settles: wait for both
        while not any(capacity_said in line for line in said) and time.monotonic() < deadline:
            assert first.poll() is None, "".join(said)
            time.sleep(0.1)
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 143
    finally:
        if first.poll() is None:
            first.kill()
    first.stdout.read()  # type: ignore[union-attr]  (stderr is the reader's)
    reader.join(timeout=10)
    assert capacity_said in "".join(said)  # said, never silent

    before = len(records(out))
    again = cluster.command(*compare_command("--resume", "--allow-drift", "--out", str(out)))  # others edit the tree
    resume = subprocess.Popen(again, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    arrivals = []  # (monotonic time, records) as the resumed run writes them
    while resume.poll() is None:
        arrivals.append((time.monotonic(), len(records(out))))
        time.sleep(0.05)
    stdout, stderr = resume.communicate()
    assert resume.returncode == 0, stdout + stderr
    assert "running units on 2 of 4 actors; 2 wait for resources" in stderr
    lines = records(out)
    keys = [(r["task_id"], r["epoch"]) for r in lines]
    assert len(keys) == len(set(keys)) == 40
    capacity = read_run(out).manifest.executor["capacity"]
    assert capacity[-1]["running"] == 2 and capacity[-1]["waiting"] == 2

    # The pace of 2 actors: units recorded per second, first to last record of the resume, against 2 units
    # per unit time (the resume ran at 0.45 of it: units queued on the actors that could not start);
    # 0.55 of it passes, leaving a loaded machine room, and 0.45 still fails.
    first_at = next(at for at, count in arrivals if count > before)
    last_at = next(at for at, count in arrivals if count == len(lines))
    unit_s = statistics.median(r["latency_s"] for r in lines)
    rate = (len(lines) - before - 1) / (last_at - first_at)
    assert rate >= 0.55 * 2 / unit_s, f"{rate:.2f} units/s with 2 actors at {unit_s:.2f} s a unit"


def test_a_unit_run_again_after_a_lost_actor_keeps_this_sessions_lost_attempts_and_their_spend(tmp_path: Path) -> None:
    from data_agent_compare.core.runlog import ResultRecord, SpentCall
    from data_agent_compare.core.trace import Usage
    from data_agent_compare.engine.ray_executor import keep_lost_spend, lost_calls

    def line(attempt: str, task: str = "T1", **fields: object) -> str:
        call = SpentCall(attempt=attempt, task_id=task, system="tool_use", model="m", epoch=1, **fields)
        return call.model_dump_json(exclude_defaults=True) + "\n"

    paid = Usage(input_tokens=100, output_tokens=10, cost_usd=0.01, cost_source="price_table")
    journal = tmp_path / "calls.jsonl"
    journal.write_text(line("before", usage=paid))  # an attempt of an earlier session (interrupted, resumed)
    start = journal.stat().st_size
    with journal.open("a") as more:
        more.write(line("lost", sent=1) + line("lost", usage=paid) + line("lost", sent=1))  # died in its 2nd call
        more.write(line("other", task="T2", usage=paid) + line("kept", usage=paid))

    calls = lost_calls(journal, start, ("T1", "tool_use", "m", 1), "kept")
    assert {call.attempt for call in calls} == {"lost"}
    record = ResultRecord.model_validate(
        {
            "task_id": "T1",
            "benchmark": "b",
            "system": "tool_use",
            "model": "m",
            "epoch": 1,
            "question_type": "factoid",
            "status": "completed",
            "answer": {},
            "scores": {},
            "usage": paid.model_dump(),
            "latency_s": 1.0,
            "latency_by_phase": {},
            "model_calls": 1,
            "attempt": "kept",
            "tool_calls": [],
            "trace_file": "t.json",
        }
    )
    keep_lost_spend(record, calls, losses=2)  # the unit lost two actors; the second loss journaled nothing
    assert record.retried_attempts == ["lost", "lost-2"]
    assert record.retried_usage is not None and record.retried_usage.input_tokens == 100  # the finished call only
    assert record.usage.input_tokens == 200 and round(record.usage.cost_usd or 0, 6) == 0.02


@pytest.mark.slow  # joins the test cluster: ~15 s
def test_a_node_that_cannot_see_the_data_is_named_with_the_path_scripted(
    cluster: LoopbackNamespace, tmp_path: Path
) -> None:
    missing = tmp_path / "not-on-any-node.sqlite"
    probe = (
        "import sys; from data_agent_compare.engine.ray_executor import ray, check_nodes_see; "
        f"ray.init(address='127.0.0.1:{HEAD_PORT}', log_to_driver=False)\n"
        f"try:\n    check_nodes_see([{str(missing)!r}, {str(FIXTURES)!r}])\n"
        "except Exception as refused:\n    print(type(refused).__name__, refused)"
    )
    done = cluster.run(str(ROOT / ".venv" / "bin" / "python"), "-c", probe, **RAY_ENV)
    said = done.stdout.strip().splitlines()[-1:]
    assert said and said[0].startswith("NodeCannotSeeData node 127.0.0."), done.stdout + done.stderr
    assert f"cannot see {missing}:" in said[0] and str(FIXTURES) + " " not in said[0]
