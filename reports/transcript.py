"""One unit's whole conversation, in order: what `compare transcript` prints and the viewer's task page shows.

    find_units(run, task_id, ...)   the records of a task, narrowed by system, model and epoch
    unit_transcript(run, record)    its Transcript: each model call's request as sent (conversations.sqlite),
                                    its reply, tokens and cost; each tool call with arguments, result, duration
                                    and phase; the answer, the gold and the verdict

A request repeats the conversation so far; an entry shows only the messages the unit's earlier call of the
same role had not sent (`earlier_messages` counts the rest), and the tools offered in full only when they
changed. A run without a request store (written before it existed) gives the steps without their messages
(`stored` False).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from ..core.conversations import StoredRequest, read_requests
from ..core.runlog import ResultRecord, RunLog
from ..core.trace import MessageStep, ModelCallStep, ToolCallStep, Trace
from .summary import correctness

Verdict = Literal["correct", "wrong", "unscored"]


class TranscriptEntry(BaseModel):
    """One step of the unit: a model call, a tool call, or a message between agents."""

    kind: Literal["model_call", "tool_call", "message"]
    step: int
    role: Literal["system", "judge"] = "system"
    phase: str
    agent: str | None = None
    start_s: float | None = None
    duration_s: float = 0.0
    success: bool = True
    error: str | None = None
    # a model call
    messages: list[dict[str, Any]] = Field(default_factory=list)
    earlier_messages: int = 0
    tools: list[str] = Field(default_factory=list)
    tools_recorded: bool = True  # False: the request's tools are not known (an imported conversation)
    tool_specs: list[dict[str, Any]] | None = None
    settings: dict[str, Any] = Field(default_factory=dict)
    reply: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    cached: bool = False
    # a tool call
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    result: str | None = None
    truncated: bool = False
    # a message
    recipient: str | None = None
    content: str | None = None


class Transcript(BaseModel):
    task_id: str
    benchmark: str
    system: str
    model: str
    epoch: int
    attempt: str | None
    status: str
    error: str | None
    question: str | None
    gold: str | list[str] | None
    answer: dict[str, Any]
    verdict: Verdict
    scores: dict[str, float | None]
    usage: dict[str, Any]
    latency_s: float
    stored: bool  # the run kept its requests: model calls carry their messages
    entries: list[TranscriptEntry]


def verdict(record: ResultRecord) -> Verdict:
    """correct, wrong, or unscored (no correctness score)."""
    score = correctness(record)
    return "unscored" if score is None else "correct" if score >= 1.0 else "wrong"


class UnitNotFound(LookupError):
    """No unit, or more than one, matches what was asked; the message names the choices."""


def find_units(
    run: RunLog, task_id: str, system: str | None = None, model: str | None = None, epoch: int | None = None
) -> list[ResultRecord]:
    """The records of `task_id` in `run` that match the given system, model and epoch, in run order."""
    return [
        record
        for record in run.records
        if record.task_id == task_id
        and (system is None or record.system == system)
        and (model is None or record.model == model)
        and (epoch is None or record.epoch == epoch)
    ]


def one_unit(
    run: RunLog, task_id: str, system: str | None = None, model: str | None = None, epoch: int | None = None
) -> ResultRecord:
    """The one record matching, else UnitNotFound naming the tasks or units to choose from."""
    found = find_units(run, task_id, system, model, epoch)
    if len(found) == 1:
        return found[0]
    if not found:
        if not any(record.task_id == task_id for record in run.records):
            tasks = sorted({record.task_id for record in run.records})
            shown = ", ".join(tasks[:8]) + (f", … ({len(tasks)} tasks)" if len(tasks) > 8 else "")
            raise UnitNotFound(f"{run.run_dir}: no task {task_id!r} in the run; its tasks: {shown}")
        raise UnitNotFound(f"{run.run_dir}: no unit of task {task_id!r} matches; its units: {_units(run, task_id)}")
    raise UnitNotFound(
        f"{run.run_dir}: {len(found)} units of task {task_id!r} match; choose one with --system, --model, "
        f"--epoch: {_units(run, task_id, found)}"
    )


def _units(run: RunLog, task_id: str, records: list[ResultRecord] | None = None) -> str:
    chosen = records if records is not None else find_units(run, task_id)
    return ", ".join(f"{r.system}/{r.model} epoch {r.epoch}" for r in chosen)


def unit_transcript(run: RunLog, record: ResultRecord) -> Transcript:
    """`record`'s unit as a Transcript (module docstring)."""
    requests = read_requests(run.run_dir, record.key, record.attempt)
    by_step = {(request.role, request.step): request for request in requests or []}
    entries = _entries(run.trace(record), "system", by_step)
    if record.judge_trace_file:
        judge = Trace.model_validate_json((run.run_dir / record.judge_trace_file).read_text(encoding="utf-8"))
        entries += _entries(judge, "judge", by_step)
    return Transcript(
        task_id=record.task_id,
        benchmark=record.benchmark,
        system=record.system,
        model=record.model,
        epoch=record.epoch,
        attempt=record.attempt,
        status=record.status,
        error=record.error,
        question=record.question,
        gold=record.gold,
        answer=record.answer,
        verdict=verdict(record),
        scores=record.scores,
        usage=record.usage.model_dump(mode="json"),
        latency_s=record.latency_s,
        stored=requests is not None and bool(requests or not record.model_calls),
        entries=entries,
    )


