"""Load DataAgentBench (DAB) datasets as factoid `Task`s with one data source per database.

`load_dab(path)` takes one `query_<dataset>` folder or a folder of them (FORMATS.md layout). Per
dataset: `db_config.yaml` gives the databases, `db_description.txt` (or, with `hints=True`,
`db_description_withhint.txt`) the schema prose, which goes to `metadata["db_description"]`.
Only folders named `query` + digits are queries (published copies also hold e.g. `query2_abandon`).
Task id: `<dataset>/query<N>`, the dataset in the leaderboard's lower case (the final release spells some
folders upper case, `query_PATENTS`); gold: the query's `ground_truth.csv` and, when present, `validate.py`.

The final release (12 datasets, 54 queries) as the official runner presents it: the DATABASE DESCRIPTION
is `db_description.txt`, and with hints that text, a blank line and `db_description_withhint.txt` (a
`HINTS:` list; the pre-release's withhint file repeats the description and is shown alone);
`metadata["official_user_message"]` is the runner's user turn (`QUERY:` … `DATABASE DESCRIPTION:` …).
`metadata["databases"]` declares every database with its type and whether its data is here (and why
not). Datasets with MongoDB say so (`metadata["mongo"]`, the run's warnings, the manifest and the
report): they run on the in-process stand-in, not a MongoDB server.

Data sources get absolute locations: sqlite/duckdb → the database file, postgres → the pg_dump
`.sql` file (restoring it into a server is the tool environment's job), mongo → the mongodump
folder. A database that is missing or a Git LFS pointer makes the dataset's queries
`unavailable` (with the reason) instead of failing the load.

Some SQLite databases are published only as JSON Lines (`ORIGIN_BUILDS`, e.g. bookreview's review
table). `load_dab(..., build_missing=True)` builds such a database at its configured `db_path`
when it is missing, with `build_sqlite_from_jsonl`; without the flag the loader never writes.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import tempfile
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_serializer, model_validator

from ..core.benchmark import (
    Benchmark,
    BenchmarkError,
    Loading,
    ReportLayout,
    ReportTableSpec,
    ScoringRules,
    TaskLoadError,
)
from ..core.safe_load import DocumentTooComplex, load_yaml
from ..core.task import Answer, DataSource, DataSourceKind, Gold, QuestionType, Task
from ..core.tool import Tool, ToolSettings
from ..evaluators.dab import leaderboard_pass_at_k, missing_scaffold, pass_at_k_table
from ..evaluators.predictions import text_answer
from ..tools import SQL_KINDS, check_kinds, offered
from ..tools.dab import dab_tools
from ..tools.postgres import (
    BACKEND_MEMORY_MB,
    READER_CONNECTION_LIMIT,
    PostgresCluster,
    PostgresError,
    PostgresServer,
    password_masked,
    prepare_postgres,
    register_url_secrets,
    url_without_password,
)
from .dab_published import DAB_LEADERBOARD
from .records import collect, is_lfs_pointer, json_object, read_json, read_lines, read_text

if TYPE_CHECKING:
    from ..core.runlog import ResultRecord

BENCHMARK = "dab"
CONFIG_FILE = "db_config.yaml"
DESCRIPTION_FILES = {False: "db_description.txt", True: "db_description_withhint.txt"}
QUERY_FOLDER = re.compile(r"query(\d+)")
LOCATION_KEYS = {  # db_type -> (kind, the db_config key holding its location)
    "postgres": (DataSourceKind.POSTGRES, "sql_file"),
    "sqlite": (DataSourceKind.SQLITE, "db_path"),
    "duckdb": (DataSourceKind.DUCKDB, "db_path"),
    "mongo": (DataSourceKind.MONGO, "dump_folder"),
}
MONGO_STAND_IN = (
    "MongoDB ran on the suite's in-process stand-in (tools/mongo.py over the mongodump), not a MongoDB server "
    "as in DAB's official setup: no MongoDB server is installable here"
)
# (dataset, db_path) -> (JSON Lines file, table) for SQLite databases shipped only as JSON Lines.
ORIGIN_BUILDS = {
    ("bookreview", "query_dataset/review_query.db"): ("origin_dataset/review_query_remapped.json", "review"),
}


def load_dab(path: Path, *, hints: bool = False, build_missing: bool = False) -> list[Task]:
    """The queries of the dataset folder `path` (`query_<dataset>`), or of every `query_*` folder in it.
    `hints` picks db_description_withhint.txt; `build_missing` builds missing SQLite databases that
    `ORIGIN_BUILDS` knows from their JSON Lines. Raises TaskLoadError for malformed files."""
    return [task for folder in dataset_folders(Path(path)) for task in load_dataset(folder, hints, build_missing)]


def dataset_folders(path: Path) -> list[Path]:
    if path.name.startswith("query_") or (path / CONFIG_FILE).exists():
        return [path]
    folders = sorted(p for p in path.glob("query_*") if p.is_dir()) if path.is_dir() else []
    if not folders:
        raise TaskLoadError(path, None, None, "no DAB dataset folder (query_<dataset>) found")
    return folders


def load_dataset(folder: Path, hints: bool, build_missing: bool) -> list[Task]:
    folder = folder.resolve()
    name = folder.name.removeprefix("query_").lower()  # the leaderboard's spelling (upstream: query_PATENTS)
    config = read_config(folder / CONFIG_FILE)
    if build_missing:
        build_missing_databases(folder, name, config)
    sources, unavailable = data_sources(folder, config)
    metadata = {
        "dataset": name,
        "db_description": official_description(folder, hints),
        "db_config": config,
        "databases": declared_databases(folder, config),
    }
    if any(client["db_type"] == "mongo" for client in config["db_clients"].values()):
        metadata["mongo"] = MONGO_STAND_IN
    queries = sorted(query_folders(folder), key=lambda q: int(q.name.removeprefix("query")))
    return collect(queries, lambda query: query_task(query, name, sources, unavailable, metadata))


def official_description(folder: Path, hints: bool) -> str:
    """The DATABASE DESCRIPTION the official runner shows (`run_agent.py`, `--use_hints`): the final
    release's db_description.txt, then a blank line and db_description_withhint.txt, which holds only a
    `HINTS:` list; a pre-release withhint file repeats the whole description, so it is shown alone."""
    plain = folder / DESCRIPTION_FILES[False]
    if not hints:
        if not plain.is_file():
            raise TaskLoadError(plain, None, None, "description file not found")
        return read_text(plain).strip()
    hinted = folder / DESCRIPTION_FILES[True]
    if not hinted.is_file():
        raise TaskLoadError(hinted, None, None, "description file not found")
    hint_text = read_text(hinted).strip()
    if not hint_text.startswith("HINTS:"):
        return hint_text  # pre-release: the description with its hints
    if not plain.is_file():
        raise TaskLoadError(plain, None, None, "description file not found (the hints file holds only hints)")
    return read_text(plain).strip() + "\n\n" + hint_text


def official_user_message(question: str, description: str) -> str:
    """The user turn of `common_scaffold/prompts/prompt_builder.py` (`init_messages`)."""
    return f"QUERY:\n{question.strip()}\n\nDATABASE DESCRIPTION:\n{description.strip()}"


def declared_databases(folder: Path, config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every database of the dataset: its type, whether its data is here and, if not, why."""
    declared = {}
    for name, client in config["db_clients"].items():
        kind, key = LOCATION_KEYS[client["db_type"]]
        problem = location_problem(folder / client[key], kind)
        declared[name] = {"db_type": client["db_type"], "available": problem is None, "reason": problem}
        if client["db_type"] == "mongo":
            declared[name]["engine"] = MONGO_STAND_IN
    return declared


