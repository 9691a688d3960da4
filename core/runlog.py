"""The run log: a run directory's manifest, result records and traces, typed and versioned.

    manifest.json    `Manifest`: suite version, git sha, resolved config, models, budgets, systems, tasks, status
    results.jsonl    one `ResultRecord` per task × system × model × epoch, appended and flushed as each finishes
    traces/<system>/<model>/<task>[.e<epoch>].json   the `Trace` of each record (and `.judge.json` for the judge)

One writer (`RunLogWriter`) and one reader (`read_run`): the runner, `--resume`, `compare report`
and the reports use nothing else. Every manifest and record carries `schema_version`; a reader
meeting a newer version than `RUN_LOG_SCHEMA_VERSION` refuses with a message instead of
guessing, and files written before versioning read as version 1 (the same fields, untyped).

A crash or Ctrl-C loses nothing computed: records are appended one line at a time and flushed;
a line cut by a crash is dropped when the run is resumed, and its unit runs again (a last line that
is whole JSON but lost only its newline is kept).

    calls.jsonl      the spend journal: one `SpentCall` per model call as it finishes, tagged with its
                     unit's attempt. A unit interrupted before its record was written (Ctrl-C, SIGTERM,
                     kill -9) leaves its calls here; `RunLog.interrupted` adds them up per attempt,
                     apart from the results, so the run's spend counts what was paid for and never
                     reached a record. A graceful stop also notes the calls still in flight.
    .lock            `RunDirLock`: one process at a time writes a run directory (flock).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from .conversations import CallRequest, ConversationWriter
from .model import ModelConfig

# Re-exported: app/, tools/ and reports/ import these from here until they import core/redaction.py themselves.
from .redaction import redact_credentials as redact_credentials
from .redaction import register_secret as register_secret
from .redaction import secret_forms as secret_forms
from .safe_load import DocumentTooComplex, load_json
from .task import Answer, AnswerStatus, Task
from .trace import Budgets, PhaseTotals, RunWarning, Trace, Usage, utc_now

# 1: the untyped log (no schema_version); 2: typed, versioned; 3: the manifest records what a run depends on
# (code, plugin files, scorer versions, data files: `RunIdentity`), drift allowed on resume, and rescoring.
# Each version reads the older ones: a field added since reads as empty (nothing recorded, nothing compared).
RUN_LOG_SCHEMA_VERSION = 3
MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
CALLS_FILE = "calls.jsonl"
LOCK_FILE = ".lock"

UnitKey = tuple[str, str, str, int]  # (task id, system, model alias, epoch)


class RunLogError(Exception):
    """A run directory that cannot be read: missing, malformed, or written by a newer suite."""


class GitRevision(BaseModel):
    sha: str = "unknown"
    dirty: bool | None = None


class CodeIdentity(BaseModel):
    """The code a run ran. From a checkout: its commit, a hash of the committed files that make the suite
    (tests and Markdown left out, so a commit of those alone changes nothing) and a hash of the
    uncommitted changes (None: a clean tree), so a dirty tree whose diff is unchanged resumes.
    Installed: a hash of the package's files."""

    source: Literal["checkout", "package", "unknown"]
    commit: str | None = None
    tree_sha256: str | None = None
    diff_sha256: str | None = None
    package_sha256: str | None = None


class DataFile(BaseModel):
    """A data file as the run found it. Files up to a few MB are hashed whole; a larger file by its size
    and sampled blocks (fast on a database of GBs), with its modification time, since an edit between
    the samples would not show in them."""

    size: int
    sha256: str
    sampled: bool = False
    mtime_ns: int | None = None  # recorded for sampled files only


class RunIdentity(BaseModel):
    """What a run's results depend on besides its configuration: `--resume` and `--replay` refuse when
    any of it changed since the run started (unless `--allow-drift`, which the manifest records)."""

    code: CodeIdentity
    plugin_files: dict[str, str] = Field(default_factory=dict)  # plugin -> sha256 of its file(s)
    scorers: dict[str, str] = Field(default_factory=dict)  # scorer name -> its declared version
    data_files: dict[str, DataFile] = Field(default_factory=dict)  # absolute path -> fingerprint
    data_files_s: float = 0.0  # seconds taken to fingerprint the data files


