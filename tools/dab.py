"""The DAB tool profile: the four tools of the official DataAgentBench harness.

- `list_db(db_name)`: the tables (with columns and types) or collections (with the fields
  seen in their first documents) of one logical database, with row counts.
- `query_db(db_name, query)`: one read-only query. SQL goes to the backends of
  tools/sql/ (their read-only guards and timeouts); a Mongo query is the JSON find or
  aggregate of tools/mongo.py (mongomock stands in for MongoDB). The result, up to
  RESULT_MAX_ROWS rows as a list of row objects, is kept as variable `result_<n>`; the
  agent reads its name and the rows as JSON, cut to the context budget
  (`tool_result_max_chars`; the official harness cuts at 10,000 characters).
- `execute_python(code)`: the sandbox of tools/python_sandbox.py, with every earlier
  query result defined as its variable (written as `variables.json`, beside the code in
  `code.py`, into the sandbox's working folder before the program starts).
- `return_answer(answer)`: ends the task with this answer (`FinalToolCall`). It also answers to
  `answer`, the name our workflows finish with (and their writers ask for by name), so every
  workflow finishes on DAB without knowing the profile.

Deliberate differences from the official harness: only query_db results become variables
(it also keeps list_db and execute_python results), named `result_<n>` (it uses the call
id); a Mongo find has no default limit (it uses 5) and aggregation pipelines are allowed
too; execute_python runs under ToolSettings' limits (it allows 600 s in Docker).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from bson.decimal128 import Decimal128
from pydantic import Field
from pydantic.fields import FieldInfo

from ..core.task import DataSource, DataSourceKind, Task, ToolCall, answer_from_tool
from ..core.tool import DataUnavailable, FinalToolCall, Tool, ToolError, ToolResult, ToolSettings, to_json
from .files import source_path
from .mongo import ENGINE, MongoQueryError, MongoWorker
from .parameters import Parameters, one_of_field, parameters_schema, with_fields
from .python_sandbox import PythonTool
from .sql import BACKENDS, Database, Databases, jsonable, quote_identifier

DAB_TOOL_NAMES = ["list_db", "query_db", "execute_python", "return_answer"]
RESULT_MAX_ROWS = 100_000  # rows kept per query_db result; the context sees far fewer anyway
# What a result holds as JSON, column names included in every row (as the agent's variables.json and the
# tool's reply carry it), counted row by row as the result is built: the database's own cap counts values
# only, and two 100k-row results with 300-character column aliases took the runner to 2.69 GB.
RESULT_MAX_CHARS = 32 << 20
STORE_MAX_CHARS = 64 << 20  # all of a task's stored results together (execute_python receives them all)
CONTENT_MAX_CHARS = 1 << 20  # the reply's JSON text; the context budget cuts it far shorter anyway

# main.py of an execute_python run: the agent's code (code.py) runs with the stored results
# (variables.json) as globals, both files in the working folder; a traceback starts at the
# agent's code ("<code>", its lines quoted), not at this loader.
CODE_FILE, VARIABLES_FILE = "code.py", "variables.json"
LOADER = f"""import json, linecache, sys, traceback
with open("{CODE_FILE}", encoding="utf-8") as _file:
    _code = _file.read()
with open("{VARIABLES_FILE}", encoding="utf-8") as _file:
    _variables = json.load(_file)
linecache.cache["<code>"] = (len(_code), None, _code.splitlines(keepends=True), "<code>")
try:
    exec(compile(_code, "<code>", "exec"), {{"__name__": "__main__", **_variables}})
except SystemExit:
    raise
except BaseException as error:
    traceback.print_exception(type(error), error, error.__traceback__.tb_next)
    sys.exit(1)
