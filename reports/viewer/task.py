"""A task page: the task's question and gold, and every unit of it (systems × models × epochs) with its whole
conversation as `compare transcript` tells it (`reports.transcript`); and two units' conversations diffed."""

from __future__ import annotations

import difflib
import json
from typing import Any

from ...core.runlog import ResultRecord, RunLog
from ..transcript import Transcript, TranscriptEntry, find_units, unit_transcript


class TaskNotFound(LookupError):
    """The run has no unit of this task (or not the unit asked for)."""


def unit_id(record: ResultRecord) -> str:
    """A unit's id on its task page (and in the diff's query): its system, model and epoch as JSON."""
    return json.dumps([record.system, record.model, record.epoch], ensure_ascii=False)


def task_page(run: RunLog, task_id: str) -> dict[str, Any]:
    """The task with every unit's transcript, ordered by system, model and epoch."""
    records = sorted(find_units(run, task_id), key=lambda r: (r.system, r.model, r.epoch))
    if not records:
        raise TaskNotFound(f"{run.run_dir.name}: no task {task_id!r} in the run")
    first = records[0]
    return {
        "task": task_id,
        "benchmark": first.benchmark,
        "level": first.level,
        "question": first.question,
        "data_sources": first.data_sources,
        "gold": first.gold,
        "units": [{"id": unit_id(record)} | unit_transcript(run, record).model_dump(mode="json") for record in records],
    }


def _record(run: RunLog, task_id: str, identifier: str) -> ResultRecord:
    try:
        system, model, epoch = json.loads(identifier)
    except (ValueError, TypeError):
        raise TaskNotFound(f"{identifier!r} is not a unit id (a JSON list of system, model and epoch)") from None
    found = find_units(run, task_id, str(system), str(model), int(epoch))
    if not found:
        raise TaskNotFound(f"{run.run_dir.name}: task {task_id!r} has no unit {system}/{model} epoch {epoch}")
    return found[-1]


def diff(run: RunLog, task_id: str, a: str, b: str) -> dict[str, Any]:
    """Two units' conversations as lines, side by side: rows of (op, left, right), op one of equal, replace,
    delete (only left), insert (only right)."""
    left = transcript_lines(unit_transcript(run, _record(run, task_id, a)))
    right = transcript_lines(unit_transcript(run, _record(run, task_id, b)))
    rows: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        for offset in range(max(a1 - a0, b1 - b0)):
            here = left[a0 + offset] if a0 + offset < a1 else None
            there = right[b0 + offset] if b0 + offset < b1 else None
            rows.append({"op": op, "a": here, "b": there})
    return {"task": task_id, "a": a, "b": b, "rows": rows, "same": matcher.ratio()}


def transcript_lines(told: Transcript) -> list[str]:
    """A conversation as the lines a diff compares: every message as sent, each reply, each tool call and result
    (timings and costs left out: they differ on every run and would hide what was said)."""
    lines = [f"question: {told.question or ''}"]
    for entry in told.entries:
        lines += _entry_lines(entry)
    lines.append(f"answer: {json.dumps(told.answer, ensure_ascii=False)}")
    lines.append(f"verdict: {told.verdict}")
    return lines


def _entry_lines(entry: TranscriptEntry) -> list[str]:
    if entry.kind == "tool_call":
        arguments = json.dumps(entry.arguments, ensure_ascii=False)
        return [f"tool {entry.tool}({arguments})", *_text("result", entry.result or entry.error or "")]
    if entry.kind == "message":
        return _text(f"message {entry.agent or ''} → {entry.recipient or ''}", entry.content or "")
    lines = []
    for message in entry.messages:
        lines += _text(str(message.get("role", "?")), _message_text(message))
        for call in message.get("tool_calls") or []:
            lines.append(f"  calls {call.get('name')}({json.dumps(call.get('arguments'), ensure_ascii=False)})")
    reply = entry.reply or {}
    lines += _text("reply", str(reply.get("content") or ""))
    for call in reply.get("tool_calls") or []:
        lines.append(f"reply calls {call.get('name')}({json.dumps(call.get('arguments'), ensure_ascii=False)})")
    return lines


def _message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False) if content is not None else ""


def _text(label: str, text: str) -> list[str]:
    parts = text.splitlines() or [""]
    return [f"{label}: {parts[0]}", *[f"  {line}" for line in parts[1:]]]
