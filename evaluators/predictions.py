"""Predictions produced elsewhere (JSONL), read as (task, answer, trace) for `compare score`.

One JSON object per line, with `task_id` and the answer in the benchmark's own field, which
the benchmark reads (`Benchmark.prediction_answer`):

| benchmark        | answer fields                                                                       |
|------------------|-------------------------------------------------------------------------------------|
| fdabench/bundled | selected_answer (list of letters, "A", "A, C" or "['A', 'C']") or generated_report; |
|                  | bundled also `answer` (text, or a list of letters)                                  |
| dabstep          | agent_answer                                                                        |
| dab              | answer                                                                              |
| dbgorilla        | predicted_query (the query object, or null = no call); task_id dbgorilla-<index>    |

Any record may list the tools it used, for the tool scores: `tools_executed` / `tools_used` /
`tool_calls` (names, or objects with name/tool and optional success).

A record that cannot be read gives a `PredictionError` naming its line and field; the caller
reports it and goes on with the rest.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..compare.benchmark import Benchmark, BenchmarkError, PredictionFieldError
from ..compare.task import Answer, Task, answer_from_text
from ..compare.trace import Phase, ToolCallStep, Trace

TOOL_FIELDS = ("tools_executed", "tools_used", "tool_calls")


class PredictionError(Exception):
    def __init__(self, path: Path, line: int, field: str, message: str) -> None:
        super().__init__(f"{path}:{line}: field {field!r}: {message}")
        self.line, self.field = line, field


def read_predictions(
    path: Path, benchmark: Benchmark, tasks: dict[str, Task]
) -> Iterator[tuple[Task, Answer, Trace] | PredictionError]:
    """Each line as (task, answer, trace), or the PredictionError that describes what is wrong with
    it (a line that is not UTF-8 included, with its byte offset). A file without any prediction is
    a BenchmarkError: nothing to score is not a score."""
    offset, seen = 0, False
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        start, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        seen = True
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as bad:
            byte = raw[bad.start]
            yield PredictionError(path, number, "<line>", f"not UTF-8: byte 0x{byte:02x} at offset {start + bad.start}")
            continue
        try:
            yield _prediction(line, benchmark, tasks)
        except PredictionFieldError as bad:
            yield PredictionError(path, number, bad.field, str(bad))
    if not seen:
        raise BenchmarkError(f"{path}: no predictions (the file is empty)")


def _prediction(line: str, benchmark: Benchmark, tasks: dict[str, Task]) -> tuple[Task, Answer, Trace]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as bad:
        raise PredictionFieldError("<line>", f"not valid JSON ({bad.msg})") from None
    if not isinstance(record, dict):
        raise PredictionFieldError("<line>", "expected a JSON object")
    task_id = str(record.get("task_id", ""))
    if task_id not in tasks:
        raise PredictionFieldError("task_id", f"unknown task id {task_id!r} for {benchmark.name}")
    task = tasks[task_id]
    return task, benchmark.prediction_answer(task, record), _trace(task, record)


def _trace(task: Task, record: dict[str, Any]) -> Trace:
    """The tools a prediction says it used, as trace steps (no timings: they were not measured here)."""
    trace = Trace(task_id=task.id, system="predictions", model="unknown")
    field = next((f for f in TOOL_FIELDS if f in record), None)
    if field is None:
        return trace
    tools = record[field]
    if isinstance(tools, str):
        try:
            tools = ast.literal_eval(tools)
        except (ValueError, SyntaxError):
            raise PredictionFieldError(field, "unreadable list literal") from None
    if not isinstance(tools, list):
        raise PredictionFieldError(field, "expected a list")
    for index, tool in enumerate(tools):
        name, success = _tool_entry(tool)
        if name is None:
            raise PredictionFieldError(f"{field}.{index}", "expected a tool name or an object with name/tool")
        trace.steps.append(
            ToolCallStep(
                index=index,
                phase=Phase.EXECUTE,
                tool=name,
                arguments={},
                started_at="",
                duration_s=0.0,
                success=success,
            )
        )
    return trace


def _tool_entry(tool: Any) -> tuple[str | None, bool]:
    if isinstance(tool, str):
        return tool, True
    if isinstance(tool, dict):
        name = tool.get("name") or tool.get("tool")
        return (str(name) if name else None), bool(tool.get("success", True))
    return None, False


def text_answer(task: Task, record: dict[str, Any], field: str) -> Answer:
    """The answer of a benchmark whose predictions are one text field (DABstep, DAB)."""
    if not isinstance(record.get(field), str | int | float):
        raise PredictionFieldError(field, "missing or not a string")
    return answer_from_text(task, str(record[field]))
