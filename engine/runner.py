"""The runner: benchmark × systems × models × epochs → a run directory (`core.runlog`).

Everything is resolved and validated before the first model call (`plan_run`); units run with
bounded concurrency; each result record is appended as its unit finishes, so a crash or Ctrl-C
loses nothing computed; `compare --resume --out DIR` finishes a run with the configuration in
its manifest, and refuses when what that configuration resolves to has changed since (models,
prompts, tools, the suite, the tasks): one run directory never mixes two runs. A lock on the run
directory keeps a second process out. Every model call goes through the unit's `KeyedProvider`
(`providers/cache.py`): keyed, journaled as it finishes (`calls.jsonl`), and answered from the
response cache (`--cache`) or a recorded run (`--replay`) when asked. Systems, benchmarks, providers
and scorers are found by name: the runner knows none of them.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import BrokenExecutor, Future
from datetime import UTC, datetime
from pathlib import Path
from queue import Empty, SimpleQueue
from typing import TYPE_CHECKING, Any

from ..core import __version__
from ..core.benchmark import Benchmark, BenchmarkError, create_benchmark
from ..core.context import EndpointFactory
from ..core.model import ModelConfig, sampling_conflicts
from ..core.registry import RegistryError
from ..core.runlog import (
    MANIFEST_FILE,
    RUN_LOG_SCHEMA_VERSION,
    DriftAllowed,
    GitRevision,
    Manifest,
    ResultRecord,
    RunDirLock,
    RunLogError,
    RunLogWriter,
    read_manifest,
    read_records,
    redact_credentials,
)
from ..core.system import (
    System,
    SystemArgsError,
    create_system,
    described_system,
    prepare_systems,
    system_label,
    system_names,
)
from ..core.task import Task
from ..core.trace import Usage, utc_now
from ..evaluators.rubric import JUDGE_PROMPT_HASH, JUDGE_VERSION
from ..providers.endpoint import GatewayServer
from ..providers.replay import ReplayLog
from ..tools import prepare_tools
from ..tools.agent_sandbox import agent_limits, agent_sandbox_mode, agent_sandbox_problem
from ..tools.python_sandbox import sandbox_memory_budget, sandbox_mode
from .config import (
    ConfigError,
    RunConfig,
    check_base_url_flag,
    check_executor,
    check_limits,
    check_out,
    check_task_sizes,
    in_current_spelling,
    load_plugins,
    missing_api_keys,
    resolve_models,
)
from .events import Events, ExecutorChosen, Listener, Notice, RunFinished, StageStarted, UnitFinished, UnitStarted
from .identity import identity_differences, run_identity
from .input_checks import check_run_inputs, check_task_ids
from .units import (
    RunDirUnwritable,
    RunPlan,
    RunWriteError,
    Unit,
    UnitResult,
    WorkerLost,
    prepare_imports,
    prepare_models,
    setup_provider,
)

if TYPE_CHECKING:
    from .executors import Executor


class MissingKeyError(ConfigError):
    """A model needs an API key that is not set."""


# ---------------------------------------------------------------- planning (no model calls)


def plan_run(config: RunConfig) -> RunPlan:
    """Resolve and validate everything before the first model call; raises ConfigError."""
    models = resolve_models(config.models, config)
    judge = resolve_models([config.judge], config)[0] if config.judge else None
    conflicts = [line for model in models for line in sampling_conflicts(model, config.generation)]
    conflicts += sampling_conflicts(judge, config.judge_generation, "judge_generation") if judge else []
    if conflicts:  # an alias's params must not override the run's sampling settings (issue 25)
        raise ConfigError("; ".join(conflicts))
    check_executor(config)
    check_limits(config)
    check_base_url_flag(config)
    check_out(config)
    check_run_inputs(config, [*models, judge] if judge else models)
    missing = missing_api_keys([*models, judge] if judge else models)
    if missing:
        lines = [f"  {var} (needed by {', '.join(aliases)})" for var, aliases in missing.items()]
        raise MissingKeyError(
            "missing API key:\n" + "\n".join(lines) + "\nSet it first, e.g.  export OPENROUTER_API_KEY=sk-or-...\n"
            "(or run offline with the embedded model: --models local)"
        )
    systems, benchmark, tasks = _systems_and_tasks(config)
    check_agent_sandbox(config, systems)
    check_task_sizes(tasks, config)
    check_task_ids(tasks, config.benchmark + (f" ({config.tasks_path})" if config.tasks_path else ""))
    out = Path(config.out) if config.out else Path("runs") / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{config.benchmark}"
    return RunPlan(config, benchmark, tasks, systems, models, out, judge)


def external_systems(systems: dict[str, System]) -> list[str]:
    return [name for name, system in systems.items() if system.kind == "external"]


def check_agent_sandbox(config: RunConfig, systems: dict[str, System]) -> None:
    """External agents run in a sandbox of their own; where none can be made they are refused (exit 2),
    unless the user allowed them to run without one (`--unsandboxed-agents`)."""
    external = external_systems(systems)
    if external and agent_sandbox_mode(config.tools) == "unavailable":
        raise ConfigError(
            f"external systems ({', '.join(external)}) run in a sandbox of their own, and none can be made here: "
            f"{agent_sandbox_problem()}. Install bubblewrap (apt-get install bubblewrap) and allow user namespaces, "
            "or pass --unsandboxed-agents to run them WITHOUT a sandbox (they could then read the task files, gold "
            "included, and anything your user can)"
        )


def record_agent_sandbox(manifest: Manifest, plan: RunPlan) -> None:
    """The manifest's record of how external agents ran (None without external systems)."""
    if not external_systems(plan.systems):
        return
    mode = agent_sandbox_mode(plan.config.tools)
    manifest.agent_sandbox = mode
    manifest.agent_sandbox_limits = agent_limits(plan.config.tools).describe() if mode == "bubblewrap" else None
    manifest.agent_sandbox_problem = agent_sandbox_problem()


