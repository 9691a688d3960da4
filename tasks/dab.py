"""Load DataAgentBench (DAB) datasets as factoid `Task`s with one data source per database.

`load_dab(path)` takes one `query_<dataset>` folder or a folder of them (FORMATS.md layout). Per
dataset: `db_config.yaml` gives the databases, `db_description.txt` (or, with `hints=True`,
`db_description_withhint.txt`) the schema prose, which goes to `metadata["db_description"]`.
Only folders named `query` + digits are queries (published copies also hold e.g. `query2_abandon`).
Task id: `<dataset>/query<N>`; gold: the query's `ground_truth.csv` and, when present, `validate.py`.

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
from contextlib import closing
from pathlib import Path
from typing import Any

import yaml

from compare.task import DataSource, DataSourceKind, Gold, QuestionType, Task
from tasks.errors import TaskLoadError, collect, is_lfs_pointer, json_object, read_json

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
    name = folder.name.removeprefix("query_")
    config = read_config(folder / CONFIG_FILE)
    if build_missing:
        build_missing_databases(folder, name, config)
    sources, unavailable = data_sources(folder, config)
    description_file = folder / DESCRIPTION_FILES[hints]
    if not description_file.is_file():
        raise TaskLoadError(description_file, None, None, "description file not found")
    metadata = {"dataset": name, "db_description": description_file.read_text(encoding="utf-8"), "db_config": config}
    queries = sorted(query_folders(folder), key=lambda q: int(q.name.removeprefix("query")))
    return collect(queries, lambda query: query_task(query, name, sources, unavailable, metadata))


def query_folders(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir() and QUERY_FOLDER.fullmatch(p.name)]


def read_config(path: Path) -> dict[str, Any]:
    """db_config.yaml, checked: every client has a known db_type and the location key it needs."""
    if not path.is_file():
        raise TaskLoadError(path, None, None, "file not found")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
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
    return Task(
        id=f"{dataset}/{query.name}",
        benchmark=BENCHMARK,
        question=read_question(query / "query.json"),
        question_type=QuestionType.FACTOID,
        data=sources,
        unavailable=unavailable,
        context=metadata["db_description"],
        metadata=metadata,
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
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
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
