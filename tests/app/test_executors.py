"""Executors and scheduling: worker processes give the thread executor's results, resume and die with their
parent; rate limits show as queueing; a slow system does not starve a fast one; the progress line's counts.

The `compare` children run a scripted test model from a --plugin file (provider "scripted", an alias in a
`models_file`), importable in every worker process, on a small quiz benchmark over the fixtures' SQLite
database (helpers.write_quiz_run, as in tests/app/test_crash_safety.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from data_agent_compare.cli.main import progress_line
from data_agent_compare.core import Answer, CallContext, Message, ModelConfig, ModelRequest, RunContext, System, Task
from data_agent_compare.core.limits import RateLimiter
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.config import ConfigError, RunConfig, load_run_config
from data_agent_compare.engine.events import UnitFinished
from data_agent_compare.engine.executors import choose_executor
from data_agent_compare.engine.progress import RunProgress
from data_agent_compare.engine.runner import FairQueue, execute, plan_run
from data_agent_compare.engine.units import Unit
from data_agent_compare.providers.scripted import tool_call_message

from helpers import (
    ROOT,
    compare_command,
    load_tasks,
    make_plan,
    quiz_questions,
    registered_system,
    write_quiz_run,
)

TASKS = 6
SYSTEMS = ["tool_use", "planning"]


@pytest.fixture
def setup(tmp_path: Path) -> dict[str, Path]:
    settings = f"workflows: [{', '.join(SYSTEMS)}]\nepochs: 2\nconcurrency: 2\n"
    return write_quiz_run(tmp_path, quiz_questions(TASKS), settings, kill_at_call="answering")


def compare(*flags: str, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    return subprocess.run(
        compare_command(*flags), cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment
    )


def outcome(run_dir: Path) -> dict[tuple[str, str, str, int], tuple]:
    """Each unit's result as a comparison sees it (timings aside): answer, status, scores, model calls, tokens."""
    return {
        r.key: (r.status, r.answer, r.scores, r.model_calls, r.usage.input_tokens, r.usage.output_tokens)
        for r in read_run(run_dir).records
    }


def units_of(run_dir: Path) -> list[tuple]:
    lines = (run_dir / "results.jsonl").read_text().splitlines()
    return [(r["task_id"], r["system"], r["epoch"]) for r in map(json.loads, lines)]


@pytest.mark.slow  # three `compare` processes, two of them with worker processes: ~30 s
def test_the_process_executor_gives_the_thread_executors_results_and_resumes_after_a_worker_dies_scripted(
    tmp_path, setup
):
    config = str(setup["config"])
    threads, processes, killed = tmp_path / "threads", tmp_path / "processes", tmp_path / "killed"
    assert compare("--config", config, "--out", str(threads)).returncode == 0
    done = compare("--config", config, "--out", str(processes), "--executor", "process")
    assert done.returncode == 0, done.stderr
    expected = outcome(threads)
    assert len(expected) == TASKS * len(SYSTEMS) * 2 and outcome(processes) == expected
    run = read_run(processes)
    assert run.manifest.config["executor"] == "process" and run.warnings == [] and run.interrupted == []
    assert run.journaled_calls == read_run(threads).journaled_calls  # each worker journaled its calls
    # each worker sent the seconds its models took to load with its first unit
    loaded = {key: s for key, s in run.manifest.model_load_s.items() if "(worker " in key}
    models = set(read_run(threads).manifest.model_load_s) & {r.model for r in run.records}
    assert loaded and {key.split(" (worker ")[0] for key in loaded} == models and min(loaded.values()) >= 0
    for record in run.records:
        assert (processes / record.trace_file).is_file()

    # A worker killed at its fifth model call stops the run (exit 1, manifest failed); resume finishes it.
    lost = compare("--config", config, "--out", str(killed), "--executor", "process", KILL_AT_CALL="5")
    assert lost.returncode == 1 and "a worker died" in lost.stderr, lost.stderr
    assert read_run(killed).manifest.status == "failed"
    resumed = compare("--resume", "--out", str(killed))
    assert resumed.returncode == 0, resumed.stderr
    units = units_of(killed)
    assert len(units) == len(set(units)) == len(expected) and outcome(killed) == expected
    assert sum(a.model_calls for a in read_run(killed).interrupted) >= 1  # the dead workers' paid calls


