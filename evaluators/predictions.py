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
reports it and goes on with the rest. A line may carry `run` (or `epoch`): its run, scored as an
epoch. A second prediction for one task (for one task and run: `run: 1` and `epoch: 1.0` are one run, and a
prediction without a run beside one with a run is a second) refuses the file (`check_duplicates`).
The files benchmarks publish are read whole by `read_published` (each benchmark's formats: `submissions.py`).
"""

from __future__ import annotations

import ast
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.benchmark import Benchmark, BenchmarkError, PredictionFieldError
from ..core.safe_load import DocumentTooComplex, load_json
from ..core.task import Answer, Task, answer_from_text
from ..core.trace import Phase, ToolCallStep, Trace
from .submissions import Submission, SubmissionError, published_formats, read_submission

TOOL_FIELDS = ("tools_executed", "tools_used", "tool_calls")


class PredictionError(Exception):
    def __init__(self, path: Path, line: int, field: str, message: str) -> None:
        super().__init__(f"{path}:{line}: field {field!r}: {message}")
        self.line, self.field = line, field


@dataclass
class Prediction:
    """One scored input: the task, the answer, the tools it says it used, and where it came from."""

    task: Task
    answer: Answer
    trace: Trace
    where: str  # "line 3", "entry 12": what a message names
    run: str | None = None  # the run (epoch) of formats that have runs
    model: str | None = None
    published: dict[str, Any] = field(default_factory=dict)  # the publisher's own figures for it


def read_predictions(
    path: Path, benchmark: Benchmark, tasks: dict[str, Task]
) -> Iterator[Prediction | PredictionError]:
    """Each line as a Prediction, or the PredictionError that describes what is wrong with
    it (a line that is not UTF-8 included, with its byte offset). A file without any prediction is
    a BenchmarkError: nothing to score is not a score. A line with `run` (or `epoch`) is that run."""
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
            yield _prediction(line, benchmark, tasks, f"line {number}")
        except PredictionFieldError as bad:
            yield PredictionError(path, number, bad.field, str(bad))
    if not seen:
        raise BenchmarkError(f"{path}: no predictions (the file is empty)")


def _refuse_constant(name: str) -> Any:
    """NaN, Infinity and -Infinity: Python's JSON reader takes them; no JSON writer emits them for an answer."""
    raise PredictionFieldError("<line>", f"{name} is not a JSON value (an answer is a string or a finite number)")


def _prediction(line: str, benchmark: Benchmark, tasks: dict[str, Task], where: str) -> Prediction:
    try:
        record = load_json(line, parse_constant=_refuse_constant)  # NaN scored as a wrong answer
    except json.JSONDecodeError as bad:
        raise PredictionFieldError("<line>", f"not valid JSON ({bad.msg})") from None
    except DocumentTooComplex as bad:
        raise PredictionFieldError("<line>", f"refused: {bad}") from None
    if not isinstance(record, dict):
        raise PredictionFieldError("<line>", "expected a JSON object")
    task_id = str(record.get("task_id", ""))
    if task_id not in tasks:
        raise PredictionFieldError("task_id", f"unknown task id {task_id!r} for {benchmark.name}")
    task = tasks[task_id]
    run = record.get("run", record.get("epoch"))
    answer = benchmark.prediction_answer(task, record)
    return Prediction(task, answer, _trace(task, record), where, run_label(run))


def read_published(
    path: Path, fmt: str, benchmark: Benchmark, tasks: dict[str, Task]
) -> tuple[list[Prediction], Submission, dict[str, int]]:
    """A published file (`submissions.FORMATS`) read whole: its predictions in file order, the
    file itself (the publisher's aggregate figures) and the entries left out because their DAB
    dataset is not among the task files, by dataset. Anything malformed: SubmissionError."""
    expected = published_formats()[fmt][0]
    if expected != benchmark.name:
        raise SubmissionError(f"{path}: the {fmt} format is {expected}'s, not {benchmark.name}'s (--benchmark)")
    submission = read_submission(path, fmt)
    by_instance = {(t.metadata.get("instance_id"), t.question_type.value): t for t in tasks.values()}
    prefixes = {task_id.rpartition("/")[0] for task_id in tasks}
    predictions, absent = [], Counter()
    for entry in submission.entries:
        record = entry.record
        task = tasks.get(record["task_id"]) if "task_id" in record else by_instance.get(
            (record.get("instance_id"), record.get("question_type"))
        )
        if task is None:
            dataset = str(record.get("task_id", "")).rpartition("/")[0]
            if fmt == "dab-leaderboard" and dataset not in prefixes:
                absent[dataset] += 1  # a DAB dataset whose files were not given: reported, not scored
                continue
            known = record.get("task_id") or f"{record.get('instance_id')} ({record.get('question_type')})"
            raise SubmissionError(f"{path}: {entry.where}: unknown task {known!r} for {benchmark.name}")
        try:
            answer, trace = benchmark.prediction_answer(task, record), _trace(task, record)
        except PredictionFieldError as bad:
            raise SubmissionError(f"{path}: {entry.where}: field {bad.field!r}: {bad}") from None
        trace.model = entry.model or trace.model
        predictions.append(Prediction(task, answer, trace, entry.where, entry.run, entry.model, entry.published))
    return predictions, submission, dict(absent)


def check_duplicates(path: Path, predictions: Iterable[Prediction]) -> None:
    """A second prediction for one task (one task and run, where the format has runs): SubmissionError
    naming both. Runs are compared as numbers (`run: 1` and `epoch: 1.0` are one run), and a task given
    both without a run and with one is refused too: the one without is no other run than the others."""
    first: dict[tuple[str, str | None], str] = {}
    runless: dict[str, str] = {}  # task -> where it was given without a run
    with_run: dict[str, str] = {}  # task -> where it was first given with one
    for prediction in predictions:
        task, run = prediction.task.id, run_label(prediction.run)
        key = (task, run)
        if key in first:
            what = f"task {task!r}" + (f" run {run!r}" if run is not None else "")
            raise SubmissionError(f"{path}: {what} is given twice: {first[key]} and {prediction.where}")
        first[key] = prediction.where
        (runless if run is None else with_run).setdefault(task, prediction.where)
        if task in runless and task in with_run:
            raise SubmissionError(
                f"{path}: task {task!r} is given twice: without a run ({runless[task]}) and with one "
                f"({with_run[task]}); give every prediction of a task its run, or none"
            )


def run_label(run: object) -> str | None:
    """A run (or epoch) as one label whatever its JSON type: 1, 1.0, "1" and "1.0" are run "1"."""
    if run is None:
        return None
    text = str(run).strip()
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else text


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
