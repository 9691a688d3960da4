"""The records a report compares: one or several run directories, read through the typed run log only,
restricted to the tasks every run has, so each system is compared on the same questions."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ..compare.benchmark import create_benchmark
from ..compare.runlog import ResultRecord, RunLog, RunLogError, UnitKey, read_run
from ..compare.trace import Trace
from .summary import SummaryRow, summarize


class ReportError(Exception):
    """Input a report cannot be built from; the message names the file, line or field."""


@dataclass
class ReportData:
    runs: list[RunLog]
    records: list[ResultRecord]  # on the common tasks; a system run in two directories is told apart by @run
    common_tasks: list[str]
    left_out: dict[str, list[str]]  # run directory -> its tasks that not every run has
    benchmark: str
    infra_errors_as_failures: bool = False
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


def load_runs(run_dirs: Iterable[str | Path], *, infra_errors_as_failures: bool = False) -> ReportData:
    """Read the run directories and keep the tasks they all have; raises ReportError."""
    runs = []
    for run_dir in run_dirs:
        try:
            runs.append(read_run(run_dir))
        except RunLogError as problem:
            raise ReportError(str(problem)) from None
    if not runs:
        raise ReportError("no run directory given")
    benchmarks = {run.manifest.benchmark for run in runs}
    if len(benchmarks) > 1:
        names = ", ".join(f"{run.run_dir} ({run.manifest.benchmark})" for run in runs)
        raise ReportError(f"runs of different benchmarks cannot be compared: {names}")
    tasks_of = {str(run.run_dir): {r.task_id for r in run.records} for run in runs}
    common = set.intersection(*tasks_of.values())
    if not common and any(tasks_of.values()):
        raise ReportError("the run directories share no task: " + ", ".join(tasks_of))
    data = ReportData(
        runs=runs,
        records=[],
        common_tasks=sorted(common),
        left_out={run: sorted(tasks - common) for run, tasks in tasks_of.items() if tasks - common},
        benchmark=benchmarks.pop(),
        infra_errors_as_failures=infra_errors_as_failures,
        warnings=[warning for run in runs for warning in run.warnings],
    )
    _collect(data, common)
    return data


def _collect(data: ReportData, common: set[str]) -> None:
    """Keep the common tasks' records; a (system, model) that several runs have gets its run's name."""
    seen: dict[tuple[str, str], int] = {}
    for run in data.runs:
        for pair in {(r.system, r.model) for r in run.records}:
            seen[pair] = seen.get(pair, 0) + 1
    for run in data.runs:
        for record in run.records:
            if record.task_id not in common:
                continue
            if seen[(record.system, record.model)] > 1:
                record = record.model_copy(update={"system": f"{record.system}@{run.run_dir.name}"})
            data.records.append(record)
            data._run_of[record.key] = run


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
    return lines


def json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