"""


def plain(value: Any) -> Any:
    """A database value as JSON carries it: documents and arrays recursively, scalars as in SQL results."""
    if isinstance(value, dict):
        return {str(key): plain(inner) for key, inner in value.items()}
    if isinstance(value, list | tuple):
        return [plain(inner) for inner in value]
    if isinstance(value, Decimal128):
        return jsonable(value.to_decimal())
    return jsonable(value)


def unique_keys(columns: list[str]) -> list[str]:
    """Column names as row-object keys; a repeated name (`a.id, b.id`) gets `_2`, `_3`... so no value is lost."""
    keys: list[str] = []
    for column in columns:
        key, number = column, 1
        while key in keys:
            number += 1
            key = f"{column}_{number}"
        keys.append(key)
    return keys


class DabDatabases:
    """The task's logical databases by name: SQL ones in a shared `Databases`, Mongo ones loaded from dumps."""

    def __init__(self, task: Task, sql: Databases, mongo: dict[str, MongoWorker]) -> None:
        self.sql = sql
        self.mongo = mongo
        self.names = [s.name for s in task.data if s.name in sql.by_name or s.name in mongo]

    def db_name_field(self) -> tuple[Any, FieldInfo]:
        """The `db_name` argument of list_db and query_db (parameters.py `with_fields`)."""
        return one_of_field(self.names, "Logical database name.", required=True)

    def describe(self, name: str) -> tuple[str, dict[str, Any]]:
        if name in self.mongo:
            return _describe_mongo(self.mongo[name])
        return _describe_sql(self.sql.get(name))

    def query(self, name: str, query: str) -> tuple[list[dict[str, Any]], bool]:
        """The result rows as objects, and whether rows beyond RESULT_MAX_ROWS exist."""
        if name in self.mongo:
            try:
                result = self.mongo[name].query(query, RESULT_MAX_ROWS)
            except MongoQueryError as error:
                raise ToolError(str(error)) from error
            return bounded_rows(plain(document) for document in result.documents), result.more
        result = self.sql.get(name).query(query, RESULT_MAX_ROWS)
        if not result.columns:
            raise ToolError("the statement returned no result set; send one SELECT query")
        keys = unique_keys(result.columns)
        return bounded_rows(dict(zip(keys, plain(row), strict=True)) for row in result.rows), result.more

    def close(self) -> None:  # idempotent: list_db and query_db share it, and each closes it
        self.sql.close()
        for database in self.mongo.values():
            database.close()
        self.mongo = {}


def json_size(row: dict[str, Any]) -> int:
    """Characters of the row in the result's JSON (its separator included)."""
    return len(to_json(row)) + 2