class DriftAllowed(BaseModel):
    """A `--resume` or `--replay` told to go on although what the run depends on changed."""

    at: str
    by: Literal["resume", "replay"]
    changes: list[str]


class Rescored(BaseModel):
    """`compare rescore`: this run's records are another run's, scored again with the scorers of `identity`."""

    source: str  # the run directory scored again (left untouched)
    at: str
    scorers_before: dict[str, str] = Field(default_factory=dict)  # {} when the source recorded none
    code: CodeIdentity | None = None  # the code that scored again


class Manifest(BaseModel):
    schema_version: int = RUN_LOG_SCHEMA_VERSION
    suite_version: str
    git: GitRevision = Field(default_factory=GitRevision)
    python: str = ""
    platform: str = ""
    started_at: str
    finished_at: str | None = None
    resumed_at: str | None = None
    status: Literal["running", "completed", "interrupted", "failed"] = "running"  # failed: could not write
    config: dict[str, Any]  # the resolved run configuration, secrets redacted
    models: list[ModelConfig]
    budgets: Budgets
    systems: dict[str, dict[str, Any]]  # name -> System.describe()
    judge: dict[str, Any] | None = None
    benchmark: str
    task_ids: list[str]
    units: int
    model_load_s: dict[str, float] = Field(default_factory=dict)
    # How model-written Python ran: bubblewrap, unsafe (--unsafe-python where bubblewrap cannot run),
    # or unavailable (execute_python refused every call).
    python_sandbox: str | None = None
    # The sandbox's one memory budget: a memory cgroup per sandbox, or one process (fork refused); None: no sandbox.
    python_sandbox_memory: str | None = None
    # How external agents ran: "bubblewrap" (a sandbox of their own per unit, its limits in `agent_sandbox_limits`)
    # or "unsandboxed" (--unsandboxed-agents, where none could be made: `agent_sandbox_problem` says why); None:
    # the run had no external system.
    agent_sandbox: str | None = None
    agent_sandbox_limits: dict[str, Any] | None = None
    agent_sandbox_problem: str | None = None
    # sha256 of each task as loaded (`--resume` refuses a changed task file); {} in older run logs.
    task_hashes: dict[str, str] = Field(default_factory=dict)
    replay_of: str | None = None  # `compare --replay`: the run whose recorded responses were served
    # Schema 3 (None / empty in older run logs):
    identity: RunIdentity | None = None
    drift_allowed: list[DriftAllowed] = Field(default_factory=list)
    rescored: Rescored | None = None
    # What the benchmark says about this run's data setup (e.g. DAB: MongoDB on the in-process stand-in).
    benchmark_notes: list[str] = Field(default_factory=list)
    # How units ran beyond `config.executor`: which executor and why, and Ray's actors running and waiting.
    executor: dict[str, Any] = Field(default_factory=dict)


class ToolCallSummary(BaseModel):
    tool: str
    success: bool
    duration_s: float