def test_the_executor_is_worker_processes_when_enough_units_are_in_flight_on_more_than_one_core():
    config = load_run_config(None, {"concurrency": 64})
    scripted = [ModelConfig(alias="scripted", provider="scripted", model_id="v1")]
    assert choose_executor(config, 1000, scripted, cores=2)[0] == "process"
    assert choose_executor(config, 1000, scripted, cores=1)[0] == "thread"
    assert choose_executor(config, 8, scripted, cores=2)[0] == "thread"  # 8 units: 8 in flight at most
    local = [ModelConfig(alias="local", provider="local", model_id="gemma")]
    assert choose_executor(config, 1000, local, cores=8)[0] == "thread"  # one embedded model, not one per worker
    given = config.model_copy(update={"executor": "thread"})
    assert choose_executor(given, 1000, scripted, cores=8) == ("thread", "--executor thread")
    assert RunConfig().executor == "auto"


@pytest.mark.slow  # two `compare` processes, one of them with worker processes: ~30 s
def test_the_automatically_chosen_executor_gives_the_thread_executors_results_and_says_which_scripted(tmp_path, setup):
    config, chosen, threads = str(setup["config"]), tmp_path / "chosen", tmp_path / "threads"
    flags = ("--config", config, "--concurrency", "32", "--epochs", "3")  # 36 units, 32 in flight
    assert compare(*flags, "--out", str(threads), "--executor", "thread").returncode == 0
    done = compare(*flags, "--out", str(chosen))
    assert done.returncode == 0, done.stderr
    cores = len(os.sched_getaffinity(0))
    expected = "process" if cores > 1 else "thread"
    assert f"executor: {expected} (auto: " in done.stdout + done.stderr
    manifest = read_run(chosen).manifest
    assert manifest.config["executor"] == "auto"  # a resume chooses again, for the units it has left
    assert manifest.executor["kind"] == expected and manifest.executor["why"].startswith("auto: ")
    assert read_run(threads).manifest.executor == {"kind": "thread", "why": "--executor thread"}
    assert outcome(chosen) == outcome(threads) and len(outcome(chosen)) == TASKS * len(SYSTEMS) * 3


