"""The tool environment of a task: which tools it gets, built over its real data.

Three profiles:
- function-calling tasks (DBGorilla): only the task's own tools (`Task.tool_specs`), whose
  first call is the prediction (compare.tools.function_call);
- DAB tasks: the official harness's list_db, query_db, execute_python and return_answer
  (compare.tools.dab), over SQL and Mongo databases;
- every other task: the default tools its data sources call for.

DAB's answer tool keeps its official name, `return_answer`, and ends the task when called
(`FinalToolCall`, which the runner turns into the answer), wherever a workflow calls it.
The workflows finish on a tool named `answer`, and the writer steps of planning and
multi_agent ask for that tool by name, so `answer` is also an unlisted alias of
`return_answer`: every workflow finishes on DAB without knowing the profile.
"""

from __future__ import annotations

from compare.task import DataSourceKind, QuestionType, Task
from compare.tools.answer import AnswerTool, answer_schema
from compare.tools.base import FinalToolCall, Tool, ToolEnvironment, ToolError, ToolResult, ToolSettings
from compare.tools.dab import DAB_BENCHMARK, DAB_TOOL_NAMES, ReturnAnswerTool, build_dab_tools
from compare.tools.documents import DocumentSearchTool
from compare.tools.files import ListFilesTool, ReadFileTool
from compare.tools.frozen_search import FrozenSearchTool, frozen_search_tools
from compare.tools.function_call import SpecTool, build_function_call_tools
from compare.tools.python_sandbox import PythonTool
from compare.tools.sql import BACKENDS, Databases, SchemaTool, SqlTool
from compare.trace import TraceRecorder

__all__ = [
    "DAB_TOOL_NAMES",
    "DEFAULT_TOOL_NAMES",
    "AnswerTool",
    "DocumentSearchTool",
    "FinalToolCall",
    "FrozenSearchTool",
    "ListFilesTool",
    "PythonTool",
    "ReadFileTool",
    "SchemaTool",
    "SpecTool",
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
DAB_KINDS = {*SQL_KINDS, DataSourceKind.MONGO}


def build_environment(task: Task, recorder: TraceRecorder, settings: ToolSettings) -> ToolEnvironment:
    """The tools of the task's profile (module docstring), restricted to `task.tools` when it is set.

    Raises ToolError when a data source is of a kind this environment cannot serve.
    """
    if task.question_type == QuestionType.FUNCTION_CALL:
        return ToolEnvironment(_restrict(task, build_function_call_tools(task)), recorder)
    if task.benchmark == DAB_BENCHMARK:
        _check_kinds(task, DAB_KINDS)
        return _dab_environment(task, recorder, settings)
    _check_kinds(task, SUPPORTED_KINDS)
    return _default_environment(task, recorder, settings)


def _check_kinds(task: Task, supported: set[DataSourceKind]) -> None:
    unsupported = [f"{s.name!r} ({s.kind})" for s in task.data if s.kind not in supported]
    if unsupported:
        raise ToolError(f"unsupported data source(s) for task {task.id}: {', '.join(unsupported)}")


def _restrict(task: Task, tools: list[Tool], keep: str | None = None) -> list[Tool]:
    """The tools `task.tools` names (all when it is None), always with `keep`."""
    return [tool for tool in tools if task.tools is None or tool.name in task.tools or tool.name == keep]


def _dab_environment(task: Task, recorder: TraceRecorder, settings: ToolSettings) -> ToolEnvironment:
    databases = Databases([s for s in task.data if s.kind in SQL_KINDS], settings, task.data_dir)
    try:
        tools = build_dab_tools(task, settings, databases)
    except Exception:
        databases.close()
        raise
    aliases = {AnswerTool.name: ReturnAnswerTool.name}  # module docstring: how every workflow finishes on DAB
    return ToolEnvironment(_restrict(task, tools, keep=ReturnAnswerTool.name), recorder, aliases)


def _default_environment(task: Task, recorder: TraceRecorder, settings: ToolSettings) -> ToolEnvironment:
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
        tools += frozen_search_tools(task.metadata, {tool.name for tool in tools})
        tools += [PythonTool(settings, task.data_dir), AnswerTool(task)]
    except Exception:
        for tool in tools:
            tool.close()
        raise
    return ToolEnvironment([tool for tool in tools if wanted(tool.name)], recorder)
