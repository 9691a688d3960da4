"""The records a report compares: one or several run directories of one or several benchmarks, read through
the typed run log only, one ReportData per benchmark. Each run's system × model is a row of its own, labelled
by the run (its `--label`, else its folder's name); with `merge_runs`, runs of a system and model that ran it
alike are one row, their units counted as more epochs (`row_names`); within a benchmark the rows are
restricted to the tasks they all have, so each system is compared on the same questions."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..core.benchmark import create_benchmark
from ..core.runlog import ResultRecord, RunLog, RunLogError, UnitKey, read_run
from ..core.trace import Trace
from .summary import SummaryRow, summarize


class ReportError(Exception):
    """Input a report cannot be built from; the message names the file, line or field."""


@dataclass
class ReportData:
    runs: list[RunLog]
    records: list[ResultRecord]  # on the common tasks; a system run differently in two runs gets a [label]
    common_tasks: list[str]
    left_out: dict[str, list[str]]  # run directory -> its tasks that not every run has
    benchmark: str
    infra_errors_as_failures: bool = False
    merge_runs: bool = False  # runs of a system × model run alike are one row (`row_names`)
    warnings: list[str] = field(default_factory=list)
    _run_of: dict[UnitKey, RunLog] = field(default_factory=dict)
    _questions: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)
    _summary: list[SummaryRow] | None = None

    def trace(self, record: ResultRecord) -> Trace | None:
        """The record's trace; None (with a warning) when the file is missing; a corrupt one is an error."""
        run = self._run_of[record.key]
        path = run.run_dir / record.trace_file
        if not path.is_file():
            self.warnings.append(f"{path}: trace missing; its timeline is left out")
            return None
        try:
            return Trace.model_validate_json(path.read_text(encoding="utf-8"))
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "<trace>"
            raise ReportError(f"{path}: field {where!r}: {first['msg']}") from None
        except (OSError, UnicodeDecodeError) as error:
            raise ReportError(f"{path}: cannot read the trace ({error})") from None

    def question(self, record: ResultRecord) -> tuple[str | None, list[str]]:
        """The task's question and data sources: from the record, or (runs written before records kept
        them) from the benchmark's own files named in the manifest, when they are still there."""
        if record.question is not None:
            return record.question, record.data_sources
        if not self._questions:
            self._questions = _questions_from_benchmarks(self.runs) or {"": (None, [])}
        return self._questions.get(record.task_id, (None, []))

    def summary(self) -> list[SummaryRow]:
        """`summary.summarize` of the records, computed once: its intervals are the costly part."""
        if self._summary is None:
            self._summary = summarize(self.records, infra_errors_as_failures=self.infra_errors_as_failures)
        return self._summary

    def pairs(self) -> list[tuple[str, str]]:
        """(system, model) of every compared row, sorted."""
        return sorted({(r.system, r.model) for r in self.records})


def load_comparison(
    run_dirs: Iterable[str | Path | RunLog], *, infra_errors_as_failures: bool = False, merge_runs: bool = False
) -> list[ReportData]:
    """Read the run directories (a run log given is used as read), one ReportData per benchmark (in the order
    first named); raises ReportError."""
    runs = []
    for run_dir in run_dirs:
        try:
            runs.append(run_dir if isinstance(run_dir, RunLog) else read_run(run_dir))
        except RunLogError as problem:
            raise ReportError(str(problem)) from None
    if not runs:
        raise ReportError("no run directory given")
    by_benchmark: dict[str, list[RunLog]] = {}
    for run in runs:
        by_benchmark.setdefault(run.manifest.benchmark, []).append(run)
    return [_benchmark_data(group, infra_errors_as_failures, merge_runs) for group in by_benchmark.values()]


