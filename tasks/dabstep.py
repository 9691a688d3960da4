"""Load DABstep (Adyen's multi-step reasoning over payments data) as factoid `Task`s.

`load_dabstep(path)`: `path` is a folder holding the context files and a tasks file, or the tasks
JSON Lines file itself with the context files beside it. In a folder the tasks file is the first
of `tasks.jsonl` (a name you choose), `dev.jsonl` (the split published with answers, so a run can
be scored here), `all.jsonl` (the 450 tasks; answers held by the leaderboard); pass the file to
pick another.

Each line: `task_id`, `question`, `guidelines` (answer format, shown to the agent as
Task.guidelines), `level` (easy/hard), `answer` (dev split only → gold.answer, else None).
Every task gets the context folder as `data_dir` (file and Python tools read it) and as a FILES
data source.

Gold out of reach: DABstep publishes dev.jsonl, answers included, in the folder of the context
files. For a run, `DabStep.prepare` stages a view holding only the context files (hard links, or
copies across file systems) and points every task's data folder at it; `close` removes it. The file
tools and the Python sandbox see that view, never the published folder.

payments.csv (~138k rows) is often absent (it is not in our samples). Tasks still load: some
questions are answerable from the other files (e.g. fee rules in fees.json). Every task carries
`metadata["needs_payments"]`, a keyword heuristic, neither complete nor exact: True when the
question mentions payments, transactions, fraud, shoppers or a merchant named in
merchant_data.json, unless it asks about a hypothetical transaction ("a transaction value of 10
EUR"), which only the fee rules answer. `dabstep_missing_files(path)` lists the context files
that are missing (or are Git LFS pointers), for the caller to print.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..core.benchmark import Benchmark, Loading, ReportLayout, ReportTableSpec, ScoringRules, TaskLoadError
from ..core.task import Answer, DataSource, DataSourceKind, Gold, QuestionType, Task
from ..core.tool import Tool, ToolSettings
from ..evaluators.predictions import text_answer
from ..tools import default_tools
from .dabstep_published import DABSTEP_SUBMISSION
from .records import collect, is_lfs_pointer, json_object, read_json, read_lines

BENCHMARK = "dabstep"
LEVELS = ("easy", "hard")  # the dataset's two; anything else is a typo in a task file
TASK_FILES = ("tasks.jsonl", "dev.jsonl", "all.jsonl")
CONTEXT_FILES = (
    "payments.csv",
    "payments-readme.md",
    "fees.json",
    "merchant_data.json",
    "merchant_category_codes.csv",
    "acquirer_countries.csv",
    "manual.md",
)
MERCHANTS_FILE = "merchant_data.json"
ACTIVITY = re.compile(r"\b(payments?|transactions?|fraud\w*|shoppers?)\b", re.IGNORECASE)
HYPOTHETICAL = re.compile(r"\ba transaction value of\b", re.IGNORECASE)


def load_dabstep(path: Path) -> list[Task]:
    """The tasks of a DABstep folder or tasks file (see the module docstring). Raises TaskLoadError
    (TaskLoadErrors when several lines are bad)."""
    tasks_file, context = _locate(Path(path))
    _refuse_unreadable(context)
    merchants = _merchant_names(context / MERCHANTS_FILE)
    seen: set[str] = set()

    def parse(numbered: tuple[int, str]) -> Task:
        number, line = numbered
        task = _parse_line(tasks_file, number, line, context, merchants)
        if task.id in seen:
            raise TaskLoadError(tasks_file, number, "task_id", f"duplicate task id {task.id!r}")
        seen.add(task.id)
        return task

    tasks = collect(read_lines(tasks_file), parse)
    if not tasks:
        raise TaskLoadError(tasks_file, None, None, "no tasks: the file is empty")
    return tasks


def _refuse_unreadable(context: Path) -> None:
    """A context file that is there but cannot be read (its permissions) fails every task that needs it:
    refused at load, naming it. A missing one is a warning (`dabstep_missing_files`): some tasks run without."""
    for name in CONTEXT_FILES:
        file = context / name
        if not file.is_file():
            continue
        try:
            with file.open("rb") as handle:
                handle.read(1)
        except OSError as error:
            raise TaskLoadError(file, None, None, f"context file cannot be read: {error.strerror or error}") from None


def dabstep_missing_files(path: Path) -> list[str]:
    """One warning per context file that is missing or only a Git LFS pointer; [] when all are there."""
    path = Path(path)
    context = path if path.is_dir() else path.parent
    warnings = []
    for name in CONTEXT_FILES:
        file = context / name
        if not file.is_file():
            warnings.append(f"{name} is missing from {context}")
        elif is_lfs_pointer(file):
            warnings.append(f"{name} in {context} is a Git LFS pointer, not the data (run git lfs pull)")
    return warnings


def needs_payments(question: str, merchants: set[str]) -> bool:
    """Whether the question looks like it needs payments.csv (the heuristic of the module docstring)."""
    if HYPOTHETICAL.search(question):
        return False
    return bool(ACTIVITY.search(question)) or any(merchant in question for merchant in merchants)


def _stage_context(folder: Path) -> Path:
    """A fresh folder holding the context files of `folder` and nothing else."""
    view = Path(tempfile.mkdtemp(prefix="dabstep-context-"))
    view.chmod(0o755)  # the sandbox runs as an unprivileged user: it must be able to read the view
    for name in CONTEXT_FILES:
        source = folder / name
        if source.is_file():
            try:
                os.link(source, view / name)
            except OSError:  # another file system, or links not allowed: copy
                shutil.copy2(source, view / name)
    return view


def _in_view(task: Task, view: Path) -> Task:
    data = [s.model_copy(update={"location": str(view)}) if s.kind == DataSourceKind.FILES else s for s in task.data]
    return task.model_copy(update={"data_dir": view, "data": data})


def _locate(path: Path) -> tuple[Path, Path]:
    """(tasks file, context folder)."""
    if path.is_file():
        return path, path.parent
    if not path.is_dir():
        raise TaskLoadError(path, None, None, "no such file or folder")
    for name in TASK_FILES:
        if (path / name).is_file():
            return path / name, path
    raise TaskLoadError(path, None, None, f"no DABstep tasks file (expected one of {', '.join(TASK_FILES)})")


def _merchant_names(file: Path) -> set[str]:
    if not file.is_file() or is_lfs_pointer(file):
        return set()
    merchants = read_json(file)
    if not isinstance(merchants, list):
        raise TaskLoadError(file, None, None, "expected a JSON list of merchants")
    return {m["merchant"] for m in merchants if isinstance(m, dict) and isinstance(m.get("merchant"), str)}


def _parse_line(file: Path, number: int, line: str, context: Path, merchants: set[str]) -> Task:
    record = json_object(file, number, line)
    task_id = _text(file, number, record, "task_id", required=True)
    question = _text(file, number, record, "question", required=True)
    level = (_text(file, number, record, "level") or "").lower() or None
    if level not in (None, *LEVELS):
        raise TaskLoadError(file, number, "level", f"unknown level {level!r}; DABstep's levels: {', '.join(LEVELS)}")
    try:
        return Task(
            id=task_id,
            benchmark=BENCHMARK,
            question=question,
            question_type=QuestionType.FACTOID,
            level=level,
            guidelines=_text(file, number, record, "guidelines"),
            data=[DataSource(name="context", kind=DataSourceKind.FILES, location=str(context.absolute()))],
            data_dir=context.absolute(),
            metadata={"needs_payments": needs_payments(question, merchants)},
            gold=Gold(answer=_text(file, number, record, "answer")),
        )
    except ValidationError as error:
        raise TaskLoadError.from_validation(file, number, error) from error


def _text(file: Path, number: int, record: dict[str, Any], field: str, *, required: bool = False) -> str | None:
    """A string field; task_id and answer may also be numbers (read as their text)."""
    value = record.get(field)
    if value is None:
        if required:
            raise TaskLoadError(file, number, field, "required field is missing")
        return None
    numeric = field in ("task_id", "answer") and isinstance(value, int | float) and not isinstance(value, bool)
    if not isinstance(value, str) and not numeric:
        raise TaskLoadError(file, number, field, f"expected a string, got {type(value).__name__}")
    text = str(value)
    if required and not text.strip():
        raise TaskLoadError(file, number, field, "must not be empty")
    return text


# ---------------------------------------------------------------- the benchmark


class DabStep(Benchmark):
    """DABstep: Adyen's multi-step factoid questions over payments data files (official scorer)."""

    name = BENCHMARK
    loading = Loading(published_formats=(DABSTEP_SUBMISSION,))  # its leaderboard submission (dabstep_published.py)
    scoring = ScoringRules(
        scorers=("dabstep", "tool_success"),
        run_scorers=("tool_success",),  # measures the run's tool calls, not a prediction made elsewhere
        aggregate_rule=(
            "the leaderboard's accuracy is over predictions (every prediction weighs the same), overall and by level"
        ),
    )
    layout = ReportLayout(
        tables=(ReportTableSpec("accuracy_by_level_with_cost", "DABstep accuracy by level, with cost"),)
    )

    def load(self) -> list[Task]:
        return load_dabstep(self.path)

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        return default_tools(task, settings)

    def __init__(self, path: str | Path | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self._views: list[Path] = []

    def prepare(self, tasks: list[Task]) -> list[Task]:
        """Point every task at a view of its context folder that holds the context files only (the
        published folder also holds the task files with their answers)."""
        views: dict[Path, Path] = {}
        staged = []
        for task in tasks:
            if task.data_dir is None:
                staged.append(task)
                continue
            if task.data_dir not in views:
                views[task.data_dir] = _stage_context(task.data_dir)
                self._views.append(views[task.data_dir])
            staged.append(_in_view(task, views[task.data_dir]))
        return staged

    def data_files(self, tasks: Sequence[Task]) -> list[Path]:
        """The context files (what the run's view holds), not the rest of the published folder."""
        folders = {task.data_dir for task in tasks if task.data_dir is not None}
        return sorted(folder / name for folder in folders for name in CONTEXT_FILES if (folder / name).is_file())

    def close(self) -> None:
        for view in self._views:
            shutil.rmtree(view, ignore_errors=True)
        self._views = []

    def warnings(self, tasks: Sequence[Task]) -> list[str]:
        """Missing context files, and which tasks look like they need payments.csv."""
        warnings = dabstep_missing_files(self.path)
        if any(w.startswith("payments.csv") for w in warnings):
            needing = [t.id for t in tasks if t.metadata.get("needs_payments")]
            warnings.append(
                f"tasks that look like they need payments.csv ({len(needing)}): {', '.join(needing) or 'none'}"
            )
        return warnings

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        return text_answer(task, record, "agent_answer")

    def submission_aggregate(self, rows: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> dict[str, Any]:
        """The leaderboard's accuracy by level (easy, hard) and overall, over the predictions given;
        the tasks of the files without a prediction are counted, not scored."""
        level = {task.id: task.level or "unknown" for task in tasks}
        by_level: dict[str, list[float]] = {}
        for row in rows:
            by_level.setdefault(level.get(row["task_id"], "unknown"), []).append(float(row.get("correct") or 0.0))
        metrics: dict[str, Any] = {"accuracy": sum(map(sum, by_level.values())) / max(1, len(rows))}
        metrics |= {f"accuracy {name}": sum(v) / len(v) for name, v in sorted(by_level.items())}
        metrics |= {f"predictions {name}": len(v) for name, v in sorted(by_level.items())}
        metrics["tasks without a prediction"] = len(set(level) - {row["task_id"] for row in rows})
        return metrics
