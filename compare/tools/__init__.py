"""The tool environment of a task: which tools it gets, built over its real data."""

from __future__ import annotations

from compare.task import DataSourceKind, Task
from compare.tools.answer import AnswerTool, answer_schema
from compare.tools.base import Tool, ToolEnvironment, ToolError, ToolResult, ToolSettings
from compare.tools.documents import DocumentSearchTool
from compare.tools.files import ListFilesTool, ReadFileTool
from compare.tools.python_sandbox import PythonTool
from compare.tools.sql import BACKENDS, Databases, SchemaTool, SqlTool
from compare.trace import TraceRecorder

__all__ = [
    "DEFAULT_TOOL_NAMES",
    "AnswerTool",
    "DocumentSearchTool",
    "ListFilesTool",
    "PythonTool",
    "ReadFileTool",
    "SchemaTool",
    "SqlTool",
    "Tool",
    "ToolEnvironment",
    "ToolError",
    "ToolResult",
    "ToolSettings",
    "answer_schema",
    "build_environment",
]

DEFAULT_TOOL_NAMES = [
    "get_schema_info",
    "execute_sql",
    "search_documents",
    "list_files",
    "read_file",
    "execute_python",
    "answer",
]

SQL_KINDS = set(BACKENDS)  # a new backend in compare.tools.sql makes its kind supported here
SUPPORTED_KINDS = {*SQL_KINDS, DataSourceKind.DOCUMENTS, DataSourceKind.FILES}


def build_environment(task: Task, recorder: TraceRecorder, settings: ToolSettings) -> ToolEnvironment:
    """The tools the task's data sources call for, restricted to `task.tools` when it is set.

    Raises ToolError when a data source is of a kind this environment cannot serve.
    """
    unsupported = [f"{s.name!r} ({s.kind})" for s in task.data if s.kind not in SUPPORTED_KINDS]
    if unsupported:
        raise ToolError(f"unsupported data source(s) for task {task.id}: {', '.join(unsupported)}")

    def wanted(name: str) -> bool:
        return task.tools is None or name in task.tools or name == "answer"

    tools: list[Tool] = []
    try:
        databases = [s for s in task.data if s.kind in SQL_KINDS]
        if databases and (wanted("get_schema_info") or wanted("execute_sql")):
            shared = Databases(databases, settings, task.data_dir)
            tools += [SchemaTool(shared, settings), SqlTool(shared, settings)]
        documents = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
        if documents and wanted("search_documents"):  # the only costly one: it may embed the corpus
            tools.append(DocumentSearchTool(documents, settings, task.data_dir))
        if task.data_dir is not None:
            tools += [ListFilesTool(task.data_dir), ReadFileTool(task.data_dir, settings)]
        tools += [PythonTool(settings, task.data_dir), AnswerTool(task)]
    except Exception:
        for tool in tools:
            tool.close()
        raise
    return ToolEnvironment([tool for tool in tools if wanted(tool.name)], recorder)
