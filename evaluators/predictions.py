"""Predictions produced elsewhere (JSONL), read as (task, answer, trace) for `compare score`.

Accepted record shapes, one JSON object per line:

| benchmark        | fields                                                                              |
|------------------|-------------------------------------------------------------------------------------|
| fdabench/bundled | task_id; selected_answer (list of letters, "A", "A, C" or "['A', 'C']") or           |
|                  | generated_report; optional tools: tools_executed / tools_used / tool_calls (names, |
|                  | or objects with name/tool and optional success) for the DAG scores                  |
| bundled          | also `answer` (text, or a list of letters)                                          |
| dabstep          | task_id; agent_answer                                                               |
| dab              | task_id; answer                                                                     |
| dbgorilla        | task_id (dbgorilla-<index>); predicted_query (the query object, or null = no call) |

A record that cannot be read raises `PredictionError` naming its line and field; the
caller reports it and goes on with the rest.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from compare.task import Answer, QuestionType, Task, ToolCall, answer_from_text, answer_from_tool
from compare.trace import Phase, ToolCallStep, Trace

TOOL_FIELDS = ("tools_executed", "tools_used", "tool_calls")


class PredictionError(Exception):
    def __init__(self, path: Path, line: int, field: str, message: str) -> None:
        super().__init__(f"{path}:{line}: field {field!r}: {message}")
        self.line, self.field = line, field


def read_predictions(
    path: Path, benchmark: str, tasks: dict[str, Task]
) -> Iterator[tuple[Task, Answer, Trace] | PredictionError]:
    """Each line as (task, answer, trace), or the PredictionError that describes what is wrong with it."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield _prediction(path, number, line, benchmark, tasks)
        except PredictionError as bad:
            yield bad


def _prediction(
    path: Path, number: int, line: str, benchmark: str, tasks: dict[str, Task]
) -> tuple[Task, Answer, Trace]:
    def fail(field: str, message: str) -> PredictionError:
        return PredictionError(path, number, field, message)

    try:
        record = json.loads(line)
    except json.JSONDecodeError as bad:
        raise fail("<line>", f"not valid JSON ({bad.msg})") from None
    if not isinstance(record, dict):
        raise fail("<line>", "expected a JSON object")
    task_id = str(record.get("task_id", ""))
    if task_id not in tasks:
        raise fail("task_id", f"unknown task id {task_id!r} for {benchmark}")
    task = tasks[task_id]
    answer = _answer(task, record, benchmark, fail)
    return task, answer, _trace(task, record, fail)


def _answer(task: Task, record: dict[str, Any], benchmark: str, fail: Any) -> Answer:
    if benchmark == "dbgorilla":
        if "predicted_query" not in record:
            raise fail("predicted_query", "missing (use null for no tool call)")
        return _function_call_answer(record["predicted_query"], fail)
    field = {"dabstep": "agent_answer", "dab": "answer"}.get(benchmark)
    if field is not None:
        if not isinstance(record.get(field), str | int | float):
            raise fail(field, "missing or not a string")
        return answer_from_text(task, str(record[field]))
    if task.question_type == QuestionType.REPORT:
        report = record.get("generated_report", record.get("answer"))
        if not isinstance(report, str):
            raise fail("generated_report", "missing or not a string")
        return answer_from_text(task, report)
    if "selected_answer" not in record and "answer" not in record:
        raise fail("selected_answer", "missing")
    value = record.get("selected_answer", record.get("answer"))
    return (
        answer_from_tool(task, {"answer": _letters(value, fail)})
        if _is_choice(task)
        else answer_from_text(task, str(value))
    )


def _is_choice(task: Task) -> bool:
    return task.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE)


def _letters(value: Any, fail: Any) -> list[str]:
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            raise fail("selected_answer", f"unreadable list literal {value!r}") from None
    if isinstance(value, str):
        value = value.replace(";", ",").split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise fail("selected_answer", "expected letters as a list or a string")
    return [v.strip() for v in value if v.strip()]


def _function_call_answer(predicted: Any, fail: Any) -> Answer:
    if predicted is None:
        return Answer(status="no_tool_call")
    if not isinstance(predicted, dict) or not predicted.get("target_collection"):
        raise fail("predicted_query", "expected an object with target_collection, or null")
    arguments = {"collection_name": predicted["target_collection"]}
    arguments |= {
        k: v
        for k, v in predicted.items()
        if v is not None and k not in ("target_collection", "corresponding_natural_language_query")
    }
    return Answer(tool_call=ToolCall(name="query_database", arguments=arguments))


def _trace(task: Task, record: dict[str, Any], fail: Any) -> Trace:
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
            raise fail(field, "unreadable list literal") from None
    if not isinstance(tools, list):
        raise fail(field, "expected a list")
    for index, tool in enumerate(tools):
        name, success = _tool_entry(tool)
        if name is None:
            raise fail(f"{field}.{index}", "expected a tool name or an object with name/tool")
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
