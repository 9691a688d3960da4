"""The bundled benchmark (tasks/bundled/tasks.jsonl): its tasks with absolute data paths, scored
and read like FDABench's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...core.benchmark import Benchmark, Loading, TaskLoadError
from ...core.task import Answer, DataSource, Task
from ...core.tool import Tool, ToolSettings
from ...tools import default_tools
from ..fdabench import FdaBench, fdabench_prediction, fdabench_tables
from ..records import collect, json_object, read_lines

BUNDLED_ROOT = Path(__file__).resolve().parent
TASKS_FILE = "tasks.jsonl"


class BundledBenchmark(Benchmark):
    """Analyst questions over BIRD regional_sales and a company's documents; shipped, offline."""

    name = "bundled"
    loading = Loading(needs_path=False)  # its files ship with the suite; a path picks another tasks.jsonl
    scoring = FdaBench.scoring
    layout = replace(FdaBench.layout, tables=fdabench_tables())  # its tables, without the paper's table numbers

    def load(self) -> list[Task]:
        return load_bundled(self.path)

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        return default_tools(task, settings)

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        return fdabench_prediction(task, record)


def load_bundled(root: Path | None = None) -> list[Task]:
    """Read the tasks of `root` (a folder holding tasks.jsonl, or the .jsonl file itself; default:
    this package's folder). Relative data locations are resolved against the file's folder.
    Raises TaskLoadError naming the file, line and field of a bad record (TaskLoadErrors for several)."""
    path = Path(root) if root is not None else BUNDLED_ROOT
    if path.is_dir():
        path = path / TASKS_FILE
    if not path.is_file():
        raise TaskLoadError(path, None, None, "task file not found")
    seen: set[str] = set()

    def parse(numbered: tuple[int, str]) -> Task:
        number, line = numbered
        task = parse_line(path, number, line)
        if task.id in seen:
            raise TaskLoadError(path, number, "id", f"duplicate task id {task.id!r}")
        seen.add(task.id)
        return resolve_data(task, path.parent)

    tasks = collect(read_lines(path), parse)
    if not tasks:
        raise TaskLoadError(path, None, None, "no tasks: the file is empty")
    return tasks


def parse_line(path: Path, number: int, line: str) -> Task:
    record = json_object(path, number, line)
    try:
        return Task.model_validate(record)
    except ValidationError as error:
        raise TaskLoadError.from_validation(path, number, error) from error


def resolve_data(task: Task, base: Path) -> Task:
    """Make relative file locations absolute; URLs and absolute paths are kept as they are."""

    def resolved(source: DataSource) -> DataSource:
        location = source.location
        if not location or "://" in location or Path(location).is_absolute():
            return source
        return source.model_copy(update={"location": str((base / location).resolve())})

    return task.model_copy(update={"data": [resolved(source) for source in task.data]})
