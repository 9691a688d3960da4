"""`--executor ray [--ray-address ADDR]`: units run in Ray actors, on one machine or a cluster (docs/ray.md).

The driver (the `compare` process) keeps what makes a run one run: the lock on the run directory, the
manifest and the one writer of records and traces; it decides which unit runs next (`FairQueue`). Each of
`--concurrency` actors (one CPU each) rebuilds the plan once (`WorkerPlan.build`: plugins, systems, the
prepared tasks; models, embedding model and indexes loaded before its first unit's clock) with its own
gateway server, and runs one unit at a time. Model calls are journaled as they finish through a journal
actor placed on the driver's node, which appends them to the run's `calls.jsonl`.

What a node needs: Ray and Python with the suite's dependencies. The suite's own code and the --plugin files
travel with the run (Ray's runtime environment, `py_modules`); the benchmark's data must be at the driver's
paths on every node, which the run checks on every node before the first unit, refusing with the node and
the path it cannot see.

A lost actor or node costs its units in flight only: a unit is sent only to an actor that is up (built and
idle), so the run goes on at the pace of the actors it has, and says how many run and how many wait for
resources whenever that changes (also in the manifest's `executor`). A unit whose actor died is run again on
another; its lost attempt's spend (from calls.jsonl) is kept in its record as for any retried attempt, and
only the attempt whose result reaches the driver is recorded. Lost actors restart (`max_restarts=-1`) where
resources allow. A unit that loses `MAX_LOSSES` actors stops the run: it may be what kills them.

Without `--ray-address` a local Ray instance is started (no dashboard, no usage stats). Ray's dashboard
process probes cloud metadata addresses at every start whatever the settings: start it where that cannot
leave the machine (the tests run `compare` in a network namespace with only loopback: `unshare -n`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import BrokenExecutor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.conversations import CallRequest
from ..core.model import PROVIDERS
from ..core.runlog import CALLS_FILE, ResultRecord, RunLogWriter, SpentCall
from ..core.trace import Usage, utc_now
from ..providers.endpoint import GatewayServer
from .config import ConfigError
from .executors import AppendJournal, WorkerPlan, worker_load_times
from .units import Attempts, RunPlan, Unit, UnitResult, run_unit

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

MAX_LOSSES = 3  # actors a unit may lose before the run stops: a unit that kills every actor it meets
RESTART_WAIT_S = 1.0  # between asks whether a lost actor is back
SETTLE_S = 2.0  # the capacity is said once it held this long (actors start one after another)
PACKAGE = "data_agent_compare"


def _hide_unusable_pyarrow() -> None:
    """Ray registers Arrow serializers whenever `import pyarrow` does not raise ModuleNotFoundError, and fails
    on a pyarrow that is installed but unusable (built for NumPy 2 beside NumPy 1.26, as here): such a
    pyarrow is hidden, so Ray goes without (the suite does not use Arrow)."""
    try:
        import pyarrow  # noqa: F401
    except ModuleNotFoundError:
        pass
    except ImportError:
        sys.modules["pyarrow"] = None  # type: ignore[assignment]  # import now raises ModuleNotFoundError


_hide_unusable_pyarrow()  # in the driver and in every Ray worker that loads this module

import ray  # noqa: E402 - after the settings above, which Ray reads at import
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # noqa: E402


class NodeCannotSeeData(ConfigError):
    """A node of the cluster lacks a path the run reads (the benchmark's data): refused before any unit."""


# ---------------------------------------------------------------- the actors


class _Journal:
    """The run's spend journal on the driver's node; actors send it each finished call."""

    def __init__(self, path: str) -> None:
        self.journal = AppendJournal(Path(path))

    def write(self, line: str) -> None:
        os.write(self.journal.fd, line.encode())

    def write_request(self, call: str) -> None:
        """A finished call's request, for the run's conversations.sqlite on this node."""
        with contextlib.suppress(OSError, sqlite3.Error):
            self.journal.requested(CallRequest.model_validate_json(call))

    def sync(self) -> None:
        """Answered once every line sent to it before is written (calls are served in order)."""


class _RemoteJournal:
    """An actor's `SpendSink`: each call goes to the journal actor as it finishes (no wait for the write)."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.sent: list[Any] = []

    def spent(self, call: SpentCall) -> None:
        self.sent.append(self.journal.write.remote(call.model_dump_json(exclude_defaults=True) + "\n"))

    def requested(self, call: CallRequest) -> None:
        self.sent.append(self.journal.write_request.remote(call.model_dump_json()))

    def flush(self) -> None:
        """Wait until every call sent so far is in the journal (before the unit's record is)."""
        sent, self.sent = self.sent, []
        ray.get(sent)


class _UnitRunner:
    """One Ray actor: the plan built once (plugins from the files the run shipped), then one unit at a time."""

    def __init__(self, payload: WorkerPlan, journal: Any, plugins: dict[str, str]) -> None:
        payload.config = payload.config.model_copy(update={"plugins": _local_plugins(payload.config.plugins, plugins)})
        self.plan, loaded = payload.build()
        self.model_load_s = worker_load_times(loaded)  # sent with this actor's first unit
        self.endpoint = GatewayServer()
        self.journal = _RemoteJournal(journal)
        self.attempts = Attempts()

    def ready(self) -> str:
        """Answered once the plan is built: the node this actor runs on."""
        return ray.get_runtime_context().get_node_id()

    def run(self, unit: Unit) -> UnitResult:
        try:
            result = run_unit(unit, self.plan, self.endpoint.open_session, self.journal, self.attempts)
        finally:
            self.journal.flush()
        loaded, self.model_load_s = self.model_load_s, None
        return result.encoded()._replace(model_load_s=loaded)

    def note_in_flight(self) -> None:
        """A graceful stop: journal the calls still in flight (runs beside `run`: two threads per actor)."""
        self.attempts.journal_in_flight(self.journal)
        self.journal.flush()


def _local_plugins(paths: list[str], sources: dict[str, str]) -> list[str]:
    """The run's plugin files as this node can import them: a file the node lacks is written from the copy
    the run shipped into a folder of its own (same file name, so the same module name)."""
    local = []
    for path in paths:
        if path in sources and not os.path.isfile(path):
            folder = Path(tempfile.mkdtemp(prefix="compare-plugins-"))
            (folder / Path(path).name).write_text(sources[path], encoding="utf-8")
            path = str(folder / Path(path).name)
        local.append(path)
    return local


def _missing_paths(paths: list[str]) -> tuple[str, str, list[str]]:
    """On one node: its id, its address, and which of `paths` it cannot see."""
    context = ray.get_runtime_context()
    return context.get_node_id(), ray.util.get_node_ip_address(), [p for p in paths if not os.path.exists(p)]


# ---------------------------------------------------------------- the driver's side


@dataclass
class _Job:
    """A unit the runner handed over, until its result reaches the runner (once)."""

    unit: Unit
    future: Future[UnitResult]
    losses: int = 0


@dataclass
class _Slot:
    actor: Any
    up: bool = False  # built and reachable
    busy: bool = False
    node: str = ""


@dataclass
class Capacity:
    """What the manifest's `executor` says of a Ray run: actors asked, and each change in how many run."""

    asked: int
    changes: list[dict[str, Any]] = field(default_factory=list)
    lost_attempts: int = 0

    def describe(self) -> dict[str, Any]:
        return {"actors_asked": self.asked, "capacity": self.changes, "lost_attempts": self.lost_attempts}


class RayExecutor:
    """Units on up to `concurrency` Ray actors, each unit sent to an idle actor that is up (module docstring).
    `note` receives the manifest's `executor` description whenever it changes;
    `say` takes a line for a person (the runner's `Notice` events)."""

    def __init__(
        self,
        plan: RunPlan,
        pending: list[Unit],
        note: Callable[[dict[str, Any]], None] | None = None,
        say: Callable[[str], None] = lambda _: None,
    ) -> None:
        workers = max(1, min(plan.concurrency, len(pending)))
        self.note, self.say = note or (lambda _: None), say
        self.capacity = Capacity(asked=workers)
        self.started_ray = not ray.is_initialized()
        if self.started_ray:
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            _init(plan.config.ray_address, workers, key_variables(plan))
            for sig, handler in handlers.items():  # Ray's own handlers would exit without a graceful stop
                if handler is not None:
                    signal.signal(sig, handler)
        check_nodes_see(data_paths(plan))
        self.run_dir = Path(plan.run_dir).resolve()
        self.journal_start = _size(self.run_dir / CALLS_FILE)  # this session's lost attempts are journaled after
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        self.journal: Any = (  # an actor handle: its methods are called `.remote()`
            ray.remote(num_cpus=0)(_Journal).options(scheduling_strategy=here).remote(str(self.run_dir / CALLS_FILE))  # type: ignore[attr-defined]
        )
        payload = WorkerPlan.of(plan, pending, workers)
        plugins = {p: Path(p).read_text(encoding="utf-8") for p in plan.config.plugins if p.endswith(".py")}
        # Lost actors restart wherever resources allow; their units in flight are not retried by Ray but
        # here (`_lost`), where the one record per unit is decided.
        # ray's stubs know the keyword form of `remote` only for functions
        runner = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=0, max_concurrency=2)(_UnitRunner)  # type: ignore[call-overload]
        self.slots = [_Slot(runner.remote(payload, self.journal, plugins)) for _ in range(workers)]
        self.queue: deque[_Job] = deque()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.broken: BaseException | None = None
        self.say(f"starting {workers} actors (one CPU each) on a cluster of {_cluster_cpus()} CPUs")
        for slot in self.slots:
            self._await_up(slot)
        threading.Thread(target=self._watch_capacity, name="ray-capacity", daemon=True).start()

    # -- units

    def submit(self, unit: Unit) -> Future[UnitResult]:
        job = _Job(unit, Future())
        with self.lock:
            if self.broken is not None:
                job.future.set_exception(self.broken)
                return job.future
            self.queue.append(job)
        self._dispatch()
        return job.future

    def _dispatch(self) -> None:
        """Send waiting units to idle actors that are up."""
        with self.lock:
            while self.queue and (slot := next((s for s in self.slots if s.up and not s.busy), None)):
                job = self.queue.popleft()
                slot.busy = True
                slot.actor.run.remote(job.unit).future().add_done_callback(
                    lambda done, slot=slot, job=job: self._finished(slot, job, done)
                )

    def _finished(self, slot: _Slot, job: _Job, done: Future[UnitResult]) -> None:
        try:
            result = done.result()
        except ray.exceptions.RayActorError as lost:  # its process or node died: the unit runs again
            self._lost(slot, job, lost)
            return
        except BaseException as failure:
            with self.lock:
                slot.busy = False
            _settle(job.future, failure=failure)
        else:
            with self.lock:
                slot.busy = False
            if job.losses:  # reads the journal after a round trip to its actor: not on Ray's callback thread
                threading.Thread(target=self._settle_retried, args=(job, result), daemon=True).start()
            else:
                _settle(job.future, result=result)
        self._dispatch()

    def _settle_retried(self, job: _Job, result: UnitResult) -> None:
        keep_lost_spend(result.record, self._lost_attempts(job, result.record), job.losses)
        _settle(job.future, result=result)

    def _lost(self, slot: _Slot, job: _Job, lost: BaseException) -> None:
        with self.lock:
            slot.up = slot.busy = False
            job.losses += 1
            self.capacity.lost_attempts += 1
            again = job.losses < MAX_LOSSES and not self.stopping.is_set()
            if again:
                self.queue.appendleft(job)  # first in line: it has waited longest
        if not again:
            why = f"Ray actor lost {job.losses} times running {'/'.join(map(str, job.unit.key))}: {lost}"
            _settle(job.future, failure=BrokenExecutor(why))
        self._await_up(slot)
        self._dispatch()

    def _lost_attempts(self, job: _Job, record: ResultRecord) -> list[SpentCall]:
        """The journal lines of this unit's attempts lost with their actors in this session."""
        with contextlib.suppress(Exception):  # the journal actor is on the driver's node: it answers
            ray.get(self.journal.sync.remote(), timeout=30)
        return lost_calls(self.run_dir / CALLS_FILE, self.journal_start, job.unit.key, record.attempt)

    # -- actors coming and going

    def _await_up(self, slot: _Slot) -> None:
        """Mark the slot up once its actor answers (built, or restarted after a loss)."""

        def answered(done: Future[str]) -> None:
            try:
                node = done.result()
            except ray.exceptions.RayActorError as failure:
                if getattr(failure, "actor_init_failed", False):  # building the plan failed: no use retrying
                    self._give_up(slot, failure)
                elif not self.stopping.is_set():
                    threading.Timer(RESTART_WAIT_S, self._await_up, args=(slot,)).start()
                return
            except BaseException as failure:
                self._give_up(slot, failure)
                return
            with self.lock:
                slot.up, slot.node = True, node
            self._dispatch()

        if not self.stopping.is_set():
            slot.actor.ready.remote().future().add_done_callback(answered)

    def _give_up(self, slot: _Slot, failure: BaseException) -> None:
        with self.lock:
            self.slots.remove(slot)
            if self.slots:
                return
            self.broken = BrokenExecutor(f"no Ray actor could start: {failure}")
            failed, self.queue = list(self.queue), deque()
        for job in failed:
            _settle(job.future, failure=self.broken)

    def _watch_capacity(self) -> None:
        """Say (and note in the manifest) how many actors run and how many wait, each time that settles."""
        said: tuple[int, int, int] | None = None
        seen, since = (-1, -1, -1), time.monotonic()
        while not self.stopping.wait(0.5):
            with self.lock:
                up = sum(slot.up for slot in self.slots)
            now = capacity(self.capacity.asked, up, _cluster_cpus())
            if now != seen:
                seen, since = now, time.monotonic()
            quiet = now[0] == 0 and now[2] == 0  # all still starting: "starting N actors" was said
            if now != said and not quiet and time.monotonic() - since >= SETTLE_S:
                said = now
                self.say(capacity_line(*now))
                running, starting, waiting = now
                change = {"at": utc_now(), "running": running, "starting": starting, "waiting": waiting}
                self.capacity.changes.append(change)
                self.note(self.capacity.describe())

    # -- stopping

    def abandon(self, writer: RunLogWriter) -> None:
        """Interrupted: each actor journals its calls in flight (a few seconds at most), then all stop."""
        noted = [slot.actor.note_in_flight.remote() for slot in self.slots if slot.up]
        with contextlib.suppress(Exception):  # a dead actor or a slow one: stop anyway
            ray.get(noted, timeout=5)
        self.shutdown()

    def shutdown(self) -> None:
        self.stopping.set()
        self.note(self.capacity.describe())
        for actor in [*(slot.actor for slot in self.slots), self.journal]:
            with contextlib.suppress(Exception):
                ray.kill(actor, no_restart=True)
        if self.started_ray:
            ray.shutdown()


def capacity(asked: int, up: int, cluster_cpus: int) -> tuple[int, int, int]:
    """(running, starting, waiting for resources) of `asked` actors of a CPU each, `up` of them running, on a
    cluster with `cluster_cpus` CPUs on its live nodes: those beyond its CPUs wait until a node joins."""
    waiting = max(0, asked - max(cluster_cpus, up))
    return up, asked - up - waiting, waiting


def capacity_line(running: int, starting: int, waiting: int) -> str:
    """`running units on 2 of 4 actors; 2 wait for resources (a CPU each)`."""
    asked = running + starting + waiting
    if running == asked:
        return f"running units on all {asked} actors"
    line = f"running units on {running} of {asked} actors"
    line += f"; {starting} starting" if starting else ""
    return line + (f"; {waiting} wait for resources (a CPU each: more CPUs or nodes let them start)" if waiting else "")


def _cluster_cpus() -> int:
    with contextlib.suppress(Exception):  # the cluster is going away: say nothing new
        return int(ray.cluster_resources().get("CPU", 0))
    return 0


def _settle(
    future: Future[UnitResult], *, result: UnitResult | None = None, failure: BaseException | None = None
) -> None:
    """Give the runner a unit's outcome once: a late second outcome of the same unit is dropped."""
    with contextlib.suppress(Exception):  # InvalidStateError: already settled
        if failure is not None:
            future.set_exception(failure)
        else:
            future.set_result(result)  # type: ignore[arg-type]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


# ---------------------------------------------------------------- lost attempts' spend


def lost_calls(journal: Path, start: int, key: tuple[str, str, str, int], kept: str | None) -> list[SpentCall]:
    """The calls.jsonl lines, written since byte `start`, of `key`'s attempts other than `kept`."""
    task_id = key[0]
    with journal.open("rb") as file:
        file.seek(start)
        lines = file.read().decode("utf-8", errors="replace").splitlines()
    calls = []
    for line in lines:
        if task_id not in line:  # most lines are other units': skip them before parsing
            continue
        with contextlib.suppress(ValueError):
            call = SpentCall.model_validate_json(line)
            if (call.task_id, call.system, call.model, call.epoch) == key and call.attempt != kept:
                calls.append(call)
    return calls


def keep_lost_spend(record: ResultRecord, calls: list[SpentCall], losses: int) -> None:
    """A unit run again because its actor was lost (`losses` times) keeps what the lost attempts spent, as
    `--retry-errors` keeps an earlier attempt's: in its usage (it was paid) and apart in `retried_usage`, with
    the attempt ids in `retried_attempts` (so the spend journal counts them there, not as interrupted). An
    attempt lost before it journaled anything is listed as `lost-<n>`: it spent nothing that reached the run."""
    spent = Usage()
    for call in calls:
        if not (call.sent or call.in_flight) and (call.usage.total_tokens or call.usage.cost_usd):
            spent = spent.plus(call.usage) if spent.total_tokens or spent.cost_usd else call.usage.model_copy()
    if spent.total_tokens or spent.cost_usd:
        record.usage = record.usage.plus(spent) if record.usage.total_tokens or record.usage.cost_usd else spent
        earlier = record.retried_usage
        record.retried_usage = earlier.plus(spent) if earlier is not None else spent.model_copy()
    lost = list(dict.fromkeys(call.attempt for call in calls if call.attempt not in record.retried_attempts))
    lost += [f"lost-{number}" for number in range(len(lost) + 1, losses + 1)]
    record.retried_attempts = [*record.retried_attempts, *lost]


# ---------------------------------------------------------------- what every node needs


def data_paths(plan: RunPlan) -> list[str]:
    """The local paths the actors read: the benchmark's task files and each task's data files (URLs left out)."""
    paths = [plan.config.tasks_path] if plan.config.tasks_path else []
    paths += [source.location for task in plan.tasks for source in task.data if source.location]
    if plan.replay is not None:
        paths.append(str(plan.replay.run_dir))
    return [str(Path(p).resolve()) for p in dict.fromkeys(paths) if "://" not in p]


def check_nodes_see(paths: list[str]) -> None:
    """Refuse (NodeCannotSeeData) when a live node cannot see one of `paths`, naming the node and the path."""
    if not paths:
        return
    probe = ray.remote(num_cpus=0)(_missing_paths)
    asked = [
        probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote(paths)
        for node in ray.nodes()
        if node.get("Alive")
    ]
    problems = [
        f"node {address} ({node_id[:12]}) cannot see {missing[0]}" + f" and {len(missing) - 1} more" * bool(missing[1:])
        for node_id, address, missing in ray.get(asked, timeout=120)
        if missing
    ]
    if problems:
        raise NodeCannotSeeData(
            "; ".join(problems) + ": every node needs the benchmark's data at the driver's paths (docs/ray.md)"
        )


def suite_module(staging: Path) -> str:
    """A copy of the suite's code under its import name (`data_agent_compare`) in `staging`, for Ray's
    `py_modules`: the repository folder itself has another name. Caches, tests and documents are left out."""
    root = Path(__file__).resolve().parent.parent
    target = staging / PACKAGE
    left_out = {"tests", "docs", "runs", "build"}  # at the top only: tasks/bundled/docs is the suite's data

    def ignore(folder: str, names: list[str]) -> set[str]:
        top = Path(folder) == root
        return {
            n
            for n in names
            if n.startswith(".") or n == "__pycache__" or n.endswith((".pyc", ".egg-info")) or (top and n in left_out)
        }

    shutil.copytree(root, target, ignore=ignore)
    return str(target)


def key_variables(plan: RunPlan) -> dict[str, str]:
    """The API keys the run's models (and judge) read, as set here: the actors' environment is their node's,
    so the keys travel with the run (`env_vars`: kept in the cluster, never in the run directory)."""
    names = set()
    for model in [*plan.models, plan.judge] if plan.judge else plan.models:
        provider = PROVIDERS.load(model.provider) if model.provider in PROVIDERS else None
        key_variable = getattr(provider, "key_variable", None)
        names.add(key_variable(model) if key_variable is not None else model.api_key_env)
    return {name: os.environ[name] for name in sorted(n for n in names if n and n in os.environ)}


def _init(address: str | None, workers: int, env_vars: dict[str, str]) -> None:
    """Join `address`, or start a local Ray instance with a CPU per worker (no dashboard, quiet). The suite's
    code travels to the nodes with the run (`py_modules`), as a copy made for this run, and so do the models'
    API keys (`env_vars`)."""
    staging = Path(tempfile.mkdtemp(prefix="compare-ray-"))
    runtime_env: dict[str, Any] = {
        "py_modules": [suite_module(staging)],
        "env_vars": env_vars,
        # Every Ray worker hides an unusable pyarrow before Ray's serializers look for it.
        "worker_process_setup_hook": f"{__name__}._hide_unusable_pyarrow",
    }
    try:
        if address:
            ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
            return
        ray.init(
            address="local",  # a new instance, even where `ray start` left one running on this machine
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            object_store_memory=512 * 2**20,
            runtime_env=runtime_env,
        )
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # uploaded by now