class ResultRecord(BaseModel):
    """One task run with one system and model, scored."""

    schema_version: int = RUN_LOG_SCHEMA_VERSION
    task_id: str
    benchmark: str
    system: str
    model: str
    epoch: int
    question_type: str
    level: str | None = None
    status: AnswerStatus
    error: str | None = None  # the first line; the trace keeps the rest
    answer: dict[str, Any]
    gold: str | list[str] | None = None
    scores: dict[str, float | None]
    scoring_error: str | None = None  # a scorer failed; the answer is kept
    usage: Usage
    latency_s: float
    setup_s: float = 0.0
    latency_by_phase: dict[str, PhaseTotals]
    model_calls: int
    # The retry policy at work (added within schema 2: older records read as 0): attempts beyond the first,
    # seconds slept between attempts (not in any model latency), and failed attempts (provider errors).
    retries: int = 0
    backoff_s: float = 0.0
    provider_errors: int = 0
    tool_calls: list[ToolCallSummary]
    trace_file: str
    judge_usage: Usage | None = None
    judge_trace_file: str | None = None
    attempt: str | None = None  # this run of the unit; its model calls in calls.jsonl carry it
    # The system skipped its main step and went on (no operator ran, nothing retrieved, its planner fell back);
    # added within schema 2: older records read as [].
    warnings: list[RunWarning] = Field(default_factory=list)
    # `--retry-errors` ran this unit again after attempts that ended `infra_error`: their spend, included in
    # `usage` (it was paid), and their attempt ids (their lines in results.jsonl are superseded by this one).
    retried_usage: Usage | None = None
    retried_attempts: list[str] = Field(default_factory=list)
    # The sampling settings the system asked for (setting → value → model calls); sent was `generation:`.
    generation_asked: dict[str, dict[str, int]] = Field(default_factory=dict)
    # The sampling settings the requests carried (setting → value → model calls), as the gateway sent them;
    # None in records written before this was kept.
    generation_sent: dict[str, dict[str, int]] | None = None
    # The task as its question (added within schema 2: records written before read as None/[]).
    question: str | None = None
    data_sources: list[str] = Field(default_factory=list)  # "name (kind)" of each data source

    @property
    def key(self) -> UnitKey:
        return (self.task_id, self.system, self.model, self.epoch)

    @field_validator("trace_file", "judge_trace_file")
    @classmethod
    def _inside_the_run(cls, value: str | None) -> str | None:
        """A trace is a file of the run directory: `compare report` must not read (and inline) another file."""
        if value is not None and (Path(value).is_absolute() or ".." in Path(value).parts or "\x00" in value):
            raise ValueError(f"{value!r} is outside the run directory; a trace file is a path under traces/")
        return value


def trace_path(system: str, model: str, task_id: str, epoch: int) -> str:
    """Where a unit's trace lives in its run directory (relative): `traces/<system>/<model>/<task>[.eN].json`."""
    suffix = "" if epoch == 1 else f".e{epoch}"
    return str(Path("traces") / system / model.replace("/", "_") / f"{task_id.replace('/', '_')}{suffix}.json")


def record_of(trace: Trace, answer: Answer, task: Task | None, **fields: Any) -> ResultRecord:
    """The result record of one unit: what the trace and the answer say, the task's description (when the
    task is known), and `fields` (identity, scores, files; they win over the others); one place for the
    runner and the importers."""
    described: dict[str, Any] = {}
    if task is not None:
        described = {
            "question_type": task.question_type.value,
            "level": task.level,
            "gold": task.gold.answer if task.gold else None,
            "question": task.question,
            "data_sources": [f"{source.name} ({source.kind.value})" for source in task.data],
        }
    measured: dict[str, Any] = dict(
        status=answer.status,
        error=answer.error.splitlines()[0] if answer.error else None,
        answer=answer.model_dump(exclude={"status", "error"}, exclude_none=True, mode="json"),
        usage=trace.usage(),
        latency_s=trace.wall_time_s,
        setup_s=trace.setup_s,
        latency_by_phase=trace.by_phase(),
        model_calls=len(trace.model_calls),
        retries=trace.retries(),
        backoff_s=trace.backoff_s(),
        provider_errors=trace.provider_errors(),
        tool_calls=[ToolCallSummary(tool=c.tool, success=c.success, duration_s=c.duration_s) for c in trace.tool_calls],
        warnings=trace.warnings,
        generation_asked=trace.generation_asked(),
        generation_sent=trace.generation_sent(),
    )
    return ResultRecord(**{**measured, **described, **fields})


class SpentCall(BaseModel):
    """A line of the spend journal (calls.jsonl): a finished model call of a unit's attempt; (with `sent`)
    a request about to be sent, journaled before it leaves so that `kill -9` cannot lose it; or (with
    `in_flight`) the calls an attempt had sent when a graceful stop cut it short."""

    attempt: str
    task_id: str
    system: str
    model: str
    epoch: int
    role: Literal["system", "judge"] = "system"
    usage: Usage = Field(default_factory=Usage)
    success: bool = True
    cached: bool = False
    in_flight: int = 0  # sent, never answered: their usage is unknown
    sent: int = 0  # 1: a request of the attempt is being sent (-1: it was refused before it left after all)
    attempts: int = 1  # the requests a finished call sent (its retries included; 0: none left)