def _entries(
    trace: Trace, role: Literal["system", "judge"], requests: dict[tuple[str, int], StoredRequest]
) -> list[TranscriptEntry]:
    entries = []
    sent: list[dict[str, Any]] = []  # the messages of the role's previous request
    offered: list[dict[str, Any]] | None = None  # its tools
    for step in trace.steps:
        common = dict(step=step.index, role=role, phase=str(step.phase), agent=step.agent, start_s=step.start_s)
        if isinstance(step, ModelCallStep):
            request = requests.get((role, step.index))
            entry = _model_call(step, request, sent, offered, common)
            if request is not None:
                sent, offered = request.messages, request.tools
            entries.append(entry)
        elif isinstance(step, ToolCallStep):
            entries.append(
                TranscriptEntry(
                    kind="tool_call",
                    **common,
                    duration_s=step.duration_s,
                    success=step.success,
                    error=step.error,
                    tool=step.tool,
                    arguments=step.arguments,
                    result=step.result_summary,
                    truncated=step.truncated,
                )
            )
        elif isinstance(step, MessageStep):
            entries.append(
                TranscriptEntry(
                    kind="message",
                    **common,
                    duration_s=step.duration_s,
                    recipient=step.recipient,
                    content=step.content,
                )
            )
    return entries


def _model_call(
    step: ModelCallStep,
    request: StoredRequest | None,
    sent: list[dict[str, Any]],
    offered: list[dict[str, Any]] | None,
    common: dict[str, Any],
) -> TranscriptEntry:
    reply = {"content": step.content, "tool_calls": [call.model_dump(mode="json") for call in step.tool_calls]}
    entry = TranscriptEntry(
        kind="model_call",
        **common,
        duration_s=step.duration_s,
        success=step.success,
        error=step.error,
        reply=reply,
        usage=step.usage.model_dump(mode="json"),
        cached=step.cached is not None,
    )
    if request is None:
        return entry
    shared = _shared_prefix(sent, request.messages)
    entry.messages, entry.earlier_messages = request.messages[shared:], shared
    entry.tools = [str(tool.get("name")) for tool in request.tools or []]
    entry.tools_recorded = request.tools is not None
    entry.tool_specs = request.tools if request.tools is not None and request.tools != offered else None
    entry.settings = request.settings
    return entry


def _shared_prefix(before: list[dict[str, Any]], now: list[dict[str, Any]]) -> int:
    count = 0
    for earlier, message in zip(before, now, strict=False):
        if earlier != message:
            break
        count += 1
    return count