def _systems_and_tasks(config: RunConfig) -> tuple[dict[str, System], Benchmark, list[Task]]:
    try:
        systems = _created_systems(config)
        benchmark = create_benchmark(config.benchmark, config.tasks_path, **config.benchmark_options())
    except (RegistryError, BenchmarkError, SystemArgsError) as problem:
        raise ConfigError(str(problem)) from problem
    except TypeError as problem:  # a plugin's class without a hook its base class requires: name the hook
        if "abstract method" not in str(problem):
            raise
        hook = str(problem).rpartition("abstract method")[2].strip(" s")
        raise ConfigError(f"{problem}: the plugin class must define {hook} (check the hook's name)") from None
    return systems, benchmark, _select_tasks(config, benchmark)


def plan_replay(source: str, out: str | None, **given: str | None) -> RunPlan:
    """A run of the recorded run's configuration, systems and tasks whose model calls are answered from
    its traces (`providers/replay.py`): no model, no API key. Its models are the recorded ones."""
    try:
        log = ReplayLog(Path(source))
    except RunLogError as problem:
        raise ConfigError(f"cannot replay: {problem}") from problem
    recorded = log.run.manifest
    run_dir = Path(out) if out else Path("runs") / f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{recorded.benchmark}-replay"
    # A replay answers from the recorded run, never from the response cache.
    update = {"out": str(run_dir), "cache": RunConfig().cache}
    config = resumed_config(source, **given).model_copy(update=update)
    load_plugins(config.plugins)
    systems, benchmark, tasks = _systems_and_tasks(config)
    judge = ModelConfig.model_validate(recorded.judge["model"]) if recorded.judge else None
    return RunPlan(config, benchmark, tasks, systems, list(recorded.models), run_dir, judge, replay=log)