class InterruptedSpend(BaseModel):
    """What a unit's attempt spent before it was interrupted (no record holds it)."""

    attempt: str
    task_id: str
    system: str
    model: str
    epoch: int
    model_calls: int = 0
    in_flight_calls: int = 0  # requests sent and never answered (kill -9, a stop): their usage is unknown
    usage: Usage = Field(default_factory=Usage)


class RunLog(BaseModel):
    run_dir: Path
    manifest: Manifest
    records: list[ResultRecord]
    warnings: list[str] = Field(default_factory=list)  # lines that could not be read (their units re-run)
    interrupted: list[InterruptedSpend] = Field(default_factory=list)  # spend of attempts without a record
    journaled_calls: int = 0  # model calls that finished, per calls.jsonl (0 for run logs without one)
    cached_calls: int = 0  # of those, answered by the response cache or a replay (cost 0)

    def interrupted_usage(self) -> Usage:
        """Tokens and cost of interrupted attempts, summed (apart from the records' usage)."""
        total = Usage()
        for spent in self.interrupted:
            _add_usage(total, spent.usage)
        return total

    def trace(self, record: ResultRecord) -> Trace:
        return Trace.model_validate_json((self.run_dir / record.trace_file).read_text(encoding="utf-8"))


# ---------------------------------------------------------------- reading


def _checked_version(data: dict[str, Any], where: str) -> dict[str, Any]:
    version = data.setdefault("schema_version", 1)
    if not isinstance(version, int) or version > RUN_LOG_SCHEMA_VERSION:
        from . import __version__

        raise RunLogError(
            f"{where} was written with run-log schema version {version}; this suite "
            f"(data-agent-compare {__version__}) reads schema versions up to {RUN_LOG_SCHEMA_VERSION}: "
            "upgrade data-agent-compare to read it"
        )
    return data


def _invalid(where: str, error: ValidationError) -> RunLogError:
    first = error.errors()[0]
    field = ".".join(str(part) for part in first["loc"]) or "<record>"
    return RunLogError(f"{where}: field {field!r}: {first['msg']}")


