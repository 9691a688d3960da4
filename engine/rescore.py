"""`compare rescore RUN --out NEW`: a run's records scored again with today's scorers, into a new run directory.

The original run directory is left untouched. The new one holds the same traces, spend journal and
records, each with its scores (and `scoring_error`) from today's scorers; its manifest keeps the run's
configuration and identity, with today's scorer versions in `identity.scorers` and the versions that
scored the records before in `rescored.scorers_before`. A run with an LLM judge is judged again by the
recorded judge model (metered, its traces written beside the records). `compare report NEW` reads it
like any run.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from ..core.benchmark import Benchmark, BenchmarkError, create_benchmark
from ..core.model import ModelConfig, get_provider
from ..core.registry import RegistryError
from ..core.runlog import (
    MANIFEST_FILE,
    RESULTS_FILE,
    RUN_LOG_SCHEMA_VERSION,
    CodeIdentity,
    Manifest,
    Rescored,
    ResultRecord,
    RunDirLock,
    RunIdentity,
    RunLog,
    RunLogWriter,
    read_run,
)
from ..core.scorer import score, scorer_version
from ..core.task import Answer, Task
from ..core.trace import Trace, utc_now
from .config import ConfigError, RunConfig, load_plugins, missing_api_keys
from .identity import process_code_identity
from .units import RunPlan, Unit, judge_model

NOT_COPIED = {MANIFEST_FILE, RESULTS_FILE, ".lock", "summary.md"}  # written anew (reports are rebuilt)


@dataclass
class Rescoring:
    """What `rescore` did: records scored, how many changed a score, scorer versions before and after."""

    out: Path
    records: int
    changed: int
    scoring_errors: int
    before: dict[str, str]
    after: dict[str, str]


def rescore(source: Path, out: Path) -> Rescoring:
    """Score the records of run `source` again into the new run directory `out`. Raises ConfigError
    (bad input: nothing written) and RunLogError (an unreadable run)."""
    run = read_run(source)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty: rescore writes a new run directory (give another --out)")
    config = _recorded_config(run)
    benchmark = _benchmark(config)
    tasks = _tasks_of(run, benchmark)
    judge = _judge(run.manifest, run.records)
    plan = RunPlan(config, benchmark, list(tasks.values()), {}, list(run.manifest.models), out, judge)
    models = {model.alias: model for model in run.manifest.models}
    manifest = _rescored_manifest(run, benchmark)
    changed = errors = 0
    with RunDirLock(out):
        shutil.copytree(source, out, dirs_exist_ok=True, ignore=lambda _, names: NOT_COPIED & set(names))
        writer = RunLogWriter(out)
        try:
            writer.write_manifest(manifest)
            for record in run.records:
                unit = Unit(tasks[record.task_id], record.system, models[record.model], record.epoch)
                new, trace, judge_trace = _scored_again(record, run.trace(record), unit, plan)
                changed += new.scores != record.scores
                errors += new.scoring_error is not None
                writer.append(new, trace, judge_trace)
        finally:
            writer.close()
    before = run.manifest.identity.scorers if run.manifest.identity else {}
    after = manifest.identity.scorers if manifest.identity else {}
    return Rescoring(out, len(run.records), changed, errors, before, after)


def _recorded_config(run: RunLog) -> RunConfig:
    try:
        config = RunConfig.model_validate(run.manifest.config | {"out": None})
    except ValueError as invalid:
        raise ConfigError(
            f"{run.run_dir}/{MANIFEST_FILE}: the recorded configuration is not valid: {invalid}"
        ) from None
    load_plugins(config.plugins)  # they may register the benchmark or its scorers
    return config


def _benchmark(config: RunConfig) -> Benchmark:
    try:
        return create_benchmark(config.benchmark, config.tasks_path, **config.benchmark_options())
    except (RegistryError, BenchmarkError) as problem:
        raise ConfigError(str(problem)) from problem


def _tasks_of(run: RunLog, benchmark: Benchmark) -> dict[str, Task]:
    """The run's tasks as the benchmark loads them today (their gold is what the scorers read)."""
    try:
        loaded = {task.id: task for task in benchmark.load()}
    except (BenchmarkError, OSError) as problem:
        raise ConfigError(str(problem)) from problem
    missing = sorted({r.task_id for r in run.records} - loaded.keys())
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        raise ConfigError(f"tasks of {run.run_dir} no longer in the {benchmark.name} benchmark: {shown}")
    return loaded


def _judge(manifest: Manifest, records: list[ResultRecord]) -> ModelConfig | None:
    """The run's judge model, ready to judge again; None when the run had none or judged nothing."""
    if not manifest.judge or not any(r.judge_trace_file for r in records):
        return None
    judge = ModelConfig.model_validate(manifest.judge["model"])
    missing = missing_api_keys([judge])
    if missing:
        raise ConfigError(f"the run was judged by {judge.alias}; judging again needs {', '.join(missing)} set")
    get_provider(judge.provider).prepare(judge)
    return judge


def _rescored_manifest(run: RunLog, benchmark: Benchmark) -> Manifest:
    old = run.manifest
    now = {name: scorer_version(name) for name in benchmark.scorers}
    identity = old.identity or RunIdentity(code=CodeIdentity(source="unknown"))
    return old.model_copy(
        update={
            "schema_version": RUN_LOG_SCHEMA_VERSION,
            "identity": identity.model_copy(update={"scorers": now}),
            "rescored": Rescored(
                source=str(Path(run.run_dir).absolute()),
                at=utc_now(),
                scorers_before=old.identity.scorers if old.identity else {},
                code=process_code_identity(),
            ),
        },
        deep=True,
    )


def _scored_again(
    record: ResultRecord, trace: Trace, unit: Unit, plan: RunPlan
) -> tuple[ResultRecord, Trace, Trace | None]:
    answer = Answer.model_validate({**record.answer, "status": record.status, "error": record.error})
    judge = judge_model(unit, plan) if record.judge_trace_file else None
    metered = judge.metered if judge is not None else None
    sheet = score(unit.task, answer, trace, plan.benchmark.scorers, metered, strict_answers=plan.config.strict_answers)
    judge_trace = judge.recorder.finish("completed") if judge is not None else None
    update: dict[str, object] = {
        "schema_version": RUN_LOG_SCHEMA_VERSION,
        "scores": sheet.scores,
        "scoring_error": sheet.error,
    }
    if judge_trace is not None:
        update["judge_usage"] = judge_trace.usage()
    return record.model_copy(update=update), trace, judge_trace
