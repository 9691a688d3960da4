"""Where units run: threads of this process (`--executor thread`, the default), worker processes
(`--executor process`) or a Ray cluster (`--executor ray`). The runner (`engine/runner.py`) decides which unit
runs next (fairly across systems) and keeps everything that makes a run one run: the lock on the run
directory, the manifest, and the one `RunLogWriter` that writes each record and trace as it arrives. An
executor only runs `run_unit` somewhere and hands back (record, trace, judge trace).

Worker processes (forkserver) each get the plan once (configuration, the prepared tasks, models; plugins are
imported again from the same files) and, before their first unit's clock starts, load the models, the
embedding model and indexes (`prepare_tools`, `System.prepare` from its index cache) and open their own
gateway server for framework systems. There is one worker per core (`--workers N` sets another number), each
running its share of `--concurrency` units at once on threads: more processes than cores only add start-up,
memory and context switches (64 single-unit workers on 2 cores ran at half the thread executor's speed).
Spend journal: each worker appends its model calls to the run's `calls.jsonl` itself, one `write(2)` per
line on an O_APPEND descriptor (lines of several processes never interleave, and a crash of the parent
loses none). Workers die with the parent (PR_SET_PDEATHSIG): on SIGTERM a worker first journals its calls
still in flight, as the thread executor does at a graceful stop. Rate limits are split: each worker holds
1/N of every limit. The embedded llama.cpp model is loaded by every worker (memory × N): warned. Units and
results travel over one pipe per worker; a worker that dies fails its units in flight (BrokenProcessPool), and
the runner stops the run (`WorkerLost`) for `--resume` to finish.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import itertools
import multiprocessing
import os
import pickle
import select
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Protocol

from ..core.benchmark import create_benchmark
from ..core.context import EndpointFactory
from ..core.conversations import CallRequest, ConversationWriter
from ..core.model import ModelConfig
from ..core.runlog import CALLS_FILE, RunLogWriter, SpentCall, UnitKey
from ..core.sanitize import install_safe_log_records
from ..core.system import create_system, prepare_systems, system_name
from ..core.task import Task
from ..providers.endpoint import GatewayServer
from ..providers.replay import ReplayLog
from ..tools import prepare_tools
from .config import RunConfig, load_plugins
from .units import Attempts, RunPlan, Unit, UnitResult, prepare_imports, prepare_models, run_unit, setup_provider


class Executor(Protocol):
    def submit(self, unit: Unit) -> Future[UnitResult]: ...

    def abandon(self, writer: RunLogWriter) -> None:
        """Stop at once (interrupted): journal the calls in flight, wait for nothing."""

    def shutdown(self) -> None:
        """Every unit finished: release the workers."""


# Units in flight from which the harness's own CPU (~3 ms a unit) outgrows one GIL: at 32 in flight the
# process executor ran 1.7-1.8x the thread executor with 1 ms replies, at 64 with 200 ms replies 1.1-2.2x
# (docs/PERFORMANCE.md); below, its start-up (a forkserver, the plan built per worker) is not paid back.
CPU_BOUND_IN_FLIGHT = 32


def choose_executor(
    config: RunConfig, units: int, models: list[ModelConfig], cores: int | None = None
) -> tuple[str, str]:
    """The executor a run uses, and why: `--executor` when given; else (`auto`) worker processes when enough
    units are in flight to make the harness CPU-bound and there is more than one core to spread them over,
    unless a model runs in-process (the embedded model: loaded once per worker, memory × workers); threads
    otherwise. Results are the same either way: only where units run differs."""
    if config.executor != "auto":
        return config.executor, f"--executor {config.executor}"
    cores = cores if cores is not None else len(os.sched_getaffinity(0))
    in_flight = max(1, min(config.concurrency or 1, units))  # settled by RunPlan: never None here
    local = [m.alias for m in models if m.provider == "local"]
    if local:
        return "thread", f"auto: the embedded model ({', '.join(local)}) is loaded once, shared by threads"
    if cores < 2:
        return "thread", "auto: one core, so worker processes would gain nothing"
    if in_flight < CPU_BOUND_IN_FLIGHT:
        return "thread", f"auto: {in_flight} units in flight (worker processes from {CPU_BOUND_IN_FLIGHT})"
    return "process", f"auto: {in_flight} units in flight on {cores} cores, more than one GIL keeps up with"


def resolve_executor(plan: RunPlan, units: int) -> dict[str, str]:
    """Settle `auto` for a run of `units` units: plan.config.executor becomes the chosen executor. Returns
    what the manifest keeps (`executor`): which executor, and why."""
    kind, why = choose_executor(plan.config, units, plan.models)
    plan.config = plan.config.model_copy(update={"executor": kind})
    return {"kind": kind, "why": why}


def executor_line(chosen: dict[str, str]) -> str:
    """`executor: process (auto: 64 units in flight on 2 cores, ...; --executor thread|process|ray chooses)`."""
    how = "; --executor thread|process|ray chooses" if chosen["why"].startswith("auto") else ""
    return f"executor: {chosen['kind']} ({chosen['why']}{how})"


def executor_warnings(plan: RunPlan) -> list[str]:
    """Said before the run: the embedded model loaded once per worker process."""
    workers = process_workers(plan.config, plan.concurrency)
    local = [m.alias for m in plan.models if m.provider == "local"]
    if plan.config.executor not in ("thread", "auto") and workers > 1 and local and plan.replay is None:
        return [
            f"--executor {plan.config.executor} with {workers} workers loads the embedded model ({', '.join(local)}) "
            f"in every worker: about {workers} × its memory (~0.5 GiB each), and the workers share the CPU cores"
        ]
    return []


class ThreadExecutor:
    """Units in threads of this process, sharing its providers, indexes and one gateway server."""

    def __init__(self, plan: RunPlan, writer: RunLogWriter, endpoint: EndpointFactory) -> None:
        self.plan, self.writer, self.endpoint = plan, writer, endpoint
        self.pool = ThreadPoolExecutor(max_workers=plan.concurrency, thread_name_prefix="unit")
        self.attempts = Attempts()

    def submit(self, unit: Unit) -> Future[UnitResult]:
        return self.pool.submit(run_unit, unit, self.plan, self.endpoint, self.writer, self.attempts)

    def abandon(self, writer: RunLogWriter) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        with contextlib.suppress(OSError):
            self.attempts.journal_in_flight(writer)

    def shutdown(self) -> None:
        self.pool.shutdown(wait=True)


# ---------------------------------------------------------------- worker processes


@dataclass
class WorkerPlan:
    """What a worker needs to rebuild the run's plan: picklable, no open file or connection."""

    config: RunConfig
    tasks: list[Task]  # as the parent prepared them (data locations rewritten by Benchmark.prepare)
    models: list[ModelConfig]
    judge: ModelConfig | None
    run_dir: str
    replay_of: str | None
    limit_share: float
    units: list[tuple[str, ModelConfig, Task]]  # what the worker may run, for System.prepare
    run_pid: int  # the run's process: workers stop when it dies
    in_flight: int = 1  # units this worker runs at once (its database worker processes are started for them)

    @classmethod
    def of(cls, plan: RunPlan, pending: list[Unit], workers: int) -> WorkerPlan:
        return cls(
            config=plan.config,
            tasks=plan.tasks,
            models=plan.models,
            judge=plan.judge,
            run_dir=str(Path(plan.run_dir).resolve()),
            replay_of=str(plan.replay.run_dir) if plan.replay else None,
            limit_share=1.0 / workers,
            units=[(u.system, u.model, u.task) for u in pending],
            run_pid=os.getpid(),
            in_flight=-(-max(1, min(plan.concurrency, len(pending))) // workers),
        )

    def build(self) -> tuple[RunPlan, dict[str, float]]:
        """The plan in this process: plugins imported, systems and benchmark created, models and indexes
        loaded (before any unit's clock); with the seconds each model took to load here."""
        config = self.config
        load_plugins(config.plugins)
        plan = RunPlan(
            config=config,
            benchmark=create_benchmark(config.benchmark, config.tasks_path, **config.benchmark_options()),
            tasks=self.tasks,
            systems={
                label: create_system(system_name(label), config.system_args.get(system_name(label)))
                for label in dict.fromkeys(s for s, _, _ in self.units)
            },
            models=self.models,
            run_dir=Path(self.run_dir),
            judge=self.judge,
            replay=ReplayLog(Path(self.replay_of)) if self.replay_of else None,
            limit_share=self.limit_share,
        )
        loaded = prepare_models(plan) if plan.replay is None else {}
        prepare_tools(plan.tasks, config.tools, self.in_flight)
        prepare_systems(plan.systems, self.units, config.tools, plan.run_dir, {}, setup_provider(plan))
        prepare_imports(plan)
        return plan, loaded


class AppendJournal:
    """The spend journal from a worker: one write(2) per line on an O_APPEND descriptor of calls.jsonl, so
    the lines of several processes never interleave; nothing is buffered, so a crash loses no finished line."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.conversations = ConversationWriter(path.parent)  # the worker's own connection to the run's store

    def spent(self, call: SpentCall) -> None:
        os.write(self.fd, (call.model_dump_json(exclude_defaults=True) + "\n").encode())

    def requested(self, call: CallRequest) -> None:
        self.conversations.put(call)


@dataclass
class _Worker:
    plan: RunPlan
    endpoint: GatewayServer
    journal: AppendJournal
    attempts: Attempts
    model_load_s: dict[str, float] | None  # sent with this worker's first unit, then None

    def __post_init__(self) -> None:
        self.tasks = {task.id: task for task in self.plan.tasks}
        self.models = {model.alias: model for model in self.plan.models}

    def unit(self, key: UnitKey) -> Unit:
        """The unit the run sent by its key: the worker has the plan's tasks (a task pickled with every unit
        cost the worker a fifth of its CPU at 256 units in flight)."""
        task_id, system, model, epoch = key
        return Unit(self.tasks[task_id], system, self.models[model], epoch)


def worker_load_times(loaded: dict[str, float]) -> dict[str, float] | None:
    """A worker's model load times as the manifest names them: `<alias> (worker <pid>)`."""
    return {f"{alias} (worker {os.getpid()})": seconds for alias, seconds in loaded.items()} or None


