"""A benchmark: its tasks, each task's tools, its data, how its answers are scored and read.

One `Benchmark` subclass per benchmark (`tasks/`), found by name (`BENCHMARKS`). Nothing
outside a benchmark's own module asks which benchmark it is: the runner, `compare score`,
`compare tasks` and the reports only call these methods and read these settings.

    load()                       the tasks, validated (TaskLoadError names file, line, field)
    tools(task, settings)        the task's tools over its real data
    prepare(tasks) / close()     data set up for a run and torn down (e.g. PostgreSQL restores)
    warnings(tasks)              what is missing from the data, printed before a run
    data_files(tasks)            the files agents and scorers read (fingerprinted: runs cannot drift)
    prediction_answer(task, r)   one record of a prediction file made elsewhere, as an Answer
    aggregate(scored)            benchmark-wide metrics `compare score` prints
    submission_aggregate(rows, tasks)  the leaderboard's own aggregate of scored rows (runs included)
    report_lines(records)        extra Markdown for the run summary (e.g. DAB's pass@k)

Its settings, one small typed object per concern, so reports name no benchmark and a plug-in benchmark
gets the same treatment as a built-in one:

    loading: Loading             where its tasks come from and how its official harness runs them
        needs_path                   its task files come from --tasks-path
        published_formats            the files it publishes (`published.py`), read by `compare import`
        harness                      run settings of its official harness (budgets, ...)
    scoring: ScoringRules        how its answers are scored and aggregated
        scorers                      names of the scorers that apply (`core/scorer.py` `SCORERS`)
        run_scorers                  scorers that measure the run itself (tool success), not an answer:
                                     not applied to predictions made elsewhere
        rules                        earlier revisions of the official rule, by name (`compare score --rule`)
        aggregate_rule               how its leaderboard aggregates (said beside `compare score`'s means)
        published_digits             the places its leaderboard prints its aggregate at
    layout: ReportLayout         what the reports show of it
        primary_metric               its headline metric (`ReportMetric`): the cross-benchmark overview's figure,
                                     a column of summary.md when it is not the accuracy
        summary_metrics              more per-row means for summary.md (after the accuracy)
        tables                       the comparison report's tables for it (`ReportTableSpec`, by kind)

The settings' former names as class variables (`scorers`, `report_tables`, ...) still read, mirrored from the
groups; a subclass that still sets them is read into the groups with a DeprecationWarning.
"""

from __future__ import annotations

import warnings as _warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from .published import PublishedFormat
from .registry import Registry, summary_line
from .task import Answer, Task
from .tool import Tool, ToolSettings

if TYPE_CHECKING:
    from .runlog import ResultRecord


class BenchmarkError(Exception):
    """The benchmark's files or data cannot be used; nothing ran. The CLI exits with status 2."""


class TaskLoadError(BenchmarkError, ValueError):
    """A task file, or one record of it, cannot be loaded."""

    def __init__(self, file: str | Path, line: int | None, field: str | None, message: str) -> None:
        self.file = str(file)
        self.line = line
        self.field = field
        self.message = message
        where = self.file if line is None else f"{self.file}:{line}"
        what = f" field {field!r}:" if field else ""
        super().__init__(f"{where}:{what} {message}")

    @classmethod
    def from_validation(cls, file: str | Path, line: int | None, error: Any) -> TaskLoadError:
        """The first error of a pydantic ValidationError, located by its dotted field path
        (e.g. gold.dag.nodes.0.id)."""
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "<record>"
        extra = f" (and {error.error_count() - 1} more errors)" if error.error_count() > 1 else ""
        return cls(file, line, field, first["msg"] + extra)


class TaskLoadErrors(TaskLoadError):
    """Several bad records of one load, in file order. A TaskLoadError itself, so callers that
    catch one still catch it; `file` is the first problem's file, `line` and `field` are None."""

    def __init__(self, errors: list[TaskLoadError]) -> None:
        self.errors = errors
        self.file = errors[0].file
        self.line = None
        self.field = None
        self.message = f"{len(errors)} problems:\n" + "\n".join(str(error) for error in errors)
        ValueError.__init__(self, self.message)  # not TaskLoadError's "file:line: field" prefix

    def __str__(self) -> str:
        return self.message