def query_folders(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and QUERY_FOLDER.fullmatch(p.name)]


def read_config(path: Path) -> dict[str, Any]:
    """db_config.yaml, checked: every client has a known db_type and the location key it needs."""
    if not path.is_file():
        raise TaskLoadError(path, None, None, "file not found")
    try:
        config = load_yaml(read_text(path))
    except DocumentTooComplex as error:
        raise TaskLoadError(path, None, None, f"refused: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        raise TaskLoadError(path, mark.line + 1 if mark else None, None, f"invalid YAML: {error}") from error
    clients = config.get("db_clients") if isinstance(config, dict) else None
    if not isinstance(clients, dict) or not clients:
        raise TaskLoadError(path, None, "db_clients", "expected a non-empty mapping of database clients")
    for name, client in clients.items():
        check_client(path, f"db_clients.{name}", client)
    return config


def check_client(path: Path, field: str, client: Any) -> None:
    if not isinstance(client, dict):
        raise TaskLoadError(path, None, field, "expected a mapping")
    db_type = client.get("db_type")
    if not isinstance(db_type, str) or db_type not in LOCATION_KEYS:
        known = ", ".join(LOCATION_KEYS)
        raise TaskLoadError(path, None, f"{field}.db_type", f"unknown db_type {db_type!r} (known: {known})")
    key = LOCATION_KEYS[db_type][1]
    if not isinstance(client.get(key), str) or not client[key]:
        raise TaskLoadError(path, None, f"{field}.{key}", f"a {db_type} database needs {key}")
    check_inside(path, f"{field}.{key}", client[key])


def check_inside(config_file: Path, field: str, location: str) -> None:
    """A database's location must be inside its dataset folder (the config file's), symbolic links
    followed: a dataset names its own files, never /etc/passwd or another dataset's gold."""
    folder = config_file.parent.resolve()
    if not (folder / location).resolve().is_relative_to(folder):
        raise TaskLoadError(config_file, None, field, f"{location!r} is outside the dataset folder {folder}")


def data_sources(folder: Path, config: dict[str, Any]) -> tuple[list[DataSource], str | None]:
    """The dataset's data sources and why they cannot be used (None when all are usable)."""
    sources, problems = [], []
    for name, client in config["db_clients"].items():
        kind, key = LOCATION_KEYS[client["db_type"]]
        location = folder / client[key]
        description = f"database {client['db_name']}" if client.get("db_name") else None
        sources.append(DataSource(name=name, kind=kind, location=str(location), description=description))
        problem = location_problem(location, kind)
        if problem:
            problems.append(f"{name}: {problem}")
    return sources, "; ".join(problems) or None


def location_problem(location: Path, kind: DataSourceKind) -> str | None:
    """Why the database at `location` is not usable here: missing, or (any file of it) a Git LFS pointer."""
    if not location.exists():
        return f"{location} is missing"
    files = sorted(p for p in location.rglob("*") if p.is_file()) if kind == DataSourceKind.MONGO else [location]
    pointers = [p for p in files if is_lfs_pointer(p)]
    if pointers:
        return f"{pointers[0]} is a Git LFS pointer, not the data (run `git lfs pull`)"
    return None


def query_task(
    query: Path, dataset: str, sources: list[DataSource], unavailable: str | None, metadata: dict[str, Any]
) -> Task:
    ground_truth, validator = query / "ground_truth.csv", query / "validate.py"
    if not ground_truth.is_file() and not validator.is_file():
        raise TaskLoadError(query, None, "ground_truth.csv", "query has neither ground_truth.csv nor validate.py")
    question = read_question(query / "query.json")
    return Task(
        id=f"{dataset}/{query.name}",
        benchmark=BENCHMARK,
        question=question,
        question_type=QuestionType.FACTOID,
        data=sources,
        unavailable=unavailable,
        context=metadata["db_description"],
        metadata={**metadata, "official_user_message": official_user_message(question, metadata["db_description"])},
        gold=Gold(
            ground_truth_file=str(ground_truth) if ground_truth.is_file() else None,
            validator=str(validator) if validator.is_file() else None,
        ),
    )


def read_question(path: Path) -> str:
    """query.json holds one JSON string: the question."""
    question = read_json(path)
    if not isinstance(question, str) or not question.strip():
        raise TaskLoadError(path, None, None, f"expected a non-empty JSON string, got {type(question).__name__}")
    return question


def build_missing_databases(folder: Path, dataset: str, config: dict[str, Any]) -> None:
    for client in config["db_clients"].values():
        origin = ORIGIN_BUILDS.get((dataset, client.get("db_path")))
        if origin and client["db_type"] == "sqlite" and not (folder / client["db_path"]).exists():
            json_lines, table = origin
            if (folder / json_lines).is_file():  # otherwise the query stays unavailable: db missing
                build_sqlite_from_jsonl(folder / json_lines, folder / client["db_path"], table)


def build_sqlite_from_jsonl(json_lines: Path, out: Path, table: str) -> None:
    """Write SQLite database `out` with one table: a column per JSON field (in first-seen order),
    typed INTEGER (ints, booleans as 0/1), REAL (any float) or TEXT (strings, e.g. bookreview's
    `review_time`, stay text; lists/objects are stored as JSON text). Written to a temporary
    file and renamed, so an interrupted build never leaves a half database behind."""
    records = read_json_lines(json_lines)
    columns = list(dict.fromkeys(key for record in records for key in record))
    types = [column_type([record.get(column) for record in records]) for column in columns]
    definitions = ", ".join(f"{quote(c)} {t}" for c, t in zip(columns, types, strict=True))
    insert = f"INSERT INTO {quote(table)} VALUES ({', '.join('?' * len(columns))})"
    rows = [tuple(sql_value(record.get(column)) for column in columns) for record in records]
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    os.close(handle)
    try:
        with closing(sqlite3.connect(temporary)) as con, con:
            con.execute(f"CREATE TABLE {quote(table)} ({definitions})")
            con.executemany(insert, rows)
        os.replace(temporary, out)
    finally:
        Path(temporary).unlink(missing_ok=True)


def read_json_lines(path: Path) -> list[dict[str, Any]]:
    records = []
    for number, line in read_lines(path):
        records.append(json_object(path, number, line))
    if not records:
        raise TaskLoadError(path, None, None, "no records")
    return records


def column_type(values: list[Any]) -> str:
    kinds = {sql_type(value) for value in values if value is not None}
    if not kinds or "TEXT" in kinds:
        return "TEXT"
    return "REAL" if "REAL" in kinds else "INTEGER"


def sql_type(value: Any) -> str:
    if isinstance(value, float):
        return "REAL"
    return "INTEGER" if isinstance(value, int) else "TEXT"  # bool is an int: stored as 0/1


def sql_value(value: Any) -> Any:
    return json.dumps(value, ensure_ascii=False) if isinstance(value, list | dict) else value


def quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


# ---------------------------------------------------------------- the benchmark

DAB_KINDS = {*SQL_KINDS, DataSourceKind.MONGO}


class DabSettings(BaseModel):
    """DAB's run settings: `dab: {...}` in a config file, or the flags and old top-level keys in
    `DataAgentBench.settings_aliases`. The manifest records them with passwords masked."""

    model_config = ConfigDict(extra="forbid")

    hints: bool = False  # db_description_withhint.txt with the description (`--hints`)
    validator_cpu_s: float = Field(default=600.0, gt=0)  # CPU seconds one query's validate.py may use
    postgres_url: str | None = None  # a server for the PostgreSQL dumps; None: a throw-away local cluster
    postgres_reader_url: str | None = None  # with postgres_url: an existing read-only role for agent queries
    postgres_connection_limit: int = Field(default=READER_CONNECTION_LIMIT, ge=1, strict=True)  # reader sessions
    # Address space of each server process of the throw-away cluster: what one agent query can take.
    postgres_backend_memory_mb: int = Field(default=BACKEND_MEMORY_MB, ge=256, strict=True)

    @model_validator(mode="after")
    def _reader_needs_a_server(self) -> DabSettings:
        if self.postgres_reader_url and not self.postgres_url:
            raise ValueError(
                "--postgres-reader-url (postgres_reader_url) names a role on the server of --postgres-url, "
                "and there is none: give --postgres-url too, or drop --postgres-reader-url"
            )
        register_url_secrets(self.postgres_url)
        register_url_secrets(self.postgres_reader_url)
        return self

    @field_serializer("postgres_url", "postgres_reader_url")
    def _without_password(self, url: str | None) -> str | None:
        return None if url is None else url_without_password(url)


DAB_TABLES = (
    ReportTableSpec("pass_at_k", "DAB pass@k per dataset and stratified average"),
    ReportTableSpec("per_trajectory", "DAB: per trajectory (mean [95% CI])"),
    ReportTableSpec(
        "trajectory_statistics",
        "Trajectory statistics (DAB paper, Tables 5 and 6)",
        note="The paper's figures are over all 54 queries.",
    ),
)


class DataAgentBench(Benchmark):
    """DataAgentBench: questions across SQL and Mongo databases, checked by each query's validate.py."""

    name = BENCHMARK
    # The official harness: 100 iterations, tool results over 10,000 characters truncated in the
    # context, 1 hour per trial.
    loading = Loading(
        published_formats=(DAB_LEADERBOARD,),  # its leaderboard submission (dab_published.py)
        harness={
            "budgets": {"max_steps": 100, "tool_result_max_chars": 10_000, "wall_time_s": 3600, "max_tokens": 2_000_000}
        },
    )
    scoring = ScoringRules(
        scorers=("dab", "tool_success"),
        run_scorers=("tool_success",),  # measures the run's tool calls, not a prediction made elsewhere
        published_digits=4,  # the leaderboard prints 4 places (`submission_aggregate` rounds as it does)
        aggregate_rule=(
            "the leaderboard's pass@1 averages each query's runs (c/n), then each dataset's queries (rounded to 4 "
            "places), then the datasets equally"
        ),
    )
    layout = ReportLayout(tables=DAB_TABLES)
    settings_model: ClassVar[type[BaseModel]] = DabSettings
    # The settings' flags and old top-level config keys (configs/defaults.yaml before `dab:`), by field.
    settings_aliases: ClassVar[dict[str, str]] = {
        "hints": "hints",
        "dab_validator_cpu_s": "validator_cpu_s",
        "postgres_url": "postgres_url",
        "postgres_reader_url": "postgres_reader_url",
    }

    def __init__(self, path: str | Path | None = None, **options: Any) -> None:
        super().__init__(path, **options)
        self._cluster: PostgresCluster | PostgresServer | None = None  # stopped by close()

    def load(self) -> list[Task]:
        # build_missing: e.g. bookreview's review table, published as JSON Lines.
        tasks = load_dab(self.path, hints=bool(self.options.get("hints")), build_missing=True)
        missing = missing_scaffold(Path(t.gold.validator) for t in tasks if t.gold and t.gold.validator)
        if missing:  # one message up front, not one crashed validator per answer
            raise BenchmarkError(missing)
        cpu_s = self.options.get("validator_cpu_s")  # the `dab` scorer's CPU budget per validate.py
        if not cpu_s:
            return tasks
        return [t.model_copy(update={"metadata": {**t.metadata, "validator_cpu_s": cpu_s}}) for t in tasks]

    def warnings(self, tasks: Sequence[Task]) -> list[str]:
        """Datasets with MongoDB databases: they run on the stand-in, not the official setup."""
        mongo = sorted({str(t.metadata["dataset"]) for t in tasks if t.metadata.get("mongo")})
        return [f"DAB datasets {', '.join(mongo)}: {MONGO_STAND_IN}"] if mongo else []

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        check_kinds(task, DAB_KINDS)
        return offered(task, dab_tools(task, settings))

    def prepare(self, tasks: list[Task]) -> list[Task]:
        """Restore the PostgreSQL dumps into `postgres_url` or a throw-away local cluster (stopped by
        `close`). A dump that does not restore is a malformed input file: BenchmarkError."""
        if not any(s.kind == DataSourceKind.POSTGRES for t in tasks for s in t.data):
            return tasks
        for setting in ("postgres_url", "postgres_reader_url"):
            if password_masked(self.options.get(setting)):
                flag = "--" + setting.replace("_", "-")
                raise BenchmarkError(
                    f"the run's {flag} had a password, which the manifest does not keep: give {flag} again"
                )
        try:
            prepared, self._cluster = prepare_postgres(
                tasks,
                url=self.options.get("postgres_url"),
                reader_url=self.options.get("postgres_reader_url"),
                connection_limit=self.options.get("postgres_connection_limit") or READER_CONNECTION_LIMIT,
                backend_memory_mb=self.options.get("postgres_backend_memory_mb") or BACKEND_MEMORY_MB,
            )
        except PostgresError as unavailable:
            raise BenchmarkError(str(unavailable)) from unavailable
        pairs = zip(tasks, prepared, strict=True)
        broken = sorted(
            {str(after.unavailable) for before, after in pairs if after.unavailable and not before.unavailable}
        )
        if broken:
            self.close()
            raise BenchmarkError("a database dump could not be restored:\n" + "\n".join(broken))
        return prepared

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None

    def prediction_answer(self, task: Task, record: dict[str, Any]) -> Answer:
        return text_answer(task, record, "answer")

    def submission_aggregate(self, rows: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> dict[str, Any]:
        """The leaderboard's pass@1 / pass@k (`leaderboard_pass_at_k`): a row without `correct` 1.0 failed."""
        outcomes: dict[str, list[bool]] = {}
        for row in rows:
            outcomes.setdefault(row["task_id"], []).append(row.get("correct") == 1.0)
        board = leaderboard_pass_at_k(outcomes, [task.id for task in tasks])
        named = len(board.datasets) + len(board.datasets_without_runs)
        metrics: dict[str, Any] = {f"pass@{k}": published_figure(board.datasets, k) for k in board.ks}
        metrics |= {f"pass@{k} unrounded": board.overall[k] for k in board.ks}
        metrics["datasets averaged"] = f"{len(board.datasets)} (of {max(named, len(board.datasets))} in the task files)"
        metrics |= {f"pass@{k} {name}": by_k[k] for name, by_k in board.datasets.items() for k in board.ks}
        metrics["queries with runs"] = len(board.queries)
        metrics["queries without runs (left out, as the official logic does)"] = (
            ", ".join(board.queries_without_runs) or "none"
        )
        return metrics

    @classmethod
    def report_lines(cls, records: Sequence[ResultRecord]) -> list[str]:
        """pass@k (unbiased estimator over epochs), per dataset then stratified, per system/model."""
        groups: dict[str, list[dict[str, Any]]] = {}
        for record in records:
            groups.setdefault(f"{record.system}/{record.model}", []).append(record.model_dump())
        lines = []
        for name, rows in sorted(groups.items()):
            table = pass_at_k_table(rows)
            overall = ", ".join(f"pass@{k} {_with_interval(table.overall_ci(k))}" for k in table.overall)
            lines.append(f"- {name}: {overall or 'no scored trials'} (datasets averaged equally; 95% CI)")
            for dataset, by_k in sorted(table.datasets.items()):
                lines.append(f"  - {dataset}: " + ", ".join(f"pass@{k} {v:.3f}" for k, v in by_k.items()))
        mongo = sorted({r.task_id.rpartition("/")[0] for r in records if any("(mongo)" in s for s in r.data_sources)})
        if lines and mongo:
            lines += ["", f"Datasets {', '.join(mongo)}: {MONGO_STAND_IN}; their figures are not the official setup's."]
        return ["## DAB pass@k", "", *lines] if lines else []


def published_figure(datasets: dict[str, dict[int, float]], k: int) -> float:
    """The leaderboard's pass@k as it prints it: each dataset's value rounded to 4 places, their mean rounded
    to 4 places (DAB's site; e.g. 0.8617 where the unrounded mean 0.861645 would round to 0.8616)."""
    rounded = [round(by_k[k], 4) for by_k in datasets.values()]
    return round(sum(rounded) / len(rounded), 4) if rounded else 0.0


def _with_interval(ci: tuple[float, float, float]) -> str:
    mean, low, high = ci
    return f"{mean:.3f}" if low != low else f"{mean:.3f} [{low:.3f}, {high:.3f}]"  # NaN: no interval