def read_manifest(run_dir: Path) -> Manifest:
    path = Path(run_dir) / MANIFEST_FILE
    if not path.is_file():
        raise RunLogError(f"{run_dir} is not a run directory (no {MANIFEST_FILE})")
    try:
        data = load_json(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise RunLogError(f"{path}:{error.lineno}: not valid JSON ({error.msg})") from None
    except DocumentTooComplex as error:
        raise RunLogError(f"{path}: refused: {error}") from None
    if not isinstance(data, dict):
        raise RunLogError(f"{path}: expected a JSON object")
    try:
        return Manifest.model_validate(_checked_version(data, str(path)))
    except ValidationError as error:
        raise _invalid(str(path), error) from None


def json_lines(path: Path) -> Iterator[tuple[int, str | None]]:
    """(line number, text) of a JSON Lines file; None for a line that is not UTF-8: a write cut inside a
    multi-byte character (`kill -9` after a non-ASCII answer), which is a partial write like any other."""
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            yield number, raw.decode("utf-8")
        except UnicodeDecodeError:
            yield number, None


def read_records(run_dir: Path, task_id: str | None = None) -> tuple[list[ResultRecord], list[str]]:
    """The records of results.jsonl and warnings about lines that are not JSON (a run killed
    mid-write leaves at most one partial last line; that unit runs again on --resume). A line
    that is JSON but not a record raises RunLogError naming the line and the field. With `task_id`, only
    that task's records (the lines that cannot hold it are not parsed: a task of a large run reads fast)."""
    path = Path(run_dir) / RESULTS_FILE
    records: list[ResultRecord] = []
    warnings: list[str] = []
    if not path.exists():
        return records, warnings
    # A task id written as it is in JSON (no character JSON escapes) is on its lines as it is.
    needle = task_id if task_id is not None and json.dumps(task_id, ensure_ascii=False)[1:-1] == task_id else None
    for number, line in json_lines(path):
        if line is None:
            warnings.append(f"{path}:{number}: unreadable record (partial write?); its unit will be run again")
            continue
        if not line.strip() or (needle is not None and needle not in line):
            continue
        record = _current_record(line)
        if record is not None:
            records.append(record)
            continue
        where = f"{path}:{number}"
        try:
            data = load_json(line)
        except json.JSONDecodeError:
            warnings.append(f"{path}:{number}: unreadable record (partial write?); its unit will be run again")
            continue
        except DocumentTooComplex as error:
            raise RunLogError(f"{where}: refused: {error}") from None
        if not isinstance(data, dict):
            raise RunLogError(f"{where}: expected a JSON object")
        try:
            records.append(ResultRecord.model_validate(_checked_version(data, where)))
        except ValidationError as error:
            raise _invalid(where, error) from None
    if task_id is not None:
        records = [record for record in records if record.task_id == task_id]
    return latest_records(records), warnings


def _current_record(line: str) -> ResultRecord | None:
    """The record on `line` when it is one of this schema version, parsed and validated in one pass (pydantic's
    JSON parser: half the time of `json.loads` then `model_validate`); None sends the line the long way, which
    reads older versions, refuses newer ones and names what is wrong."""
    if f'"schema_version":{RUN_LOG_SCHEMA_VERSION},' not in line[:40]:  # how `RunLogWriter.append` writes it
        return None
    try:
        return ResultRecord.model_validate_json(line)
    except ValidationError:
        return None


def latest_records(records: list[ResultRecord]) -> list[ResultRecord]:
    """One record per unit: the last one written (`--retry-errors` appends a unit's new record after the
    `infra_error` one it replaces; the new record carries the old one's spend)."""
    latest = {record.key: record for record in records}
    return list(latest.values()) if len(latest) < len(records) else records


def read_run(run_dir: str | Path) -> RunLog:
    """The whole run log of a run directory; raises RunLogError."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    records, warnings = read_records(run_dir)
    journal = read_spend_journal(run_dir, records)
    return RunLog(
        run_dir=run_dir,
        manifest=manifest,
        records=records,
        warnings=warnings + journal.warnings,
        interrupted=journal.interrupted,
        journaled_calls=journal.calls,
        cached_calls=journal.cached_calls,
    )


def _add_usage(total: Usage, usage: Usage) -> None:
    """Add `usage` into `total`: a part unknown in either is unknown (`Usage.plus`), never 0; sources that
    differ make the total's source "mixed"."""
    had_some = bool(total.total_tokens or total.cost_usd) or total.cost_usd is None
    summed = total.plus(usage)
    for name in Usage.SUMMED:
        setattr(total, name, getattr(summed, name))
    if not had_some or summed.cost_usd is None:
        total.cost_source = summed.cost_source if summed.cost_usd is None else usage.cost_source
    elif total.cost_source != usage.cost_source:
        total.cost_source = "mixed"


class SpendJournal(BaseModel):
    """What calls.jsonl says: the attempts no record finished (summed per attempt), how many model calls
    finished in all and how many of those the cache or a replay answered, and the lines a crash cut."""

    interrupted: list[InterruptedSpend] = Field(default_factory=list)
    calls: int = 0
    cached_calls: int = 0
    warnings: list[str] = Field(default_factory=list)


def read_spend_journal(run_dir: Path, records: list[ResultRecord]) -> SpendJournal:
    path = Path(run_dir) / CALLS_FILE
    journal = SpendJournal()
    if not path.exists():
        return journal
    finished = {record.attempt for record in records if record.attempt}
    finished |= {attempt for record in records for attempt in record.retried_attempts}  # superseded, counted there
    spent: dict[str, InterruptedSpend] = {}
    requests: dict[str, list[int]] = {}  # attempt -> [requests sent, requests of finished calls]
    warnings = journal.warnings
    for number, line in json_lines(path):
        if line is not None and not line.strip():
            continue
        try:
            call = SpentCall.model_validate_json(line or "")
        except ValidationError:
            warnings.append(f"{path}:{number}: unreadable line (cut by a crash?); that call's usage is not counted")
            continue
        finished_call = not (call.in_flight or call.sent)
        journal.calls += finished_call
        journal.cached_calls += call.cached
        if call.attempt in finished:
            continue
        unit = call.model_dump(include={"attempt", "task_id", "system", "model", "epoch"})
        entry = spent.setdefault(call.attempt, InterruptedSpend(**unit))
        entry.model_calls += finished_call
        entry.in_flight_calls = max(entry.in_flight_calls, call.in_flight)  # a graceful stop's count
        counts = requests.setdefault(call.attempt, [0, 0])
        counts[0] += call.sent
        counts[1] += call.attempts if finished_call and not call.cached else 0
        if finished_call:
            _add_usage(entry.usage, call.usage)
    for attempt, (sent, answered) in requests.items():  # requests journaled as sent that no finished call holds
        spent[attempt].in_flight_calls = max(spent[attempt].in_flight_calls, sent - answered)
    journal.interrupted = list(spent.values())
    return journal


# ---------------------------------------------------------------- writing


def write_json(path: Path, data: Any, indent: int | None = 2) -> None:
    """Write atomically, credentials redacted: a crash leaves the old file or the new one, never half
    of one, and never a `.tmp` file (a full disk included). Traces are written without indentation
    (`indent=None`): json's C encoder serves only that, twice as fast as `indent=2` on a trace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _replace_with(path, redact_credentials(json.dumps(data, indent=indent, ensure_ascii=False, default=str)))


def _replace_with(path: Path, text: str) -> None:
    """`path` now holds `text`, written to a temporary file first (see `write_json`)."""
    temporary = path.with_suffix(path.suffix + ".tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        temporary.replace(path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _mend_last_line(path: Path) -> None:
    """A crash can leave the last line of a JSON Lines file without its newline: a whole JSON object is
    kept (its newline added); a line cut mid-write is dropped (its unit runs again)."""
    if not path.exists() or not path.stat().st_size:
        return
    content = path.read_bytes()
    if content.endswith(b"\n"):
        return
    start = content.rfind(b"\n") + 1
    try:
        whole = isinstance(json.loads(content[start:]), dict)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        whole = False
    if whole:
        with path.open("ab") as file:
            file.write(b"\n")
    else:
        path.write_bytes(content[:start])


class RunLogWriter:
    """Writes a run directory: the manifest atomically, records and traces as units finish, and the
    spend journal as model calls finish. Thread-safe; each line is flushed to disk when written."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self._lock = threading.Lock()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / RESULTS_FILE
        _mend_last_line(path)
        _mend_last_line(self.run_dir / CALLS_FILE)
        self._results = path.open("a", encoding="utf-8")
        self._calls: Any = None  # opened on the first model call
        self._calls_lock = threading.Lock()  # its own: a unit's journal line never waits for a trace being written
        self._folders: set[Path] = set()  # trace folders made: one mkdir per folder, not per trace
        self.conversations = ConversationWriter(self.run_dir)

    def requested(self, call: CallRequest) -> None:
        """Keep a finished model call's request, as sent (conversations.sqlite)."""
        self.conversations.put(call)

    def spent(self, call: SpentCall) -> None:
        """Journal one model call (or the calls in flight) of a unit's attempt."""
        line = call.model_dump_json(exclude_defaults=True) + "\n"
        with self._calls_lock:
            if self._calls is not None and self._calls.closed:  # a gateway call that ended after the run closed
                with (self.run_dir / CALLS_FILE).open("a", encoding="utf-8") as late:
                    late.write(line)
                return
            if self._calls is None:
                self._calls = (self.run_dir / CALLS_FILE).open("a", encoding="utf-8")
            self._calls.write(line)
            self._calls.flush()

    def write_manifest(self, manifest: Manifest) -> None:
        with self._lock:
            write_json(self.run_dir / MANIFEST_FILE, manifest.model_dump(mode="json"))

    def append(self, record: ResultRecord, trace: Trace | str, judge_trace: Trace | str | None = None) -> None:
        """The unit's record, after its traces (a trace may come encoded: a worker process's JSON text)."""
        with self._lock:
            self._write_trace(record.trace_file, trace)
            if judge_trace is not None and record.judge_trace_file:
                self._write_trace(record.judge_trace_file, judge_trace)
            self._results.write(redact_credentials(record.model_dump_json()) + "\n")
            self._results.flush()

    def _write_trace(self, name: str, trace: Trace | str) -> None:
        """Atomically, credentials redacted, as `write_json` does; encoded by pydantic's serializer (half the
        time of `model_dump` then `json.dumps`), unindented, unless it comes encoded."""
        path = self.run_dir / name
        if path.parent not in self._folders:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._folders.add(path.parent)
        _replace_with(path, redact_credentials(trace if isinstance(trace, str) else trace.model_dump_json()))

    def close(self) -> None:
        self._results.close()
        if self._calls is not None:
            self._calls.close()
        self.conversations.close()

    def close_with(self, manifest: Manifest) -> None:
        """Write the final manifest and close, also on a full disk: the manifest is then rewritten in
        place (its blocks are already allocated), so it never stays "running" after the run ended."""
        try:
            self.write_manifest(manifest)
        except OSError:
            with contextlib.suppress(OSError):
                text = redact_credentials(json.dumps(manifest.model_dump(mode="json"), indent=2, ensure_ascii=False))
                with (self.run_dir / MANIFEST_FILE).open("r+", encoding="utf-8") as file:
                    file.write(text)
                    file.truncate()
        finally:
            with contextlib.suppress(OSError):  # flushing a record cut by a full disk fails again
                self._results.close()
            with contextlib.suppress(OSError):
                if self._calls is not None:
                    self._calls.close()
            self.conversations.close()


class RunDirBusy(RunLogError):
    """Another process is writing this run directory."""


def run_dir_holder(run_dir: Path) -> str | None:
    """Who is writing `run_dir` now (`pid …, since …`), or None when no process holds its lock. Reads only:
    `compare report` asks before it writes beside a run's own files."""
    try:
        fd = os.open(Path(run_dir) / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # released by the close below
        return None
    except BlockingIOError:
        return os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
    finally:
        os.close(fd)


class RunDirLock:
    """An exclusive lock on a run directory (`flock` on `<dir>/.lock`), so two processes never write
    one run (a second `--resume`, or a new run into the same --out). The kernel drops the lock when its
    process ends, kill -9 included. The lock file stays (removing it would let two processes lock two
    different files); a folder this lock created and nothing else wrote into is removed on release."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK_FILE
        self._fd: int | None = None
        self._created = False

    def acquire(self) -> None:
        self._created = not self.run_dir.exists()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for _ in range(10):  # the file may be replaced between open and flock: lock the one at the path
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
                os.close(fd)
                raise RunDirBusy(
                    f"{self.run_dir} is in use by another compare process ({holder}); "
                    "wait for it to finish, or use another --out"
                ) from None
            if os.path.exists(self.path) and os.stat(self.path).st_ino == os.fstat(fd).st_ino:
                with contextlib.suppress(OSError):  # who holds it, for the message; the lock holds without it
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"pid {os.getpid()}, since {utc_now()}\n".encode(), 0)
                self._fd = fd
                return
            os.close(fd)
        raise RunDirBusy(f"{self.run_dir}: cannot lock {LOCK_FILE}")

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if self._created and [p.name for p in self.run_dir.iterdir()] == [LOCK_FILE]:
            with contextlib.suppress(OSError):  # nothing was written: leave no empty run directory behind
                self.path.unlink()
                self.run_dir.rmdir()
        os.close(fd)  # closing releases the lock

    def __enter__(self) -> RunDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