class PredictionFieldError(ValueError):
    """A field of one prediction record is missing or unreadable (the reader adds file and line)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ReportMetric:
    """A per-record score the reports show: its title, and the score names it reads (the first a record has;
    a name ending in "." is a family: one column per score of that prefix)."""

    title: str
    scores: tuple[str, ...]
    question_type: str | None = None  # only the records of this question type
    digits: int = 3


ACCURACY = ReportMetric("accuracy", ("exact_match", "correct"))  # the scorers' names for a 0/1 verdict


@dataclass(frozen=True)
class ReportTableSpec:
    """A table of the comparison report a benchmark asks for: `kind` names how the reports build it
    (`reports.tables.TABLE_KINDS`: metrics, by_difficulty, model_by_workflow, workflow_by_difficulty,
    pass_at_k, per_trajectory, trajectory_statistics, accuracy_by_level_with_cost, by_argument_count);
    `metrics` are the scores it shows, where the kind takes any."""

    kind: str
    title: str
    metrics: tuple[ReportMetric, ...] = ()
    note: str = ""


# What a benchmark that declares nothing gets: the tables every benchmark with levels and workflows supports
GENERIC_TABLES = (
    ReportTableSpec("by_difficulty", "By difficulty"),
    ReportTableSpec("model_by_workflow", "Accuracy per model × workflow"),
    ReportTableSpec("workflow_by_difficulty", "Accuracy per workflow × difficulty"),
)


@dataclass(frozen=True)
class Loading:
    """Where a benchmark's tasks come from and how its official harness runs them."""

    needs_path: bool = True  # its task files come from --tasks-path
    published_formats: tuple[PublishedFormat, ...] = ()  # the files it publishes (`published.py`)
    harness: Mapping[str, Any] = field(default_factory=dict)  # run settings, e.g. {"budgets": {"max_steps": 100}}


@dataclass(frozen=True)
class ScoringRules:
    """How a benchmark's answers are scored, and how its leaderboard aggregates them."""

    scorers: tuple[str, ...] = ()
    run_scorers: tuple[str, ...] = ()  # measure the run (tool success): not applied to predictions made elsewhere
    rules: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # earlier official rules: their scorers
    aggregate_rule: str = ""  # how its leaderboard aggregates, said beside `compare score`'s means
    published_digits: int = 3  # the places its leaderboard prints its aggregate at


@dataclass(frozen=True)
class ReportLayout:
    """What the reports show of a benchmark."""

    primary_metric: ReportMetric = ACCURACY
    summary_metrics: tuple[ReportMetric, ...] = ()
    tables: tuple[ReportTableSpec, ...] = GENERIC_TABLES


# The settings' former names, each a field of one group: read from the groups, set by old subclasses.
_FORMER_NAMES: dict[str, tuple[str, str]] = {
    **{name.name: ("loading", name.name) for name in fields(Loading)},
    **{name.name: ("scoring", name.name) for name in fields(ScoringRules)},
    **{name.name: ("layout", name.name) for name in fields(ReportLayout) if name.name != "tables"},
    "report_tables": ("layout", "tables"),
}


