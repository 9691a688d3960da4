"""The per-task data behind the HTML drill-down: the question, data sources, gold, and for each system ×
model × epoch its answer, scores, status, failure mode and trace timeline (model calls with tokens, cost
and latency; tool calls with arguments and a result summary; phases, retries, errors).

Long texts are cut (`cells.TEXT_LIMIT`) so that a 2,000-record report stays a file a browser opens quickly;
the run directory keeps everything."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..core.runlog import ResultRecord
from ..core.trace import MessageStep, ModelCallStep, Step, Trace
from .cells import answer_text, cut
from .failures import failure_mode
from .runs import ReportData
from .summary import correctness

if TYPE_CHECKING:
    from .judged import Verdict

ANSWER_LIMIT = 2_000  # characters of an answer (reports can be long)


# Fields the page reads as "none" when absent: left out when empty, a fifth of a 2,000-record report's size.
SPARSE = ("agent", "error", "text", "reasoning", "queue", "attempts", "truncated")


def _step(step: Step) -> dict[str, Any]:
    found = _full_step(step)
    return {key: value for key, value in found.items() if key not in SPARSE or _said(key, value)}


def _said(key: str, value: Any) -> bool:
    return bool(value) and not (key == "attempts" and value == 1)  # one attempt: nothing to say


def _full_step(step: Step) -> dict[str, Any]:
    start = None if step.start_s is None else round(step.start_s, 6)
    base = {"i": step.index, "kind": step.kind, "phase": step.phase.value, "agent": step.agent}
    base |= {"start": start, "dur": round(step.duration_s, 6)}
    if isinstance(step, ModelCallStep):
        calls = [f"{c.name}({cut(json.dumps(c.arguments, ensure_ascii=False), 200)})" for c in step.tool_calls]
        return base | {
            "model": step.model,
            "in": step.usage.input_tokens,
            "out": step.usage.output_tokens,
            "reasoning": step.usage.reasoning_tokens,
            "cost": step.usage.cost_usd,
            "ok": step.success,
            "error": cut(step.error),
            "attempts": step.attempts,
            "queue": step.queue_s,
            "text": cut(step.content),
            "calls": calls,
        }
    if isinstance(step, MessageStep):
        return base | {"to": step.recipient, "text": cut(step.content), "ok": True}
    return base | {
        "tool": step.tool,
        "args": cut(json.dumps(step.arguments, ensure_ascii=False)),
        "result": cut(step.result_summary),
        "ok": step.success,
        "error": cut(step.error),
        "truncated": step.truncated,
    }


def _entry(record: ResultRecord, trace: Trace | None, verdict: Verdict | None) -> dict[str, Any]:
    return {
        "judged": (verdict.mode or "not judged") if verdict else None,
        "judged_why": (verdict.justification or verdict.error) if verdict else None,
        "system": record.system,
        "model": record.model,
        "epoch": record.epoch,
        "status": record.status,
        "failure": failure_mode(record),
        "correct": correctness(record),
        "answer": cut(answer_text(record), ANSWER_LIMIT),
        "scores": {name: value for name, value in record.scores.items() if value is not None},
        "error": record.error,
        "scoring_error": record.scoring_error,
        "cost": record.usage.cost_usd,
        "tokens": [record.usage.input_tokens, record.usage.output_tokens, record.usage.reasoning_tokens],
        "latency": record.latency_s,
        "model_calls": record.model_calls,
        "tool_calls": len(record.tool_calls),
        "wall": trace.wall_time_s if trace else record.latency_s,
        "trace_error": cut(trace.error, 1_000) if trace and trace.error else None,
        "steps": [_step(step) for step in trace.steps] if trace else None,
    }


def drilldown(
    data: ReportData, traces: dict[tuple, Trace | None], verdicts: dict[tuple, Verdict] | None = None
) -> list[dict[str, Any]]:
    """One item per task, its entries ordered by system, model and epoch (with the judge's verdict, if any)."""
    verdicts = verdicts or {}
    tasks: dict[str, dict[str, Any]] = {}
    for record in sorted(data.records, key=lambda r: (r.task_id, r.system, r.model, r.epoch)):
        if record.task_id not in tasks:
            question, sources = data.question(record)
            tasks[record.task_id] = {
                "id": record.task_id,
                "level": record.level,
                "type": record.question_type,
                "question": cut(question, ANSWER_LIMIT) if question else None,
                "sources": sources,
                "gold": record.gold,
                "entries": [],
            }
        tasks[record.task_id]["entries"].append(_entry(record, traces.get(record.key), verdicts.get(record.key)))
    return list(tasks.values())