_WORKER: _Worker | None = None


def _die_with(run_pid: int) -> None:
    """SIGTERM this worker when the run's process dies (kill -9 included): no worker goes on spending alone.
    A worker's parent is the forkserver, which outlives a killed run, so PR_SET_PDEATHSIG is not enough: a
    thread waits on a pidfd of the run's process (or polls it), then stops the forkserver and this worker."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG, for spawn
    threading.Thread(target=_watch, args=(run_pid,), name="watch-run", daemon=True).start()


def _watch(run_pid: int) -> None:
    try:
        pidfd = os.pidfd_open(run_pid)
        select.select([pidfd], [], [])  # readable when the process ends
        os.close(pidfd)
    except OSError:  # no pidfd (old kernel) or already gone: poll
        while _alive(run_pid):
            time.sleep(0.5)
    parent = os.getppid()
    if parent not in (run_pid, 1):  # the forkserver would idle on, alone
        with contextlib.suppress(OSError):
            os.kill(parent, signal.SIGTERM)
    os.kill(os.getpid(), signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _start_worker(payload: WorkerPlan) -> None:
    global _WORKER
    _die_with(payload.run_pid)
    install_safe_log_records()  # its stderr is the run's terminal too
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's; it stops the workers
    plan, loaded = payload.build()
    journal = AppendJournal(plan.run_dir / CALLS_FILE)
    _WORKER = _Worker(plan, GatewayServer(), journal, Attempts(), worker_load_times(loaded))
    signal.signal(signal.SIGTERM, _stop_worker)


def _stop_worker(signum: int, frame: object) -> None:
    """Journal the calls still in flight (in a thread: the interrupted one may hold a lock), then exit."""
    worker = _WORKER
    if worker is not None:
        noting = threading.Thread(target=worker.attempts.journal_in_flight, args=(worker.journal,), daemon=True)
        noting.start()
        noting.join(timeout=2.0)
    os._exit(128 + signum)


def _run_in_worker(key: UnitKey) -> UnitResult:
    worker = _WORKER
    if worker is None:
        raise RuntimeError("worker process not initialised")
    result = run_unit(worker.unit(key), worker.plan, worker.endpoint.open_session, worker.journal, worker.attempts)
    loaded, worker.model_load_s = worker.model_load_s, None
    return result.encoded()._replace(model_load_s=loaded)


def _worker_main(payload: WorkerPlan, conn: Connection, threads: int) -> None:
    """A worker process: build the plan, then run the units the run sends, `threads` at a time on threads of
    this process, sending each result back as it finishes. A `None` from the run means no more units."""
    _start_worker(payload)
    send_lock = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="unit")

    def reply(number: int, future: Future[UnitResult]) -> None:
        try:
            message: tuple[int, bool, object] = (number, True, future.result())
        except BaseException as failure:  # handed to the run, which decides
            message = (number, False, _picklable(failure))
        with send_lock, contextlib.suppress(OSError):
            conn.send(message)

    while (item := conn.recv()) is not None:
        number, key = item
        pool.submit(_run_in_worker, key).add_done_callback(functools.partial(reply, number))
    pool.shutdown(wait=True)
    conn.close()


def _picklable(failure: BaseException) -> BaseException:
    try:
        pickle.dumps(failure)
    except Exception:  # an exception that cannot cross processes is sent as its text
        return RuntimeError(f"{type(failure).__name__}: {failure}")
    return failure


def process_workers(config: RunConfig, pending: int) -> int:
    """Worker processes of `--executor process`: `--workers`, else one per core, never more than units in flight."""
    in_flight = max(1, min(config.concurrency or 1, pending))  # settled by RunPlan: never None here
    return max(1, min(config.workers or os.cpu_count() or 1, in_flight))


class ProcessExecutor:
    """Units in worker processes (module docstring): one per core by default (`--workers N` sets it), each
    running its share of `--concurrency` units at once on threads, so that N cores give N GILs."""

    def __init__(self, plan: RunPlan, pending: list[Unit]) -> None:
        in_flight = max(1, min(plan.concurrency, len(pending)))
        workers = process_workers(plan.config, len(pending))
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([__name__])  # the suite is imported once, then forked per worker
        payload = WorkerPlan.of(plan, pending, workers)
        threads = -(-in_flight // workers)
        self.connections: list[Connection] = []
        self.processes: list[BaseProcess] = []
        for _ in range(workers):
            ours, theirs = context.Pipe()
            process = context.Process(target=_worker_main, args=(payload, theirs, threads), daemon=True)
            process.start()
            theirs.close()
            self.connections.append(ours)
            self.processes.append(process)
        self.futures: dict[int, tuple[int, Future[UnitResult]]] = {}  # unit number -> (worker, future)
        self.load = [0] * workers  # units in flight on each worker
        self.numbers = itertools.count()
        self.lock = threading.Lock()
        self.broken: BrokenProcessPool | None = None
        self.collector = threading.Thread(target=self._collect, name="collect-workers", daemon=True)
        self.collector.start()

    def submit(self, unit: Unit) -> Future[UnitResult]:
        future: Future[UnitResult] = Future()
        with self.lock:
            if self.broken is not None:
                future.set_exception(self.broken)
                return future
            worker = min(range(len(self.processes)), key=self.load.__getitem__)
            self.load[worker] += 1
            number = next(self.numbers)
            self.futures[number] = (worker, future)
            self.connections[worker].send((number, unit.key))
        return future

    def _collect(self) -> None:
        """Route each worker's results to their futures; a worker that dies breaks the run (WorkerLost)."""
        live: dict[Any, BaseProcess | None] = {connection: None for connection in self.connections}
        live |= {process.sentinel: process for process in self.processes}
        while live:
            ready: Any  # a worker's connection or a process's sentinel, as `live` maps it
            for ready in wait(list(live)):
                process = live.pop(ready)
                if process is not None:  # a worker ended: after its last result unless it died
                    process.join()
                    if process.exitcode != 0:
                        self._break(f"a worker process (pid {process.pid}) died (exit code {process.exitcode})")
                    continue
                try:
                    number, ok, value = ready.recv()
                except (EOFError, OSError):  # its worker is gone; its sentinel says how
                    continue
                live[ready] = None
                with self.lock:
                    entry = self.futures.pop(number, None)
                    if entry is not None:
                        self.load[entry[0]] -= 1
                if entry is not None:
                    (entry[1].set_result if ok else entry[1].set_exception)(value)

    def _break(self, why: str) -> None:
        with self.lock:
            self.broken = self.broken or BrokenProcessPool(why)
            failed, self.futures = list(self.futures.values()), {}
        for _, future in failed:
            if not future.done():
                future.set_exception(self.broken)

    def abandon(self, writer: RunLogWriter) -> None:
        self._break("the run stopped")
        for process in self.processes:  # SIGTERM: each journals its calls in flight and exits
            with contextlib.suppress(OSError, ValueError):
                process.terminate()

    def shutdown(self) -> None:
        for connection in self.connections:
            with contextlib.suppress(OSError):
                connection.send(None)
        for process in self.processes:
            process.join()
        self.collector.join(timeout=5)
        for connection in self.connections:
            connection.close()