def load_runs(
    run_dirs: Iterable[str | Path], *, infra_errors_as_failures: bool = False, merge_runs: bool = False
) -> ReportData:
    """The runs of one benchmark, on their common tasks; raises ReportError (also for several benchmarks)."""
    parts = load_comparison(run_dirs, infra_errors_as_failures=infra_errors_as_failures, merge_runs=merge_runs)
    if len(parts) > 1:
        names = ", ".join(f"{run.run_dir} ({part.benchmark})" for part in parts for run in part.runs)
        raise ReportError(f"runs of different benchmarks in one table: {names}")
    return parts[0]


def _benchmark_data(runs: list[RunLog], infra_errors_as_failures: bool, merge_runs: bool = False) -> ReportData:
    """One benchmark's runs; with several, only the tasks every system × model row has."""
    names = row_names(runs, merge_runs=merge_runs)
    tasks_of: dict[tuple[str, str], set[str]] = {}
    for index, run in enumerate(runs):
        for r in run.records:
            tasks_of.setdefault((names[(index, r.system, r.model)], r.model), set()).add(r.task_id)
    every = {r.task_id for run in runs for r in run.records}
    common = set.intersection(*tasks_of.values()) if len(runs) > 1 and tasks_of else every
    if not common and every:
        where = ", ".join(str(run.run_dir) for run in runs)
        apart = "" if merge_runs else " (each run's rows are its own: --merge-runs joins runs of a system run alike)"
        raise ReportError(f"the run directories share no task: {where}{apart}")
    run_tasks = {str(run.run_dir): {r.task_id for r in run.records} for run in runs}
    data = ReportData(
        runs=runs,
        records=[],
        common_tasks=sorted(common),
        left_out={run: sorted(tasks - common) for run, tasks in run_tasks.items() if tasks - common},
        benchmark=runs[0].manifest.benchmark,
        infra_errors_as_failures=infra_errors_as_failures,
        merge_runs=merge_runs,
        warnings=[warning for run in runs for warning in run.warnings],
    )
    _collect(data, common, names)
    return data


def _collect(data: ReportData, common: set[str], names: dict[tuple[int, str, str], str]) -> None:
    """Keep the common tasks' records under their row's name. A task that several merged runs ran counts
    as more epochs of it (numbered after the earlier runs' epochs)."""
    highest: dict[tuple[str, str, str], int] = {}
    for index, run in enumerate(data.runs):
        before = dict(highest)
        for record in run.records:
            if record.task_id not in common:
                continue
            system = names[(index, record.system, record.model)]
            unit = (record.task_id, system, record.model)
            epoch = record.epoch + before.get(unit, 0)
            highest[unit] = max(highest.get(unit, 0), epoch)
            if (system, epoch) != (record.system, record.epoch):
                record = record.model_copy(update={"system": system, "epoch": epoch})
            data.records.append(record)
            data._run_of[record.key] = run


IGNORED_SETTINGS = {"name", "indexing", "price", "alias"}  # what a run spent or is called, not how it ran


def settings(run: RunLog, system: str, model: str) -> dict[str, str]:
    """How this run ran this system × model, flattened: the system's description, the model's config, the
    budgets and the run options that change answers. Rows whose settings agree are one row."""
    m = run.manifest
    config = next((c.model_dump() for c in m.models if c.alias == model), {})
    found = {"system": m.systems.get(system, {}), "model": config, "budgets": m.budgets.model_dump()}
    # a benchmark's own settings (e.g. DAB's hints) sit under config.benchmark_settings.<benchmark> since issue 28
    options = {**m.config, **(m.config.get("benchmark_settings") or {}).get(m.benchmark, {})}
    found["run"] = {key: options.get(key) for key in ("hints", "tools") if options.get(key) is not None}
    return _flatten(found)


def _flatten(value: object, prefix: str = "") -> dict[str, str]:
    if not isinstance(value, dict):
        return {prefix: json_text(value)}
    flat: dict[str, str] = {}
    for key, inner in value.items():
        if key not in IGNORED_SETTINGS:
            flat |= _flatten(inner, f"{prefix}.{key}" if prefix else str(key))
    return flat