def bounded_rows(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows, refused as soon as their JSON passes RESULT_MAX_CHARS."""
    kept: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        size += json_size(row)
        if size > RESULT_MAX_CHARS:
            raise ToolError(
                f"refused: the result is larger than {RESULT_MAX_CHARS >> 20} MB as JSON (column names are "
                "repeated in every row); select fewer or shorter-named columns, aggregate, or add a LIMIT"
            )
        kept.append(row)
    return kept


def rows_json(rows: list[dict[str, Any]], max_chars: int) -> str:
    """The rows as a JSON array, its text stopped once past max_chars (the rest is in the variable)."""
    parts, size = [], 0
    for index, row in enumerate(rows):
        if size > max_chars:
            return "[" + ", ".join(parts) + f", …] ({len(rows) - index} more rows in the variable)"
        parts.append(to_json(row))
        size += len(parts[-1]) + 2
    return "[" + ", ".join(parts) + "]"


def _describe_sql(database: Database) -> tuple[str, dict[str, Any]]:
    tables = []
    for table in database.tables():
        count = database.query(f"SELECT COUNT(*) FROM {table.sql_name}", 1).rows[0][0]
        columns = [{"name": quote_identifier(n), "type": t} for n, t in database.columns(table)]
        tables.append({"name": table.sql_name, "rows": count, "columns": columns})
    lines = [f"{database.name} ({database.kind}): {len(tables)} table(s)"]
    lines += [f"  {t['name']} — {t['rows']} rows: {_listing(t['columns'])}" for t in tables]
    return "\n".join(lines), {"kind": str(database.kind), "tables": tables}


def _describe_mongo(database: MongoWorker) -> tuple[str, dict[str, Any]]:
    collections = []
    for name in database.collections():
        fields = [{"name": f, "type": " | ".join(types)} for f, types in database.fields(name).items()]
        collections.append({"name": name, "documents": database.count(name), "fields": fields})
    lines = [f"{database.name} (mongo, served by {ENGINE}): {len(collections)} collection(s)"]
    lines += [f"  {c['name']} — {c['documents']} documents: {_listing(c['fields'])}" for c in collections]
    return "\n".join(lines), {"kind": "mongo", "collections": collections}


def _listing(columns: list[dict[str, str]]) -> str:
    return ", ".join(f"{c['name']} {c['type']}" for c in columns)


class ResultStore:
    """The query results an agent can use in execute_python, by variable name."""

    def __init__(self) -> None:
        self.variables: dict[str, list[dict[str, Any]]] = {}
        self.size = 0  # characters of their JSON

    def add(self, rows: list[dict[str, Any]]) -> str:
        size = sum(json_size(row) for row in rows)
        if self.size + size > STORE_MAX_CHARS:
            raise ToolError(
                f"refused: this result ({size >> 20} MB as JSON) would take the stored results past "
                f"{STORE_MAX_CHARS >> 20} MB (execute_python receives them all); aggregate in the query instead"
            )
        name = f"result_{len(self.variables) + 1}"
        self.variables[name] = rows
        self.size += size
        return name


# ---------------------------------------------------------------- tools


class ListDbParameters(Parameters):
    db_name: str  # one of the task's databases: `db_name_field`


class QueryDbParameters(Parameters):
    db_name: str  # one of the task's databases: `db_name_field`
    query: str = Field(description="SQL text, or a Mongo query as JSON text.")


class ReturnAnswerParameters(Parameters):
    answer: str = Field(description="The final answer.")


class ListDbTool(Tool):
    name = "list_db"
    description = "List the tables (with columns and types) or collections (with fields) of one database."

    def __init__(self, databases: DabDatabases) -> None:
        self.databases = databases
        self.parameters = parameters_schema(with_fields(ListDbParameters, db_name=databases.db_name_field()))

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        content, data = self.databases.describe(arguments["db_name"])
        return ToolResult(success=True, content=content, data=data)

    def close(self) -> None:
        self.databases.close()


class QueryDbTool(Tool):
    name = "query_db"
    description = (
        "Run one read-only query on one database. SQL databases take one SELECT/WITH query. Mongo databases "
        'take a JSON object: a find {"collection": C, "filter": {...}, "projection": {...}, "sort": {"field": -1}, '
        '"limit": n} or an aggregation {"collection": C, "pipeline": [...]}. The result is stored as a variable '
        "(its name is returned) that execute_python can use."
    )

    def __init__(self, databases: DabDatabases, store: ResultStore) -> None:
        self.databases = databases
        self.store = store
        self.parameters = parameters_schema(with_fields(QueryDbParameters, db_name=databases.db_name_field()))

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        rows, more = self.databases.query(arguments["db_name"], arguments["query"])
        variable = self.store.add(rows)
        cut = f", cut at {RESULT_MAX_ROWS}: more rows exist, aggregate in the query" if more else ""
        content = f"stored as variable {variable} ({len(rows)} rows{cut}):\n{rows_json(rows, CONTENT_MAX_CHARS)}"
        return ToolResult(success=True, content=content, data={"variable": variable, "rows": rows}, truncated=more)

    def close(self) -> None:
        self.databases.close()


class DabPythonTool(PythonTool):
    """execute_python with the stored query results as variables."""

    def __init__(self, settings: ToolSettings, store: ResultStore) -> None:
        super().__init__(settings)
        self.store = store
        self.description = (
            "Run a Python program in a fresh sandbox and get its stdout and stderr; print what you need. "
            "The results of earlier query_db calls are defined as variables (result_1, result_2, ...: "
            f"lists of row objects). No network, {settings.python_timeout_s:g}s and "
            f"{settings.python_memory_mb} MB limits; nothing else persists between calls."
        )

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        variables = json.dumps(self.store.variables, ensure_ascii=False)
        return self.execute(LOADER, files={CODE_FILE: arguments["code"], VARIABLES_FILE: variables})


class ReturnAnswerTool(Tool):
    name = "return_answer"
    description = "Give the final answer and end the task; call it once, when you know the answer."
    answers = True
    aliases = ("answer",)

    def __init__(self, task: Task) -> None:
        self.task = task
        self.parameters = parameters_schema(ReturnAnswerParameters)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        call = ToolCall(name=self.name, arguments=arguments)
        raise FinalToolCall(call, answer_from_tool(self.task, arguments), note="recorded as the final answer")


# ---------------------------------------------------------------- the profile


def dab_tools(task: Task, settings: ToolSettings) -> list[Tool]:
    """list_db, query_db, execute_python and return_answer over the task's SQL and Mongo databases.
    Closing list_db or query_db closes the databases."""
    databases = Databases([s for s in task.data if s.kind in BACKENDS], settings, task.data_dir)
    try:
        shared = DabDatabases(task, databases, open_mongo(task, settings.sql_timeout_s))
    except Exception:
        databases.close()
        raise
    store = ResultStore()
    return [ListDbTool(shared), QueryDbTool(shared, store), DabPythonTool(settings, store), ReturnAnswerTool(task)]


def open_mongo(task: Task, timeout_s: float) -> dict[str, MongoWorker]:
    """The task's Mongo databases, each loaded from its mongodump folder in its worker process."""
    opened: dict[str, MongoWorker] = {}
    try:
        for source in task.data:
            if source.kind == DataSourceKind.MONGO:
                opened[source.name] = _load_mongo(task, source, timeout_s)
    except Exception:
        for database in opened.values():
            database.close()
        raise
    return opened


def _load_mongo(task: Task, source: DataSource, timeout_s: float) -> MongoWorker:
    folder = source_path(source, task.data_dir)
    try:
        return MongoWorker(source.name, folder, dump_db_name(task, source.name), timeout_s)
    except (OSError, ValueError) as error:  # bson.InvalidBSON is a ValueError too
        raise DataUnavailable(f"database {source.name!r}: cannot load the mongodump at {folder}: {error}") from error


def dump_db_name(task: Task, name: str) -> str | None:
    """The database name in the dump, from DAB's db_config (mongodump nests collections under it)."""
    client = task.metadata.get("db_config", {}).get("db_clients", {}).get(name, {})
    return client.get("db_name") if isinstance(client, dict) else None