def _created_systems(config: RunConfig) -> dict[str, System]:
    """The run's systems, each built with its arguments, under its label (`reflection[max_revisions=1]`)."""
    names = _system_list(config.systems)
    strays = sorted(set(config.system_args) - set(names))
    if strays:
        running = ", ".join(names)
        raise ConfigError(f"arguments for system(s) {', '.join(strays)}, which this run does not run ({running})")
    args = config.system_args
    return {system_label(name, args.get(name)): create_system(name, args.get(name)) for name in names}


def _system_list(requested: list[str]) -> list[str]:
    names = system_names(kind="workflow") if requested == ["all"] else requested
    valid = system_names()
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ConfigError(f"unknown workflow/system {', '.join(map(repr, unknown))}; valid: all, {', '.join(valid)}")
    return names


def _select_tasks(config: RunConfig, benchmark: Benchmark) -> list[Task]:
    """The benchmark's tasks the configuration selects; a selection of nothing is an error, never an
    empty run that "completes"."""
    try:
        tasks = benchmark.load()
    except (BenchmarkError, OSError) as bad:  # validated before any model call
        raise ConfigError(str(bad)) from bad
    except Exception as bad:  # a plugin benchmark's own load() failed: its bug, named, no traceback
        raise ConfigError(f"the {config.benchmark} benchmark's load() failed: {type(bad).__name__}: {bad}") from bad
    where = f"{config.benchmark}" + (f" ({config.tasks_path})" if config.tasks_path else "")
    if not tasks:
        raise ConfigError(f"the {where} benchmark has no tasks")
    if config.task_ids:
        known = {t.id for t in tasks}
        unknown = [t for t in config.task_ids if t not in known]
        if unknown:
            raise ConfigError(f"unknown task ids for {config.benchmark}: {', '.join(unknown)}")
        tasks = [t for t in tasks if t.id in set(config.task_ids)]
    for setting, values, value_of in (
        ("--level", config.levels, lambda t: t.level),
        ("--question-type", config.question_types, lambda t: t.question_type.value),
    ):
        if values:
            present = sorted({str(value_of(t)) for t in tasks})
            unknown = [v for v in values if v not in present]
            if unknown:
                chosen, listed = ", ".join(unknown), ", ".join(present)
                raise ConfigError(f"{setting} {chosen} selects no task of {where}; present: {listed}")
            tasks = [t for t in tasks if value_of(t) in set(values)]
    return tasks[: config.limit] if config.limit else tasks


# ---------------------------------------------------------------- the manifest


def _judge_description(judge: ModelConfig | None) -> dict[str, Any] | None:
    if judge is None:
        return None
    return {"model": judge.model_dump(mode="json"), "prompt_version": JUDGE_VERSION, "prompt_hash": JUDGE_PROMPT_HASH}


