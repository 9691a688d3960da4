"""`compare import <format> PATH --out RUN_DIR`: published trajectories as a run directory of ours.

The run directory is the one a run writes (manifest.json, results.jsonl, traces/): `compare report`,
the drill-down and every other command read it as they read our own runs, and an imported run renders
beside ours in one report. Formats: `dab-trajectories` (`tasks/dab_trajectories.py`). One record per
trial; the system is named for the agent (`dab-react`, `--system`); with the tasks (`--tasks-path`) each
answer is scored by the benchmark's scorers (DAB: the query's validate.py, else its ground truth). The
manifest says where the run came from and which fields the published files did not record
(`systems.<name>.imported.missing`, with the number of trials each applies to); its `config` is a run
configuration of ours (benchmark `dab`, the tasks when given), so `compare rescore` reads it too.
"""

from __future__ import annotations

import platform
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..core import __version__
from ..core.benchmark import Benchmark
from ..core.conversations import CallRequest, RequestParts
from ..core.model import ModelConfig
from ..core.runlog import Manifest, ResultRecord, RunLogWriter, record_of, trace_path
from ..core.scorer import score
from ..core.task import Task
from ..core.trace import Budgets, utc_now
from ..tasks import dab_trajectories as published
from ..tasks.dab_trajectories import TrajectoryError, Trial, find_trials, read_trial
from .config import RunConfig

IMPORT_FORMATS = (published.FORMAT,)
DEFAULT_SYSTEM = published.DEFAULT_SYSTEM
IMPORTED_ATTEMPT = "imported"  # the attempt of an imported trial's stored requests (its record names none)


class ImportFailed(ValueError):
    """Nothing can be imported from PATH (names it): exit 2."""


@dataclass
class Imported:
    run_dir: Path
    trials: list[Trial]
    records: list[ResultRecord]
    unscored: list[str] = field(default_factory=list)  # task ids of trials with no task to score against
    missing: dict[str, int] = field(default_factory=dict)


def import_trajectories(
    path: Path, out: Path, *, system: str = DEFAULT_SYSTEM, benchmark: Benchmark | None = None
) -> Imported:
    """Read every trial under `path` and write the run directory `out`; score with `benchmark`'s tasks."""
    folders = find_trials(path)
    if not folders:
        raise ImportFailed(
            f"{path}: no DAB trial found (…/query_<dataset>/query<N>/data_agent/run_<k>/final_agent.json)"
        )
    try:
        trials = [read_trial(folder, system) for folder in folders]
    except TrajectoryError as bad:
        raise ImportFailed(str(bad)) from None
    tasks = {task.id: task for task in benchmark.load()} if benchmark is not None else {}
    scorers = benchmark.scorers if benchmark is not None else ()
    out.mkdir(parents=True, exist_ok=True)
    writer = RunLogWriter(out)
    imported = Imported(out, trials, [])
    try:
        for trial in trials:
            record = _record(trial, tasks.get(trial.task_id), scorers)
            if trial.task_id not in tasks:
                imported.unscored.append(trial.task_id)
            _store_requests(writer, trial)
            writer.append(record, trial.trace)
            imported.records.append(record)
        imported.missing = dict(Counter(item for trial in trials for item in trial.missing))
        notes = benchmark.warnings(list(tasks.values())) if benchmark is not None else []
        writer.write_manifest(_manifest(path, trials, imported, benchmark, notes))
    finally:
        writer.close()
    return imported


def _store_requests(writer: RunLogWriter, trial: Trial) -> None:
    """The trial's conversation into the run's request store, one request per model call (`compare transcript`)."""
    for step, messages in trial.requests():
        parts = RequestParts(messages=messages, tools=None, settings="{}")
        unit = {"task_id": trial.task_id, "system": trial.trace.system, "model": trial.model, "epoch": trial.epoch}
        call = CallRequest(**unit, attempt=IMPORTED_ATTEMPT, role="system", step=step, request_key=None, parts=parts)
        writer.requested(call)


def _record(trial: Trial, task: Task | None, scorers: tuple[str, ...]) -> ResultRecord:
    trace, answer = trial.trace, trial.answer
    scores: dict[str, float | None] = {}
    scoring_error = None
    if task is not None:
        sheet = score(task, answer, trace, scorers)
        scores, scoring_error = dict(sheet.scores), sheet.error
    return record_of(
        trace,
        answer,
        task,
        task_id=trial.task_id,
        benchmark=published.BENCHMARK,
        system=trace.system,
        model=trial.model,
        epoch=trial.epoch,
        question_type=published.QUESTION_TYPE,
        scores=scores,
        scoring_error=scoring_error,
        trace_file=trace_path(trace.system, trial.model, trial.task_id, trial.epoch),
    )


def _manifest(
    path: Path, trials: list[Trial], imported: Imported, benchmark: Benchmark | None, notes: list[str]
) -> Manifest:
    models = sorted({t.model for t in trials})
    systems = sorted({t.trace.system for t in trials})
    imported_from = {
        "format": published.FORMAT,
        "path": str(Path(path).absolute()),
        "trials": len(trials),
        "missing": imported.missing,
        "unscored_tasks": sorted(set(imported.unscored)),
    }
    # A run configuration of ours (so `compare rescore` and `--resume` checks read it): the benchmark, its
    # tasks when given, DAB's harness budgets; where the trials came from is told under `systems`.
    tasks_path = str(Path(benchmark.path).absolute()) if benchmark is not None and benchmark.path else None
    hints = bool(benchmark.options.get("hints")) if benchmark is not None else False
    budgets = Budgets(**published.HARNESS_BUDGETS)
    # `hints` is DAB's setting, read by the configuration's validator into `benchmark_settings`
    config = RunConfig.model_validate(
        {
            "systems": systems,
            "models": models,
            "benchmark": published.BENCHMARK,
            "tasks_path": tasks_path,
            "hints": hints,
            "budgets": budgets,
        }
    )
    return Manifest(
        suite_version=__version__,
        python=platform.python_version(),
        platform=platform.platform(),
        started_at=min((t.trace.started_at for t in trials if t.trace.started_at), default=utc_now()),
        finished_at=utc_now(),
        status="completed",
        config=config.model_dump(mode="json"),
        models=[ModelConfig(alias=m, provider="dab-published", model_id=m) for m in models],
        budgets=budgets,
        systems={name: {"kind": "imported", "agent": published.AGENT, "imported": imported_from} for name in systems},
        benchmark=published.BENCHMARK,
        task_ids=sorted({t.task_id for t in trials}),
        units=len(trials),
        benchmark_notes=notes,
    )