@pytest.mark.slow  # two `compare` processes: ~20 s
def test_workers_die_with_a_killed_parent_and_the_run_resumes_scripted(tmp_path, setup):
    out, pids = tmp_path / "run", tmp_path / "pids"
    env = {**os.environ, "MODEL_DELAY_S": "0.3", "PIDS_FILE": str(pids)}
    flags = ("--config", str(setup["config"]), "--out", str(out), "--executor", "process")
    parent = subprocess.Popen(compare_command(*flags), cwd=ROOT, stderr=subprocess.DEVNULL, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(units_of(out) if (out / "results.jsonl").exists() else []) < 3:
        time.sleep(0.05)
    parent.send_signal(signal.SIGKILL)
    parent.wait(timeout=10)
    workers = {int(pid) for pid in pids.read_text().split()}
    assert workers and parent.pid not in workers
    time.sleep(3)  # PR_SET_PDEATHSIG: each worker gets SIGTERM, journals its calls in flight, exits
    assert [pid for pid in workers if _alive(pid)] == []
    calls = (out / "calls.jsonl").read_text().splitlines()
    assert any(json.loads(line).get("in_flight") for line in calls)  # the workers noted their calls in flight
    resumed = compare("--resume", "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr
    units = units_of(out)
    assert len(units) == len(set(units)) == TASKS * len(SYSTEMS) * 2


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:  # a zombie is dead
        return stat.read().split(")")[-1].split()[0] != "Z"


# ---------------------------------------------------------------- rate limits


def answer_after_one_call(request: ModelRequest, context: CallContext) -> Message:
    return tool_call_message("answer", {"answer": "A"})


class OneCall(System):
    """A test system: one model call, then its answer."""

    name = "test_one_call"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        ctx.generate([Message(role="user", content=task.question)])
        return Answer(text="A")


def test_n_calls_under_a_requests_per_minute_limit_take_n_over_r_minutes_and_wait_as_queueing_scripted(
    tmp_path, scripted_model, monkeypatch
):
    # Load can only make calls later, so the test bounds times from below and compares what is counted
    # (the limiter's waits, the steps' queue_s, the records' queue phase), never how fast a wait ends.
    tasks = [t.model_copy(update={"id": f"T{i}"}) for i, t in enumerate(load_tasks("bundled")[:1] * 8)]
    limits = {"scripted": {"rpm": 120, "burst_s": 0.5}}  # 2 calls a second, one at a time
    called: list[float] = []  # when each call reached the model
    entered: list[float] = []  # when each call asked the limiter
    waits: list[float] = []  # what the limiter made each call wait, as it said

    def respond(request: ModelRequest, context: CallContext) -> Message:
        called.append(time.monotonic())
        return answer_after_one_call(request, context)

    admit = RateLimiter.admit

    def counted_admit(self: RateLimiter, *args: Any, **kwargs: Any) -> tuple[float, Any]:
        entered.append(time.monotonic())
        waited, ticket = admit(self, *args, **kwargs)
        waits.append(waited)
        return waited, ticket

    monkeypatch.setattr(RateLimiter, "admit", counted_admit)
    with registered_system(OneCall):
        plan = make_plan(tmp_path, tasks, scripted_model(respond), ["test_one_call"], concurrency=4, limits=limits)
        execute(plan)
    run = read_run(plan.run_dir)
    assert len(run.records) == len(called) == len(waits) == 8  # every call passed the limiter once
    # The bucket holds one request when the first call asks, and refills one every half-second: the k-th call
    # to reach the model came no sooner than k half-seconds after that (8 calls: 3.5 s).
    start = min(entered)
    early = [(k, round(at - start, 3)) for k, at in enumerate(sorted(called)) if at - start < k * 0.5 - 0.01]
    assert early == [], "calls reached the model sooner than the limit allows (k, seconds)"
    steps = [step for record in run.records for step in run.trace(record).model_calls]
    queued = sorted(step.queue_s for step in steps)
    assert sum(waits) > 0 and queued == pytest.approx(sorted(waits), abs=1e-6)  # each wait is its call's queueing
    in_queue = [r.latency_by_phase["queue"].latency_s for r in run.records if "queue" in r.latency_by_phase]
    assert sum(in_queue) == pytest.approx(sum(queued), rel=0.05)  # the records' queue phase holds it


def test_limits_are_validated_unknown_keys_and_names_exit_2(tmp_path):
    bad_key = tmp_path / "bad_key.yaml"
    bad_key.write_text("limits:\n  local: {rpm: 60, rps: 1}\n")
    with pytest.raises(ConfigError, match=r"limits\.local\.rps"):
        load_run_config(bad_key, {})
    bad_name = tmp_path / "bad_name.yaml"
    bad_name.write_text("limits:\n  gtp-5: {rpm: 60}\n")
    with pytest.raises(ConfigError, match="'gtp-5' is neither a provider nor a model alias"):
        plan_run(load_run_config(bad_name, {}))
    with pytest.raises(ConfigError, match=r"--ray-address .* needs --executor ray"):
        plan_run(load_run_config(None, {"ray_address": "127.0.0.1:6379"}))


# ---------------------------------------------------------------- fairness


class Slow(OneCall):
    name = "test_slow"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        time.sleep(0.4)
        return super().run(task, ctx)


class Fast(OneCall):
    name = "test_fast"


def test_a_slow_system_does_not_starve_a_fast_one_at_concurrency_2_scripted(tmp_path, scripted_model):
    tasks = [t.model_copy(update={"id": f"T{i}"}) for i, t in enumerate(load_tasks("bundled")[:1] * 6)]
    with registered_system(Slow), registered_system(Fast):  # the slow one first: system-major order would
        model = scripted_model(answer_after_one_call)  # run all of its units before any of the fast one's
        plan = make_plan(tmp_path, tasks, model, ["test_slow", "test_fast"], concurrency=2)
        execute(plan)
    order = [system for _, system, _ in units_of(plan.run_dir)]
    assert order[0] == "test_fast"  # the fast one started beside the slow one, not after all of its units
    assert order.index("test_slow") >= 3  # its units kept running in one slot while the slow one held the other
    assert order[-1] == "test_slow"


def test_the_fair_queue_takes_the_system_with_the_fewest_units_in_flight_round_robin(tmp_path):
    task = load_tasks("bundled")[0]
    model = make_plan(tmp_path, [task], _alias("m"), ["tool_use"]).models[0]
    units = [Unit(task.model_copy(update={"id": f"T{i}"}), system, model, 1) for system in "AB" for i in range(3)]
    queue = FairQueue(units)
    first = [queue.pop() for _ in range(3)]
    assert [u.system for u in first if u] == ["A", "B", "A"]
    queue.done(first[1])  # B finished its unit: B has none in flight, A two
    assert [u.system for u in (queue.pop(), queue.pop(), queue.pop()) if u] == ["B", "B", "A"]
    assert queue.pop() is None and len(queue) == 0


def _alias(name: str):  # a model alias that is never called
    from data_agent_compare.core import ModelConfig

    return ModelConfig(alias=name, provider="scripted", model_id=name)


# ---------------------------------------------------------------- progress


def test_the_progress_line_shows_in_flight_failed_retries_tokens_cost_and_eta_scripted(tmp_path, scripted_model):
    tasks = [t.model_copy(update={"id": f"T{i}"}) for i, t in enumerate(load_tasks("bundled")[:1] * 4)]
    with registered_system(OneCall):
        plan = make_plan(tmp_path, tasks, scripted_model(answer_after_one_call), ["test_one_call"], concurrency=2)
        counts = RunProgress(total=6, done=2)  # a resumed run: 2 units were already there
        lines = []
        execute(plan, listeners=[counts, lambda e: isinstance(e, UnitFinished) and lines.append(progress_line(counts))])
    assert counts.done == 6 and counts.failed == 0 and counts.in_flight == 0 and len(counts.unit_s) == 4
    assert counts.tokens == sum(r.usage.input_tokens + r.usage.output_tokens for r in read_run(plan.run_dir).records)
    assert lines[-1].startswith("0 in flight · 0 failed · 0 retries · ") and lines[-1].endswith("ETA 0:00:00")
    assert lines[0].startswith("1 in flight")  # the first to finish left its neighbour running

    halfway = RunProgress(total=10, done=4, failed=1, in_flight=2, retries=3, tokens=12_345, cost_usd=0.0123)
    halfway.unit_s = [10.0, 20.0, 30.0]  # median 20 s; 6 units left, 2 at a time: 3 waves
    assert progress_line(halfway) == "2 in flight · 1 failed · 3 retries · 12.3k tok · $0.0123 · ETA 0:01:00"


class SlowToPrepare(OneCall):
    """A test system whose `prepare` (an index build, say) reads the progress line while it works."""

    name = "test_slow_to_prepare"
    counts: ClassVar[RunProgress | None] = None
    seen: ClassVar[list[str]] = []

    def prepare(self, tasks: list[Task], setup) -> list[dict]:
        SlowToPrepare.seen.append(progress_line(SlowToPrepare.counts))
        return []


def test_the_progress_line_says_what_the_run_prepares_before_its_first_unit_scripted(tmp_path, scripted_model):
    tasks = load_tasks("bundled")[:2]
    with registered_system(SlowToPrepare):
        plan = make_plan(tmp_path, tasks, scripted_model(answer_after_one_call), ["test_slow_to_prepare"])
        SlowToPrepare.counts = counts = RunProgress(total=2)
        lines = []
        execute(plan, listeners=[counts, lambda e: isinstance(e, UnitFinished) and lines.append(progress_line(counts))])
    model = plan.models[0].alias
    assert SlowToPrepare.seen == [f"preparing test_slow_to_prepare/{model} (indexes are built once and cached) …"]
    assert counts.stage == "" and lines[-1].startswith("0 in flight")  # the counts again once units run


# ---------------------------------------------------------------- Ray, in a network namespace of its own


def loopback_only_namespace() -> list[str]:
    """`unshare -n sh -c 'ip link set lo up && exec ...'`: Ray's dashboard probes cloud metadata addresses at
    every start, so Ray runs only where nothing can leave the machine. Skipped (failed in CI) without it."""
    missing = [tool for tool in ("unshare", "ip") if shutil.which(tool) is None]
    problem = f"{' and '.join(missing)} not found" if missing else None
    if problem is None:
        probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, text=True)
        problem = None if probe.returncode == 0 else f"unshare -n failed (root needed): {probe.stderr.strip()}"
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI runs as root with unshare and ip, yet: {problem}")
        pytest.skip(f"no loopback-only network namespace for Ray: {problem}")
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"]


@pytest.mark.slow  # four `compare` processes, three of them with a local Ray instance: ~80 s
def test_the_ray_executor_gives_the_thread_executors_results_in_a_loopback_only_namespace_scripted(tmp_path, setup):
    namespace = loopback_only_namespace()
    config = str(setup["config"])
    threads, on_ray, killed = tmp_path / "threads", tmp_path / "ray", tmp_path / "killed"

    def on_ray_in_the_namespace(*flags: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, **env}
        command = [*namespace, *compare_command(*flags)]
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, env=environment)

    assert compare("--config", config, "--out", str(threads)).returncode == 0
    done = on_ray_in_the_namespace("--config", config, "--out", str(on_ray), "--executor", "ray")
    assert done.returncode == 0, done.stderr
    assert outcome(on_ray) == outcome(threads)
    run = read_run(on_ray)
    assert run.manifest.config["executor"] == "ray" and run.manifest.status == "completed"
    assert run.journaled_calls == read_run(threads).journaled_calls  # the journal actor wrote every call
    assert any("(worker " in key for key in run.manifest.model_load_s)  # each actor's model load time
    units = units_of(on_ray)
    assert len(units) == len(set(units)) == TASKS * len(SYSTEMS) * 2

    # An actor killed at its fifth model call costs its unit in flight only: the unit runs again on another
    # actor (the lost one restarts), carrying its lost attempt and what it spent; the run completes.
    once = str(tmp_path / "killed-once")
    lost = on_ray_in_the_namespace(
        "--config", config, "--out", str(killed), "--executor", "ray", KILL_AT_CALL="5", KILL_ONCE_FILE=once
    )
    assert lost.returncode == 0, lost.stderr
    run = read_run(killed)
    units = units_of(killed)
    assert len(units) == len(set(units)) == TASKS * len(SYSTEMS) * 2
    retried = [record for record in run.records if record.retried_attempts]
    assert len(retried) == 1 and run.manifest.executor["lost_attempts"] == 1 and run.manifest.status == "completed"
    # The lost attempt's first call, paid, is kept in the unit's usage when its journal line left the actor
    # before the kill (Ray sends it as the call finishes; a kill -9 right after can beat it).
    again = retried[0]
    paid = again.retried_usage or again.usage.model_copy(update={"input_tokens": 0, "output_tokens": 0})
    assert not run.interrupted  # its spend is in its unit's record, not counted twice
    on_threads, on_lost = outcome(threads), outcome(killed)
    alone = on_threads.pop(again.key)
    assert on_lost.pop(again.key) == (*alone[:4], alone[4] + paid.input_tokens, alone[5] + paid.output_tokens)
    assert on_lost == on_threads

    # SIGTERM stops it gracefully (exit 143): the actors journal their calls in flight first.
    stopped = tmp_path / "stopped"
    flags = ("--config", config, "--out", str(stopped), "--executor", "ray")
    env = {**os.environ, "MODEL_DELAY_S": "0.5"}
    run = subprocess.Popen([*namespace, *compare_command(*flags)], cwd=ROOT, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(units_of(stopped) if (stopped / "results.jsonl").exists() else []) < 2:
        time.sleep(0.05)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=60) == 143, run.stderr.read() if run.stderr else ""
    assert read_run(stopped).manifest.status == "interrupted"
    calls = [json.loads(line) for line in (stopped / "calls.jsonl").read_text().splitlines()]
    assert sum(call.get("in_flight", 0) for call in calls) >= 1