def row_names(runs: list[RunLog], *, merge_runs: bool = True) -> dict[tuple[int, str, str], str]:
    """(run index, system, model) -> the row's system name: the system's own name when every run of it with
    this model ran it alike, else the name with what differs (`tool_use [max_steps=10]`). Without `merge_runs`,
    a system × model that several runs have is a row per run, its name followed by the run's (`run_label`):
    `tool_use@before`; so a before/after comparison is never silently averaged."""
    seen: dict[tuple[str, str], dict[int, dict[str, str]]] = {}
    for index, run in enumerate(runs):
        for system, model in {(r.system, r.model) for r in run.records}:
            seen.setdefault((system, model), {})[index] = settings(run, system, model)
    names = {}
    for (system, model), by_run in seen.items():
        keys = sorted({k for s in by_run.values() for k in s})
        differ = [k for k in keys if len({s.get(k) for s in by_run.values()}) > 1]
        named = {index: _labelled(system, differ, found, runs[index]) for index, found in by_run.items()}
        for index, name in named.items():
            alike = not merge_runs and list(named.values()).count(name) > 1  # runs that settings do not tell apart
            names[(index, system, model)] = f"{name}@{run_labels(runs)[index]}" if alike else name
    return names


def run_label(run: RunLog) -> str:
    """What a run is called in a report's rows: its `--label`, else its folder's name."""
    label = run.manifest.config.get("label")
    return str(label) if label else run.run_dir.name


def run_labels(runs: list[RunLog]) -> list[str]:
    """Each run's label, numbered where two runs share one (two folders named `run`)."""
    labels = [run_label(run).replace("/", "∕") for run in runs]  # "/" separates system from model in a row name
    return [f"{label}#{i + 1}" if labels.count(label) > 1 else label for i, label in enumerate(labels)]


def _labelled(system: str, differ: list[str], found: dict[str, str], run: RunLog) -> str:
    if not differ:
        return system
    shown = [f"{key.rsplit('.', 1)[-1]}={found.get(key, '–')[:24]}" for key in differ[:3]]
    more = f", +{len(differ) - 3} more" if len(differ) > 3 else ""
    label = ", ".join(shown).replace("/", "∕").replace('"', "")  # "/" separates system from model in a row name
    return f"{system} [{label}{more}]" if label else f"{system}@{run.run_dir.name}"


def _questions_from_benchmarks(runs: list[RunLog]) -> dict[str, tuple[str | None, list[str]]]:
    """Task id -> (question, data sources) from the benchmark files a manifest names; {} if unreadable."""
    for run in runs:
        config = run.manifest.config
        try:
            tasks = create_benchmark(run.manifest.benchmark, config.get("tasks_path")).load()
        except Exception:  # the files moved or the benchmark is not registered: the report goes on without
            continue
        return {t.id: (t.question, [f"{s.name} ({s.kind.value})" for s in t.data]) for t in tasks}
    return {}


def describe_sources(data: ReportData) -> list[str]:
    """One line per run directory: where it is, what it holds."""
    lines = []
    for run in data.runs:
        m = run.manifest
        systems = ", ".join(sorted(m.systems)) or "–"
        models = ", ".join(model.alias for model in m.models) or "–"
        lines.append(
            f"{run.run_dir}: {m.benchmark}, {len(run.records)} records, systems {systems}, models {models}, "
            f"started {m.started_at}, status {m.status}, suite {m.suite_version} ({m.git.sha[:12]})"
        )
    if len(data.runs) > 1:
        lines.append(
            "runs merged (--merge-runs): the runs of a system × model run alike are one row, each run's units "
            "counted as more epochs of its tasks"
            if data.merge_runs
            else "runs kept apart: each run's system × model is a row of its own, named @ its run's label "
            "(--label, else its folder's name); --merge-runs merges runs run alike as epochs"
        )
    return lines


def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