class Benchmark(ABC):
    """Subclass, set `name` (and `scoring = ScoringRules(scorers=...)`), implement `load` and `tools`;
    register it with `@register_benchmark` or an entry point in `data_agent_compare.benchmarks`."""

    name: ClassVar[str]
    description: ClassVar[str] = ""  # one line for `compare benchmarks`; the docstring's first line if empty
    loading: ClassVar[Loading] = Loading()
    scoring: ClassVar[ScoringRules] = ScoringRules()
    layout: ClassVar[ReportLayout] = ReportLayout()

    # The former names, mirrored from the groups (read-only in effect: set the groups).
    needs_path: ClassVar[bool]
    published_formats: ClassVar[tuple[PublishedFormat, ...]]
    harness: ClassVar[Mapping[str, Any]]
    scorers: ClassVar[tuple[str, ...]]
    run_scorers: ClassVar[tuple[str, ...]]
    rules: ClassVar[Mapping[str, tuple[str, ...]]]
    aggregate_rule: ClassVar[str]
    published_digits: ClassVar[int]
    primary_metric: ClassVar[ReportMetric]
    summary_metrics: ClassVar[tuple[ReportMetric, ...]]
    report_tables: ClassVar[tuple[ReportTableSpec, ...]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _read_former_names(cls)
        _mirror_former_names(cls)

    def __init__(self, path: str | Path | None = None, **options: Any) -> None:
        """`path`: the benchmark's files; `options`: run settings a benchmark may use (`hints`,
        `postgres_url`); others are ignored."""
        if self.loading.needs_path and path is None:
            raise BenchmarkError(f"the {self.name} benchmark needs its task files: give --tasks-path")
        self.path = Path(path) if path is not None else None
        self.options = options

    @abstractmethod
    def load(self) -> list[Task]:
        """Every task, validated; raise TaskLoadError (TaskLoadErrors for several bad records)."""

    @abstractmethod
    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        """The task's tools over its data; raise `DataUnavailable` for data that is not here or that this
        benchmark cannot serve (the task is then `data_unavailable`). Any other exception is an `error`."""

    def warnings(self, tasks: Sequence[Task]) -> list[str]:
        return []

    def data_files(self, tasks: Sequence[Task]) -> list[Path]:
        """Every file an agent or scorer of these tasks may read (folders walked): the data sources'
        files, each task's data folder, DAB's validator and ground truth. The manifest records a
        fingerprint of each, so `--resume` and `--replay` refuse data edited since the run started.
        Override when the benchmark reads other files, or only some of a folder."""
        files: set[Path] = set()
        for task in tasks:
            locations = [s.location for s in task.data if s.location and "://" not in s.location]
            base = task.data_dir
            paths = [base / p if base is not None and not Path(p).is_absolute() else Path(p) for p in locations]
            if task.gold is not None:
                paths += [Path(p) for p in (task.gold.validator, task.gold.ground_truth_file) if p]
            files.update(walk_files([*paths, *([base] if base is not None else [])]))
        return sorted(files)

    def prepare(self, tasks: list[Task]) -> list[Task]:
        """Set up the data of a run (the tasks may come back rewritten); raise BenchmarkError."""
        return tasks

    def close(self) -> None:  # noqa: B027 - optional hook
        """Tear down what `prepare` set up."""

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        """One record of a prediction file as an Answer; raise PredictionFieldError."""
        raise BenchmarkError(f"the {self.name} benchmark reads no prediction files")

    def aggregate(self, scored: Sequence[tuple[Task, Answer]]) -> dict[str, Any]:
        """Benchmark-wide metrics of scored predictions (`compare score` prints them)."""
        return {}

    @classmethod
    def report_lines(cls, records: Sequence[ResultRecord]) -> list[str]:
        """Markdown lines for the run summary, after the shared tables (needs no data: a run log
        re-renders anywhere)."""
        return []

    def submission_aggregate(self, rows: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> dict[str, Any]:
        """The leaderboard's aggregate of scored prediction rows (`task_id`, `run`, `model` and the scores)
        over these tasks, headline first (`compare score` prints and writes it); {} when none."""
        return {}

    @classmethod
    def summary(cls) -> str:
        return summary_line(cls)


def _read_former_names(cls: type) -> None:
    """A subclass written before the groups sets their fields under the former names: read into its groups."""
    former = {name: cls.__dict__[name] for name in _FORMER_NAMES if name in cls.__dict__}
    if not former:
        return
    _warnings.warn(
        f"benchmark class {cls.__qualname__} sets {', '.join(sorted(former))}: declare them in its settings "
        "groups instead (loading = Loading(...), scoring = ScoringRules(...), layout = ReportLayout(...); "
        "docs/extending.md)",
        DeprecationWarning,
        stacklevel=4,  # the class statement (under __init_subclass__ and ABCMeta.__new__)
    )
    for group in ("loading", "scoring", "layout"):
        changes = {
            key: former[name] for name, (owner, key) in _FORMER_NAMES.items() if owner == group and name in former
        }
        if changes:
            setattr(cls, group, replace(getattr(cls, group), **changes))


def _mirror_former_names(cls: type) -> None:
    """The former names as class variables, read from the groups (readers not yet moved to the groups)."""
    for name, (group, key) in _FORMER_NAMES.items():
        setattr(cls, name, getattr(getattr(cls, group), key))


def walk_files(paths: Sequence[Path]) -> list[Path]:
    """The files among `paths`, a folder's files recursively (hidden ones skipped), absolute; a path that
    does not exist is left out (the loaders say what is missing)."""
    files = []
    for path in paths:
        path = path.absolute()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += [p for p in path.rglob("*") if p.is_file() and not _hidden(p.relative_to(path))]
    return files


def _hidden(relative: Path) -> bool:
    return any(part.startswith(".") for part in relative.parts)


_mirror_former_names(Benchmark)

BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmarks")


def register_benchmark(cls: type[Benchmark]) -> type[Benchmark]:
    """Class decorator: make `cls` available as `--benchmark <cls.name>`."""
    BENCHMARKS.register(cls.name, cls)
    return cls


def create_benchmark(name: str, path: str | Path | None = None, **options: Any) -> Benchmark:
    return BENCHMARKS.load(name)(path, **options)


def benchmark_class(name: str) -> type[Benchmark]:
    """The registered benchmark `name`, for what it declares; a name no longer registered (a plug-in not
    installed where a run is re-rendered) gets the declarations of `Benchmark` itself."""
    try:
        return BENCHMARKS.load(name)
    except Exception:  # not registered, or its plug-in fails to import: the report still renders
        return Benchmark