def task_hashes(tasks: list[Task]) -> dict[str, str]:
    """sha256 of each task as loaded (question, data, gold, ...): a changed task file changes it."""
    return {
        task.id: hashlib.sha256(json.dumps(task.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()
        for task in tasks
    }


def build_manifest(plan: RunPlan) -> Manifest:
    """The manifest of the plan's run as it would start now; fingerprints its data files (once per run)."""
    identity = run_identity(plan.benchmark, plan.tasks, plan.config.plugins)
    code = identity.code
    git = GitRevision(sha=code.commit, dirty=code.diff_sha256 is not None) if code.commit else GitRevision()
    return Manifest(
        suite_version=__version__,
        git=git,
        python=platform.python_version(),
        platform=platform.platform(),
        started_at=utc_now(),
        config=plan.config.model_dump(mode="json"),  # credentials are redacted by the writer
        models=plan.models,
        budgets=plan.config.budgets,
        systems={name: described_system(system) for name, system in plan.systems.items()},
        judge=_judge_description(plan.judge),
        benchmark=plan.config.benchmark,
        task_ids=[t.id for t in plan.tasks],
        units=len(plan.tasks) * len(plan.systems) * len(plan.models) * plan.config.epochs,
        python_sandbox=sandbox_mode(plan.config.tools),
        python_sandbox_memory=sandbox_memory_budget(plan.config.tools),
        task_hashes=task_hashes(plan.tasks),
        replay_of=str(plan.replay.run_dir) if plan.replay else None,
        identity=identity,
        benchmark_notes=plan.benchmark.warnings(plan.tasks),
    )


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    """A JSON value as {dotted path: leaf}, credentials masked."""
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key, item in value.items():
            flat |= _flat(item, f"{prefix}.{key}" if prefix else str(key))
        return flat
    return {prefix: json.loads(redact_credentials(json.dumps(value, default=str)))}


def _changes(what: str, recorded: object, current: object, *, recorded_keys_only: bool = False) -> list[str]:
    """`what path: 'old' → 'new'` for every leaf that differs."""
    old, new = _flat(recorded), _flat(current)
    keys = old if recorded_keys_only else old | new
    missing = "(none)"
    return [
        f"{what}{' ' + key if key else ''}: {old.get(key, missing)!r} → {new.get(key, missing)!r}"
        for key in keys
        if old.get(key, missing) != new.get(key, missing)
    ]


def _described(systems: dict[str, dict[str, Any]], name: str) -> dict[str, Any] | None:
    """A system as the manifest describes it, without what its `prepare` built during the run."""
    described = systems.get(name)
    return None if described is None else {k: v for k, v in described.items() if k != "indexing"}


def manifest_differences(recorded: Manifest, current: Manifest, ignored: tuple[str, ...] = ("out",)) -> list[str]:
    """What a run directory's manifest and the run as it would start now disagree on: the suite
    version, the resolved configuration (the keys recorded but `ignored`; generation settings included),
    models, judge, systems (prompt hashes, settings), how model-written Python runs, the task set (ids,
    and each task's content when recorded), and what the run depends on (`identity.py`: code, plugin
    files, scorer versions, data files)."""
    changed = []
    if recorded.suite_version != current.suite_version:
        changed.append(f"suite version: {recorded.suite_version!r} → {current.suite_version!r}")
    config = {k: v for k, v in in_current_spelling(recorded.config).items() if k not in ignored}
    changed += _changes("config", config, current.config, recorded_keys_only=True)
    if recorded.python_sandbox and recorded.python_sandbox != current.python_sandbox:  # e.g. bubblewrap gone
        changed.append(f"python sandbox: {recorded.python_sandbox!r} → {current.python_sandbox!r}")
    old_models = {m.alias: m.model_dump(mode="json") for m in recorded.models}
    new_models = {m.alias: m.model_dump(mode="json") for m in current.models}
    for alias in old_models | new_models:
        changed += _changes(f"model {alias!r}", old_models.get(alias), new_models.get(alias))
    changed += _changes("judge", recorded.judge, current.judge)
    for name in recorded.systems | current.systems:
        old, new = _described(recorded.systems, name), _described(current.systems, name)
        changed += _changes(f"system {name!r}", old, new)
    return changed + _task_changes(recorded, current) + identity_differences(recorded, current)


def _task_changes(recorded: Manifest, current: Manifest) -> list[str]:
    old, new = recorded.task_ids, current.task_ids
    changed = []
    if removed := [t for t in old if t not in set(new)]:
        changed.append(f"tasks no longer there: {_some(removed)}")
    if added := [t for t in new if t not in set(old)]:
        changed.append(f"new tasks: {_some(added)}")
    if recorded.task_hashes and current.task_hashes:
        edited = [t for t, h in recorded.task_hashes.items() if current.task_hashes.get(t, h) != h]
        if edited:
            changed.append(f"tasks whose content changed (question, data or gold): {_some(edited)}")
    return changed


def _some(ids: list[str], shown: int = 8) -> str:
    return ", ".join(ids[:shown]) + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def check_resumable(run_dir: Path, recorded: Manifest, current: Manifest, allow_drift: bool = False) -> list[str]:
    """Refuse (ConfigError) to resume a run whose configuration, suite, tasks, code, plugins, scorers or
    data changed since it started; with `allow_drift`, return what changed instead."""
    changed = manifest_differences(recorded, current)
    if changed and not allow_drift:
        raise ConfigError(
            f"cannot resume {run_dir}: the run would mix two configurations; changed since it started:\n"
            f"{_listed(changed)}\nRestore what changed, start a new run with another --out, or (knowing the "
            "results will mix) resume with --allow-drift, which the manifest records."
        )
    return changed


def check_replayable(recorded: Manifest, current: Manifest, allow_drift: bool = False) -> list[str]:
    """Refuse (ConfigError) to replay a run whose systems, code, plugins, scorers or data changed since it
    was recorded (a replay of other code is no replay of the run); with `allow_drift`, return the changes."""
    changed = manifest_differences(recorded, current, ignored=("out", "cache"))  # a replay never caches
    if changed and not allow_drift:
        raise ConfigError(
            f"cannot replay {current.replay_of}: changed since it was recorded:\n{_listed(changed)}\n"
            "Restore what changed, or replay anyway with --allow-drift (recorded in the manifest)."
        )
    return changed


def _listed(changed: list[str], shown: int = 20) -> str:
    more = f"\n  ... and {len(changed) - shown} more" if len(changed) > shown else ""
    return "\n".join(f"  {line}" for line in changed[:shown]) + more


def replayed_run(out: str) -> str | None:
    """The run a run directory replays (`compare --replay`), so that resuming it replays too; None for a
    run of models (or no readable manifest: `resumed_config` says why)."""
    try:
        return read_manifest(Path(out)).replay_of
    except RunLogError:
        return None


def resumed_config(out: str, **given: str | None) -> RunConfig:
    """The configuration recorded in the run's manifest. URLs whose passwords the manifest redacted
    (`postgres_url`, `base_url`) must be given again (`given`)."""
    try:
        recorded = read_manifest(Path(out)).config | {"out": out}
    except RunLogError as problem:  # not a run directory, corrupt, or a newer schema
        raise ConfigError(f"nothing to resume: {problem}") from problem
    for setting, value in given.items():
        if value:
            recorded[setting] = value
        elif "***" in str(recorded.get(setting) or ""):
            flag = "--" + setting.replace("_", "-")
            raise ConfigError(f"the run's {flag} had a password, which the manifest does not keep: give {flag} again")
    try:
        return RunConfig.model_validate(recorded)
    except ValueError as invalid:
        raise ConfigError(f"{out}/manifest.json: the recorded configuration is not valid: {invalid}") from invalid


# ---------------------------------------------------------------- executing a plan


def execute(
    plan: RunPlan,
    *,
    listeners: Iterable[Listener] = (),
    resume: bool = False,
    allow_drift: bool = False,
) -> Manifest:
    """Run every unit not yet in the run directory, holding its lock; returns the final manifest. Each of
    `listeners` is given the run's events in order (`engine/events.py`). Raises RunDirBusy (a RunLogError)
    when another process holds the run directory, ConfigError when a resume or replay would mix runs
    (`allow_drift`: go on, and record what changed)."""
    lock = RunDirLock(plan.run_dir)
    try:
        lock.acquire()
    except OSError as failure:  # a read-only folder, a full disk: nothing ran
        why = failure.strerror or str(failure)
        raise RunDirUnwritable(f"cannot write the run directory {plan.run_dir}: {why}") from failure
    try:
        return _execute(plan, Events(listeners), resume, allow_drift)
    finally:
        lock.release()


def _execute(plan: RunPlan, emit: Events, resume: bool, allow_drift: bool) -> Manifest:
    existing, _ = read_records(plan.run_dir)
    if existing and not resume:
        raise ConfigError(f"{plan.run_dir} already holds results; use --resume to finish it or another --out")
    current = build_manifest(plan)  # the tasks as loaded, before `prepare` rewrites their data locations
    recorded = read_manifest(plan.run_dir) if resume and (plan.run_dir / MANIFEST_FILE).exists() else None
    drift = _drift(plan, recorded, current, allow_drift)
    if recorded is not None:
        recorded.task_hashes = recorded.task_hashes or current.task_hashes
        if recorded.identity is None:  # a run log older than schema 3: what it depends on from now on
            recorded.identity, recorded.schema_version = current.identity, RUN_LOG_SCHEMA_VERSION
    try:  # before the run directory is written: a bad dump exits cleanly
        plan.tasks = plan.benchmark.prepare(plan.tasks)
    except BenchmarkError as problem:
        raise ConfigError(str(problem)) from problem
    endpoint = GatewayServer()  # started by the first system that asks for it
    writer: RunLogWriter | None = None
    manifest = recorded or current
    manifest.status, manifest.resumed_at = "running", utc_now() if resume else None
    manifest.drift_allowed += drift
    manifest.python_sandbox = sandbox_mode(plan.config.tools)
    manifest.python_sandbox_memory = sandbox_memory_budget(plan.config.tools)
    record_agent_sandbox(manifest, plan)
    asked = plan.config.executor  # `auto` is settled for this execution only: a resume of the plan asks again
    try:
        writer = RunLogWriter(plan.run_dir)
        writer.write_manifest(manifest)
        plan.retried = {r.key: r for r in existing if plan.retry_errors and r.status == "infra_error"}
        done = {record.key for record in existing} - plan.retried.keys()
        set_aside_traces(plan.run_dir, list(plan.retried.values()))
        pending = [u for u in plan.units() if u.key not in done]
        stage = lambda what: emit(StageStarted(what))  # noqa: E731
        _settle_executor(plan, manifest, len(pending), emit)
        # A replay loads no model; worker processes load their own and report it with their first unit.
        stage("loading models")
        manifest.model_load_s = {} if plan.replay or plan.config.executor != "thread" else prepare_models(plan)
        stage("loading the embedding model and document indexes")
        in_flight = plan.concurrency if plan.config.executor == "thread" else 0  # workers prepare their own
        manifest.model_load_s |= prepare_tools(plan.tasks, plan.config.tools, in_flight)
        # Shared indexes (RAG) are built here, before any task's clock, metered apart (System.prepare).
        units = [(u.system, u.model, u.task) for u in pending]
        prepare_systems(
            plan.systems,
            units,
            plan.config.tools,
            plan.run_dir,
            manifest.systems,
            setup_provider(plan),
            on_start=lambda system, model: stage(f"preparing {system}/{model} (indexes are built once and cached)"),
            generation=plan.config.generation,
        )
        prepare_imports(plan)
        stage("")
        note = manifest.executor.update  # how units ran (the executor's own account, e.g. Ray's capacity)
        _run_pending(plan, pending, writer, emit, endpoint.open_session, manifest.model_load_s, note)
        manifest.status = "completed"
    except KeyboardInterrupt:  # Ctrl-C, and SIGTERM (the CLI raises a KeyboardInterrupt for it)
        manifest.status = "interrupted"
        raise
    except BrokenExecutor as lost:  # a worker process died: its unit and those in flight run again on --resume
        manifest.status = "failed"
        raise WorkerLost(f"a worker died, the run stopped ({type(lost).__name__}: {lost})") from lost
    except OSError as failure:  # the run directory cannot be written: stop, keep what is there
        manifest.status = "failed"
        why = failure.strerror or str(failure)
        raise RunWriteError(f"cannot write the run directory {plan.run_dir}: {why}") from failure
    except Exception:  # refused once started (a Ray node that cannot see the data) or a bug: never left "running"
        manifest.status = "failed"
        raise
    finally:
        plan.config = plan.config.model_copy(update={"executor": asked})
        endpoint.stop()
        plan.benchmark.close()
        if writer is not None:
            manifest.finished_at = utc_now()
            writer.close_with(manifest)
        emit(RunFinished(plan.run_dir, manifest.status))
    return manifest


def _drift(plan: RunPlan, recorded: Manifest | None, current: Manifest, allow_drift: bool) -> list[DriftAllowed]:
    """Refuse a resume or a replay that would mix runs (ConfigError); with `allow_drift`, what changed."""
    changes: list[DriftAllowed] = []
    if plan.replay is not None and recorded is None:  # a replay starts: against the run it replays
        changed = check_replayable(plan.replay.run.manifest, current, allow_drift)
        changes += [DriftAllowed(at=utc_now(), by="replay", changes=changed)] if changed else []
    if recorded is not None:
        changed = check_resumable(plan.run_dir, recorded, current, allow_drift)
        changes += [DriftAllowed(at=utc_now(), by="resume", changes=changed)] if changed else []
    return changes


def _run_pending(
    plan: RunPlan,
    pending: list[Unit],
    writer: RunLogWriter,
    emit: Events,
    endpoint: EndpointFactory,
    model_load_s: dict[str, float] | None = None,
    executor_note: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Run the pending units on the configured executor (`engine/executors.py`), `concurrency` at a time, taken
    fairly across systems (`FairQueue`); each record is written here, in this process, as it arrives. The
    model load times a worker process or actor sends go into `model_load_s` (the manifest's)."""
    model_load_s = model_load_s if model_load_s is not None else {}
    if not pending:  # a finished run resumed: no worker or cluster to start
        return
    executor = create_executor(plan, pending, writer, endpoint, executor_note, emit)
    queue = FairQueue(pending)
    running: dict[Future[UnitResult], tuple[Unit, float]] = {}
    # Each future puts itself here when it finishes: taking one result costs the same at 256 units in flight
    # as at 1 (`concurrent.futures.wait` over every future in flight took 75 µs a result at 256).
    finished: SimpleQueue[Future[UnitResult]] = SimpleQueue()

    def submit_next() -> None:
        unit = queue.pop()
        if unit is not None:
            future = executor.submit(unit)
            running[future] = (unit, time.monotonic())
            emit(UnitStarted(unit.task.id, unit.system, unit.model.alias, unit.epoch, len(running)))
            future.add_done_callback(finished.put)

    try:
        for _ in range(plan.concurrency):
            submit_next()
        while running:
            try:
                future = finished.get(timeout=1.0)  # a timeout keeps the wait open to Ctrl-C and SIGTERM
            except Empty:
                continue
            unit, started = running.pop(future)
            queue.done(unit)
            record, trace, judge_trace, loaded = future.result()
            keep_earlier_spend(record, plan.retried.get(unit.key))
            writer.append(record, trace, judge_trace)
            model_load_s.update(loaded or {})
            emit(UnitFinished(record, time.monotonic() - started, len(running)))
            submit_next()
    except BaseException:
        # Interrupted, or the run directory cannot be written: do not wait for the tasks in flight
        # (a model call can take minutes); they are not recorded and run again on --resume, and their
        # calls so far are in the spend journal (the calls still in flight noted too). The CLI then
        # exits without joining their threads.
        executor.abandon(writer)
        raise
    executor.shutdown()


def set_aside_traces(run_dir: Path, records: list[ResultRecord]) -> None:
    """Keep the traces of the attempts `--retry-errors` runs again: the new attempt writes the same trace file,
    so the old one becomes `<task>.try-<attempt>.json` beside it (what failed stays readable)."""
    for record in records:
        path = run_dir / record.trace_file
        if path.is_file() and record.attempt:
            path.replace(path.with_name(f"{path.stem}.try-{record.attempt}.json"))


def keep_earlier_spend(record: ResultRecord, earlier: ResultRecord | None) -> None:
    """A unit run again by `--retry-errors` keeps what its earlier attempts spent: in its usage (tokens and
    cost: they were paid), and apart in `retried_usage`, with their attempt ids."""
    if earlier is None:
        return
    spent = earlier.usage
    summed = record.usage.plus(spent)  # an unknown part (a model without a price) stays unknown, never 0
    for name in Usage.SUMMED:
        setattr(record.usage, name, getattr(summed, name))
    if summed.cost_usd is None:
        record.usage.cost_source = "unknown"
    elif record.usage.cost_source != spent.cost_source and spent.total_tokens:
        record.usage.cost_source = "mixed"
    record.retried_usage = spent.model_copy()
    # what the provider did to the earlier attempts stays counted (the summary's provider errors, retries)
    record.provider_errors += earlier.provider_errors
    record.retries += earlier.retries
    record.backoff_s += earlier.backoff_s
    record.retried_attempts = [*earlier.retried_attempts, *([earlier.attempt] if earlier.attempt else [])]


def _settle_executor(plan: RunPlan, manifest: Manifest, units: int, emit: Events) -> None:
    """`--executor auto` (the default) becomes threads or worker processes for this run (`choose_executor`):
    told at the start (`ExecutorChosen`), kept in the manifest (`executor.kind`, `executor.why`)."""
    from .executors import executor_line, resolve_executor

    auto = plan.config.executor == "auto"
    manifest.executor.update(resolve_executor(plan, units))
    if auto and units:
        emit(ExecutorChosen(str(manifest.executor.get("kind")), executor_line(manifest.executor)))


def create_executor(
    plan: RunPlan,
    pending: list[Unit],
    writer: RunLogWriter,
    endpoint: EndpointFactory,
    note: Callable[[dict[str, Any]], None] | None = None,
    emit: Listener | None = None,
) -> Executor:
    """The executor `--executor` names; worker processes and Ray are imported only when asked for. `note`
    takes what an executor says of how it ran, for the manifest (Ray: the actors running and waiting); what
    it says to a person goes to `emit` as a `Notice`."""
    from .executors import ProcessExecutor, ThreadExecutor

    kind = plan.config.executor
    if kind == "process":
        return ProcessExecutor(plan, pending)
    if kind == "ray":
        from .ray_executor import RayExecutor

        tell = emit or (lambda _: None)
        return RayExecutor(plan, pending, note, say=lambda line: tell(Notice(f"ray: {line}")))
    return ThreadExecutor(plan, writer, endpoint)


class FairQueue:
    """The pending units, taken fairly across systems: the next unit is the next one (in plan order) of the
    system with the fewest units in flight, ties going round-robin. So every system always has units
    running while it has units left, a slow system never holds every slot while another waits, and no slot
    idles while any unit is left (a finished system's share goes to the others)."""

    def __init__(self, units: list[Unit]) -> None:
        self._queues: dict[str, deque[Unit]] = {}
        for unit in units:
            self._queues.setdefault(unit.system, deque()).append(unit)
        self._order = list(self._queues)
        self._turn = 0
        self.in_flight: Counter[str] = Counter()

    def __len__(self) -> int:
        return sum(map(len, self._queues.values()))

    def pop(self) -> Unit | None:
        count = len(self._order)
        ready = [i for i, name in enumerate(self._order) if self._queues[name]]
        if not ready:
            return None
        chosen = min(ready, key=lambda i: (self.in_flight[self._order[i]], (i - self._turn) % count))
        self._turn = (chosen + 1) % count
        name = self._order[chosen]
        self.in_flight[name] += 1
        return self._queues[name].popleft()

    def done(self, unit: Unit) -> None:
        self.in_flight[unit.system] -= 1
