"""The built-in tools, over a task's real data; a benchmark chooses which a task gets.

- `default_tools(task, settings)`: schema inspection and read-only SQL (SQLite, DuckDB,
  PostgreSQL), document search (FAISS over MiniLM embeddings), listing and reading files of the
  task's data folder, the frozen web/vector searches recorded with a task, sandboxed Python, and
  `answer`. What `task.tools` names, when it is set (`answer` always).
- `dab_tools(task, settings)` (`tools/dab.py`): DataAgentBench's own list_db, query_db,
  execute_python and return_answer, over SQL and Mongo databases.
- `function_call_tools(task)` (`tools/function_call.py`): the task's own tool specs, whose
  first call is the prediction (DBGorilla).

Database runtimes live here too: PostgreSQL restores (`postgres/`) and the MongoDB stand-in
(`mongo.py`).
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Iterable
from typing import Any

from ..core.task import DataSourceKind, Task
from ..core.tool import DataUnavailable, Tool, ToolError, ToolSettings
from .answer import AnswerTool
from .files import ListFilesTool, ReadFileTool
from .frozen_search import frozen_search_tools
from .python_sandbox import PythonTool

__all__ = ["DEFAULT_TOOL_NAMES", "SQL_KINDS", "check_kinds", "default_tools", "offered", "prepare_tools"]

DEFAULT_TOOL_NAMES = [
    "get_schema_info",
    "execute_sql",
    "search_documents",
    "list_files",
    "read_file",
    "execute_python",
    "answer",
]

# The SQL engines (DuckDB, psycopg, sqlglot) and FAISS take ~0.7 s to import: their modules load on first
# use (PEP 562), so that `compare --help` and the runner's import stay fast.
LAZY = {"BACKENDS": ".sql", "Databases": ".sql", "SchemaTool": ".sql", "SqlTool": ".sql"}
LAZY |= {"DocumentSearchTool": ".documents", "preload": ".documents"}


def __getattr__(name: str) -> Any:
    if name == "SQL_KINDS":  # a new backend in tools/sql/databases.py BACKENDS makes its kind supported here
        return set(__getattr__("BACKENDS"))
    if name == "SUPPORTED_KINDS":
        return {*__getattr__("SQL_KINDS"), DataSourceKind.DOCUMENTS, DataSourceKind.FILES}
    if name in LAZY:
        return getattr(importlib.import_module(LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_tools(task: Task, settings: ToolSettings) -> list[Tool]:
    """The default tools the task's data calls for (module docstring). Raises ToolError when a data
    source is of a kind these tools cannot serve."""
    from .documents import DocumentSearchTool
    from .sql import BACKENDS, Databases, SchemaTool, SqlTool

    check_kinds(task, {*BACKENDS, DataSourceKind.DOCUMENTS, DataSourceKind.FILES})

    def wanted(name: str) -> bool:
        return task.tools is None or name in task.tools or name == AnswerTool.name

    tools: list[Tool] = []
    try:
        databases = [s for s in task.data if s.kind in BACKENDS]
        if databases and (wanted("get_schema_info") or wanted("execute_sql")):
            shared = Databases(databases, settings, task.data_dir)
            tools += [SchemaTool(shared, settings), SqlTool(shared, settings)]
        documents = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
        if documents and wanted("search_documents"):  # the only costly one: it may embed the corpus
            tools.append(DocumentSearchTool(documents, settings, task.data_dir))
        if task.data_dir is not None:
            tools += [ListFilesTool(task.data_dir), ReadFileTool(task.data_dir, settings)]
        tools += frozen_search_tools(task.metadata, {tool.name for tool in tools})
        tools += [PythonTool(settings, task.data_dir), AnswerTool(task)]
    except Exception:
        for tool in tools:
            tool.close()
        raise
    return offered(task, tools)


ENGINE_KINDS = (DataSourceKind.SQLITE, DataSourceKind.DUCKDB, DataSourceKind.MONGO)  # served by worker processes


def prepare_tools(tasks: list[Task], settings: ToolSettings, in_flight: int = 0) -> dict[str, float]:
    """Load, once and before any task's clock, what building the tasks' tools would load per task: each
    document corpus's index and the embedding model; and, for `in_flight` units at once, the worker
    processes their databases open in (`worker_process.prestart`). Returns the seconds spent, by what."""
    loaded = _preload_documents(tasks, settings)
    if any(task.data for task in tasks):  # `default_tools` imports these per task: here first, in one thread
        from . import documents, sql  # noqa: F401  (see core/registry.import_lazy_dependencies)
    engines = max((sum(s.kind in ENGINE_KINDS for s in t.data) for t in tasks if not t.unavailable), default=0)
    if in_flight and engines:
        from .worker_process import prestart

        loaded["database worker processes"] = prestart(min(in_flight, len(tasks)) * engines)
    return loaded


def _preload_documents(tasks: list[Task], settings: ToolSettings) -> dict[str, float]:
    from .documents import preload

    start = time.perf_counter()
    corpora = {}
    for task in tasks:
        documents = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
        if documents and not task.unavailable and (task.tools is None or "search_documents" in task.tools):
            corpora[(tuple(s.model_dump_json() for s in documents), task.data_dir)] = (documents, task.data_dir)
    for documents, data_dir in corpora.values():
        with contextlib.suppress(ToolError):  # a missing corpus is the task's `data_unavailable`, said there
            preload(documents, settings, data_dir)
    return {"search_documents (embedding model, document indexes)": time.perf_counter() - start} if corpora else {}


def check_kinds(task: Task, supported: Iterable[DataSourceKind]) -> None:
    unsupported = [f"{s.name!r} ({s.kind})" for s in task.data if s.kind not in set(supported)]
    if unsupported:
        raise DataUnavailable(f"unsupported data source(s) for task {task.id}: {', '.join(unsupported)}")


def offered(task: Task, tools: list[Tool]) -> list[Tool]:
    """The tools `task.tools` names (all when it is None), always with the answer tools. The others
    are not closed: they may share a connection with one that is kept."""
    return [tool for tool in tools if task.tools is None or tool.name in task.tools or tool.answers]
