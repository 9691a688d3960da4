"""`--executor ray [--ray-address ADDR]`: units run in Ray actors, on one machine or a cluster.

The driver (the `compare` process) keeps what makes a run one run: the lock on the run directory, the
manifest and the one writer of records and traces; it decides which unit runs next (`FairQueue`). Each of
`--concurrency` actors (one CPU each) rebuilds the plan once (`WorkerPlan.build`: plugins, systems, the
prepared tasks; models, embedding model and indexes loaded before its first unit's clock) with its own
gateway server, and runs one unit at a time. Model calls are journaled as they finish through a journal
actor placed on the driver's node, which appends them to the run's `calls.jsonl`. Every node must have the
suite (and any --plugin file, and the benchmark's data) at the same paths as the driver.

Without `--ray-address` a local Ray instance is started (no dashboard, no usage stats). Ray's dashboard
process probes cloud metadata addresses at every start whatever the settings: start it where that cannot
leave the machine (the tests run `compare` in a network namespace with only loopback: `unshare -n`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from concurrent.futures import BrokenExecutor, Future
from pathlib import Path
from typing import Any

from ..compare.runlog import CALLS_FILE, RunLogWriter, SpentCall
from ..providers.endpoint import GatewayServer
from .executors import AppendJournal, WorkerPlan, worker_load_times
from .units import Attempts, RunPlan, Unit, UnitResult, run_unit

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


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


class _Journal:
    """The run's spend journal on the driver's node; actors send it each finished call."""

    def __init__(self, path: str) -> None:
        self.journal = AppendJournal(Path(path))

    def write(self, line: str) -> None:
        os.write(self.journal.fd, line.encode())


class _RemoteJournal:
    """An actor's `SpendSink`: each call goes to the journal actor as it finishes (no wait for the write)."""

    def __init__(self, journal: Any) -> None:
        self.journal = journal
        self.sent: list[Any] = []

    def spent(self, call: SpentCall) -> None:
        self.sent.append(self.journal.write.remote(call.model_dump_json(exclude_defaults=True) + "\n"))

    def flush(self) -> None:
        """Wait until every call sent so far is in the journal (before the unit's record is)."""
        sent, self.sent = self.sent, []
        ray.get(sent)


class _UnitRunner:
    """One Ray actor: the plan built once, then one unit at a time."""

    def __init__(self, payload: WorkerPlan, journal: Any) -> None:
        self.plan, loaded = payload.build()
        self.model_load_s = worker_load_times(loaded)  # sent with this actor's first unit
        self.endpoint = GatewayServer()
        self.journal = _RemoteJournal(journal)
        self.attempts = Attempts()

    def run(self, unit: Unit) -> UnitResult:
        try:
            result = run_unit(unit, self.plan, self.endpoint.open_session, self.journal, self.attempts)
        finally:
            self.journal.flush()
        loaded, self.model_load_s = self.model_load_s, None
        return result._replace(model_load_s=loaded)

    def note_in_flight(self) -> None:
        """A graceful stop: journal the calls still in flight (runs beside `run`: two threads per actor)."""
        self.attempts.journal_in_flight(self.journal)
        self.journal.flush()


class RayExecutor:
    """Units on `concurrency` Ray actors; a unit goes to an idle actor (module docstring)."""

    def __init__(self, plan: RunPlan, pending: list[Unit]) -> None:
        workers = max(1, min(plan.config.concurrency, len(pending)))
        self.started_ray = not ray.is_initialized()
        if self.started_ray:
            handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
            _init(plan.config.ray_address, workers)
            for sig, handler in handlers.items():  # Ray's own handlers would exit without a graceful stop
                if handler is not None:
                    signal.signal(sig, handler)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        journal_path = str(Path(plan.run_dir).resolve() / CALLS_FILE)
        self.journal = ray.remote(num_cpus=0)(_Journal).options(scheduling_strategy=here).remote(journal_path)
        payload = WorkerPlan.of(plan, pending, workers)
        runner = ray.remote(num_cpus=1, max_restarts=0, max_concurrency=2)(_UnitRunner)  # run + note_in_flight
        self.actors = [runner.remote(payload, self.journal) for _ in range(workers)]
        self._idle = list(self.actors)
        self._lock = threading.Lock()

    def submit(self, unit: Unit) -> Future[UnitResult]:
        with self._lock:
            actor = self._idle.pop()  # the runner keeps at most `concurrency` units in flight
        result: Future[UnitResult] = Future()

        def finished(ray_future: Future[UnitResult]) -> None:
            with self._lock:
                self._idle.append(actor)  # before the runner hears of it and submits the next unit
            try:
                result.set_result(ray_future.result())
            except ray.exceptions.RayActorError as lost:  # the actor's process or node died
                result.set_exception(BrokenExecutor(f"Ray actor lost: {lost}"))
            except BaseException as failure:
                result.set_exception(failure)

        actor.run.remote(unit).future().add_done_callback(finished)
        return result

    def abandon(self, writer: RunLogWriter) -> None:
        """Interrupted: each actor journals its calls in flight (a few seconds at most), then all stop."""
        noted = [actor.note_in_flight.remote() for actor in self.actors]
        with contextlib.suppress(Exception):  # a dead actor or a slow one: stop anyway
            ray.get(noted, timeout=5)
        self.shutdown()

    def shutdown(self) -> None:
        for actor in [*self.actors, self.journal]:
            ray.kill(actor)
        if self.started_ray:
            ray.shutdown()


def _init(address: str | None, workers: int) -> None:
    """Join `address`, or start a local Ray instance with a CPU per worker (no dashboard, quiet)."""
    # Every Ray worker hides an unusable pyarrow before Ray's serializers look for it.
    runtime_env = {"worker_process_setup_hook": f"{__name__}._hide_unusable_pyarrow"}
    if address:
        ray.init(address=address, log_to_driver=False, runtime_env=runtime_env)
        return
    ray.init(
        num_cpus=workers,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=512 * 2**20,
        runtime_env=runtime_env,
    )