class FrozenClock:
    """The rate limiter's clock, moved only by its own sleeps: a descheduled test thread refills no bucket."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_token_bucket_charges_the_reported_tokens_and_refuses_a_wait_past_the_deadline(monkeypatch):
    from data_agent_compare.core import ModelConfig, ModelError, limits
    from data_agent_compare.core.limits import RateLimit, RateLimiter

    monkeypatch.setattr(limits, "time", FrozenClock())
    limiter = RateLimiter({"m": RateLimit(tpm=6000, burst_s=0.1)})  # 100 tokens a second, 10 at once
    model = ModelConfig(alias="m", provider="scripted", model_id="m")
    request = ModelRequest(messages=[Message(role="user", content="x" * 40)])  # an estimated 10 tokens
    waited, ticket = limiter.admit(request, model, max_wait_s=5)
    assert waited == 0.0
    limiter.settle(ticket, 30)  # the reply reported 30 tokens: 20 more than estimated are owed
    waited, ticket = limiter.admit(request, model, max_wait_s=5)
    assert waited == pytest.approx(0.3)  # 10 needed on top of a debt of 20, at 100 a second
    with pytest.raises(ModelError, match="no capacity within the call's deadline") as refused:
        limiter.admit(request, model, max_wait_s=0.01)
    assert refused.value.attempts == 0  # nothing was sent
