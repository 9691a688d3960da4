"""What the semantic-operator systems share: a planning step, the task's data as DataFrames, the
operators traced as tool calls, and the answer step. `lotus_operators.py` and `docetl_pipeline.py`
only say how their library carries out an operator.

    SemanticOperatorSystem.prepare             imports the library before any task's clock (isolated_import)
    SemanticOperatorSystem.run(task, ctx)
        ├─ offline_environment()               before any framework import (price map, tokenizers)
        ├─ describe the data                   get_schema_info / list_db through ctx (EXECUTE, no model call)
        ├─ plan (ctx.generate, DECISION)       JSON schema: queries that fetch the rows + operators in order,
        │                                      each on a named table with a natural-language instruction
        ├─ fetch                               each query through the task's own SQL tool (execute_sql /
        │                                      query_db: its row and byte caps, traced, read-only)
        │                                      → table_1, table_2, ...; the document chunks → `documents`
        ├─ operators (with ctx.openai_endpoint) each one `ctx.tool_step(<operator>, arguments)`: the library
        │                                      runs it, its model calls go through the metered gateway
        │                                      (agent "operators": DECISION, whatever failed before)
        └─ answer (ctx.generate, GENERATE)     the tables after the operators → the `answer` tool

DAB keeps its unstructured text (review texts, descriptions) in database columns: the plan's queries fetch
those rows with `query_db` and the operators read the text by column name, so these systems take DAB's text
as rows rather than as `documents` (which holds the document corpus and FDABench's recorded searches).

Nothing is sampled silently: a table holds every row the SQL tool returned within its caps
(`tools.sql_max_rows`, `tools.sql_max_bytes`; DAB's 100-row cut), and when a cap cut the result that
is in the fetch step's trace (`truncated`), in every operator step's arguments, and in what the
answer step reads. The plan and data helpers (`plan_request`, `fetch_tables`, `document_table`,
`write_answer`) are free functions, so another planned system (a RAG pipeline) can use them.

Budgets: every model call goes through the gateway, which refuses a call past a budget (HTTP 402);
the library then raises and the task ends with the budget's status (`ctx.budget_stop`), never
"error". An operator whose number of model calls is known before it runs (one per row for filter,
map and extract; one per pair for a join) and exceeds the steps left is not started: the task stops
with `max_steps` at once instead of sending calls the gateway would refuse.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import threading
from abc import abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import Answer, BudgetExceeded, Endpoint, Message, RunContext, System, Task, prompt_hash
from ..core.safe_load import load_json
from ..core.system import SystemSetup
from ..core.tool import ToolResult
from ..workflows.planning import ANSWER_REFUSED, ANSWER_SYSTEM, answer_from_results
from .bridge import distribution_versions, offline_environment

if TYPE_CHECKING:
    import pandas as pd

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = (
    "data_agent_compare.tools.documents", "data_agent_compare.tools.frozen_search", "pandas", "tempfile", "jsonschema",
)  # fmt: skip


SEMANTIC_PROMPT_VERSION = "1"
PLAN_SYSTEM = """You are a data analyst driving the semantic-operator engine {engine}. Write a plan in two parts.
1. `queries`: read-only queries that fetch the rows the question needs. Their results become the tables table_1, \
table_2, ... in order. Select only the columns the operators need, with simple aliases without spaces; filter in the \
query what the query can filter; keep the text columns the operators must read.
2. `operators`: semantic operators applied in order. Each works on one table (`input`; `documents` is the company \
documents as chunks with columns source, heading, text) and its result replaces that table. Write each instruction \
in natural language and name the columns it reads in braces, e.g. "the {{comment}} mentions a late delivery".
Operators:
{operators}
Do not answer yet: the answer is written from the tables after the operators have run."""

MAX_QUERIES = 3
MAX_OPERATORS = 4
DOCUMENTS = "documents"
FETCH_TOOLS = ("execute_sql", "query_db")  # the task's own query tools: caps, read-only checks, trace
SHOWN_COLUMNS = 8  # columns an instruction without {column} names gets
# The library's model calls are labelled as this agent's: they carry out the plan, so a failed query or
# operator of the pipeline never makes them RETRY (PhaseRules keeps each agent's failures apart).
OPERATOR_AGENT = "operators"


def table_names(count: int = MAX_QUERIES) -> list[str]:
    return [f"table_{i}" for i in range(1, count + 1)]


@dataclass
class Table:
    """One DataFrame of the run, with where it came from and whether a cap cut it."""

    name: str
    frame: pd.DataFrame
    source: str  # the query, or "document chunks"
    truncated: bool = False  # the SQL tool's caps cut the result: more rows exist
    history: list[str] = field(default_factory=list)  # the operators applied to it

    def note(self) -> str:
        cut = " (cut by the SQL tool's caps: more rows exist)" if self.truncated else ""
        steps = f"; operators applied: {', '.join(self.history)}" if self.history else ""
        return f"{self.name}: {len(self.frame)} rows{cut} from {self.source}{steps}"


# ---------------------------------------------------------------- importing a framework

_import_lock = threading.RLock()


@contextlib.contextmanager
def isolated_import() -> Iterator[None]:
    """Around a framework's first import: offline switches first, and its process-wide side effects
    undone after. LiteLLM (`litellm/__init__.py`), LOTUS's web search and DocETL each load a `.env`
    file into os.environ at import (python-dotenv: from the working directory or the folders above
    the package); DocETL sets `litellm.drop_params = True` for every LiteLLM user; LOTUS calls
    `logging.basicConfig(level=INFO)`. The environment, `litellm.drop_params` and the root logger are
    put back as they were. The working directory is not changed for the import: it is process state,
    and other tasks' threads resolve relative paths (the index cache) against it."""
    offline_environment()
    with _import_lock:
        environ = dict(os.environ)
        drop_params = getattr(sys.modules.get("litellm"), "drop_params", False)
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        try:
            yield
        finally:
            for name in [n for n in os.environ if n not in environ]:
                del os.environ[name]
            for name, value in environ.items():
                if os.environ.get(name) != value:
                    os.environ[name] = value
            if "litellm" in sys.modules:
                sys.modules["litellm"].drop_params = drop_params
                # The libraries look up prices by the bare model id; LiteLLM prints a red "Provider List"
                # banner on stdout for every miss (the lookup's failure itself is handled).
                sys.modules["litellm"].suppress_debug_info = True
            for handler in [h for h in root.handlers if h not in handlers]:
                root.removeHandler(handler)
            root.setLevel(level)


# ---------------------------------------------------------------- the plan


def operator_branch(name: str, tables: list[str], fields: dict[str, Any]) -> dict[str, Any]:
    """One operator's JSON schema: its name, the table it reads, and its own fields."""
    properties = {"operator": {"const": name}, "input": {"enum": tables}, **fields}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def plan_schema(fetch: list[dict[str, Any]], operators: list[dict[str, Any]]) -> dict[str, Any]:
    """The plan: queries (one branch per query tool, with its own argument schema) and operators."""
    queries = [
        {
            "type": "object",
            "properties": {"tool": {"const": spec["name"]}, "arguments": spec["parameters"]},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        }
        for spec in fetch
    ]
    properties: dict[str, Any] = {
        "operators": {"type": "array", "items": {"anyOf": operators}, "minItems": 1, "maxItems": MAX_OPERATORS}
    }
    if queries:
        properties = {
            "queries": {"type": "array", "items": {"anyOf": queries}, "minItems": 1, "maxItems": MAX_QUERIES},
            **properties,
        }
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def read_json_object(text: str | None) -> dict[str, Any]:
    try:
        value = load_json(text or "")
    except ValueError:  # not JSON, or nested too deep
        return {}
    return value if isinstance(value, dict) else {}


def describe_data(ctx: RunContext) -> str:
    """The data's schema through the task's own schema tool (a traced tool call, no model call)."""
    offered = {spec.name: spec for spec in ctx.tool_specs()}
    if "get_schema_info" in offered:
        return ctx.call_tool("get_schema_info", {}).content
    if "list_db" in offered:
        names = offered["list_db"].parameters.get("properties", {}).get("db_name", {}).get("enum") or []
        return "\n\n".join(ctx.call_tool("list_db", {"db_name": name}).content for name in names)
    return ""


def plan_request(ctx: RunContext, engine: str, operators: dict[str, str], schema_text: str) -> list[Message]:
    """The planning call's messages: the plan prompt, the task, the data's schema and the documents."""
    listing = "\n".join(f"- {name}: {text}" for name, text in operators.items())
    parts = [ctx.task_prompt(answer_format=False)]
    if schema_text:
        parts.append(f"Database schema:\n{schema_text}")
    return [
        Message(role="system", content=PLAN_SYSTEM.format(engine=engine, operators=listing)),
        Message(role="user", content="\n\n".join(parts)),
    ]


# ---------------------------------------------------------------- the data as DataFrames


def safe_column(name: str, taken: set[str]) -> str:
    """A column name an instruction can write in braces (LOTUS formats instructions with str.format)."""
    base = re.sub(r"\W+", "_", str(name)).strip("_") or "column"
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}_{number}", number + 1
    taken.add(candidate)
    return candidate


def result_frame(result: ToolResult) -> pd.DataFrame:
    """Every row a query tool returned, as a DataFrame: execute_sql gives columns and row lists,
    DAB's query_db row objects."""
    import pandas as pd

    data = result.data if isinstance(result.data, dict) else {}
    rows = data.get("rows") or []
    if "columns" in data:
        frame = pd.DataFrame([list(row) for row in rows], columns=list(data["columns"]))
    else:
        frame = pd.DataFrame([row if isinstance(row, dict) else {"value": row} for row in rows])
    taken: set[str] = set()
    return frame.set_axis([safe_column(c, taken) for c in frame.columns], axis=1)


class MalformedPlan(ValueError):
    """The planning reply is JSON of another shape than the plan's schema (a model that ignored it): the unit
    ends as the system's failure, saying what was wrong."""


def plan_parts(plan: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The plan's queries and operators, checked for the shape every later step reads (`plan_schema`)."""
    queries, operators = plan.get("queries") or [], plan.get("operators") or []
    for what, items in (("queries", queries), ("operators", operators)):
        if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
            shown = json.dumps(items, ensure_ascii=False)[:200]
            raise MalformedPlan(f"the plan's {what!r} is not a list of objects: {shown}")
    for number, query in enumerate(queries, 1):
        if not isinstance(query.get("tool"), str) or not isinstance(query.get("arguments") or {}, dict):
            shown = json.dumps(query, ensure_ascii=False)[:200]
            raise MalformedPlan(f"the plan's query {number} is not {{tool: name, arguments: object}}: {shown}")
    return queries, operators


def fetch_tables(ctx: RunContext, queries: list[dict[str, Any]]) -> tuple[dict[str, Table], list[str]]:
    """Run the plan's queries with the task's query tools: table_1, table_2, ... and failure notes."""
    tables: dict[str, Table] = {}
    notes: list[str] = []
    for name, query in zip(table_names(), queries[:MAX_QUERIES], strict=False):
        tool, arguments = str(query.get("tool", "")), dict(query.get("arguments") or {})
        ctx.check_budget()
        result = run_query(ctx, tool, arguments)
        if not result.success:
            notes.append(f"{name}: the query failed: {result.error or result.content}")
            continue
        source = f"{tool} {json.dumps(arguments, ensure_ascii=False)}"
        tables[name] = Table(name, result_frame(result), source, truncated=result.truncated)
    return tables, notes


def run_query(ctx: RunContext, name: str, arguments: dict[str, Any]) -> ToolResult:
    """One query through the task's own query tool (its caps, its read-only checks), traced as that
    tool's call. The tool is run here rather than by `ctx.call_tool`, whose result has been fitted to the
    model's context and is then `truncated` also when only the text was cut: here `truncated` means
    that the tool's row or byte cap cut the rows themselves."""
    import jsonschema  # 0.2 s to import: with the first query, not when the system is listed

    tool = ctx.tools.tools.get(name)
    with ctx.tool_step(name, arguments) as step:
        if name not in FETCH_TOOLS or tool is None:
            step.fail(f"{name!r} is not a query tool of this task")
            return ToolResult(success=False, content="", error=step.error)
        try:
            jsonschema.validate(arguments, tool.parameters)
            result = tool.run(arguments)
        except jsonschema.ValidationError as invalid:
            result = ToolResult(success=False, content="", error=f"invalid arguments: {invalid.message}")
        except Exception as failure:  # ToolError (bad SQL, a refused write) or a tool bug: a failed step
            result = ToolResult(success=False, content="", error=f"{type(failure).__name__}: {failure}")
        if not result.success:
            step.fail(result.error or result.content)
            return result
        rows = len((result.data or {}).get("rows") or []) if isinstance(result.data, dict) else 0
        cut = " (cut by the tool's caps: more rows exist)" if result.truncated else ""
        step.content = f"{rows} rows{cut}\n{result.content}"
        return result


def document_table(ctx: RunContext) -> Table | None:
    """The task's documents as a table: the corpus's chunks (the `search_documents` index), or the
    search results recorded with an FDABench task (frozen vector and web search)."""
    import pandas as pd

    from ..tools.documents import DocumentSearchTool
    from ..tools.frozen_search import FrozenSearchTool

    rows: list[dict[str, str]] = []
    for name in ("search_documents", "web_search"):
        tool = ctx.tools.tools.get(name)
        if isinstance(tool, DocumentSearchTool):
            rows += [{"source": c.source, "heading": c.heading, "text": c.text} for c in tool.index.chunks]
        elif isinstance(tool, FrozenSearchTool):
            rows += [recorded_row(entry, name) for entry in recorded_entries(tool.recorded)]
    if not rows:
        return None
    return Table(DOCUMENTS, pd.DataFrame(rows, columns=["source", "heading", "text"]), "document chunks")


def recorded_entries(recorded: Any) -> list[Any]:
    return recorded if isinstance(recorded, list) else [recorded]


def recorded_row(entry: Any, tool: str) -> dict[str, str]:
    if not isinstance(entry, dict):
        return {"source": tool, "heading": "", "text": str(entry)}
    text = entry.get("content") or entry.get("snippet") or entry.get("text") or json.dumps(entry, default=str)
    return {"source": str(entry.get("url") or tool), "heading": str(entry.get("title") or ""), "text": str(text)}


BRACED = re.compile(r"(?<!\{)\{([^{}]+)\}(?!\})")  # a {name} that is not {{escaped}}


def column_key(name: str) -> str:
    """How a name the plan wrote matches a column: case and punctuation forgiven."""
    return re.sub(r"\W+", "_", name.split(":")[0]).strip("_").lower()


def referenced_columns(instruction: str, columns: list[str]) -> list[str]:
    """The table's columns the instruction names in braces; its first columns if it names none."""
    lookup = {column_key(c): c for c in columns}
    named = [lookup[key] for key in map(column_key, BRACED.findall(instruction)) if key in lookup]
    return list(dict.fromkeys(named)) or columns[:SHOWN_COLUMNS]


def instruction_columns(instruction: str, columns: list[str], suffix: str = "") -> str:
    """The instruction with its {column} names matched to the table's columns; one that names no
    column of the table is given its first columns, so that the library shows the model the row
    (LOTUS refuses an instruction without a column). Other braces become plain text."""
    lookup = {column_key(c): c for c in columns}
    named: list[str] = []

    def match(found: re.Match[str]) -> str:
        column = lookup.get(column_key(found.group(1)))
        if column is None:
            return found.group(1)
        named.append(column)
        return "{" + column + suffix + "}"

    text = BRACED.sub(match, instruction)
    if not named:
        text += " (" + ", ".join("{" + c + suffix + "}" for c in referenced_columns("", columns)) + ")"
    return text


def render_table(table: Table, limit: int) -> str:
    """A table as the answer step reads it: its note, then CSV cut at `limit` characters."""
    text = table.frame.to_csv(index=False)
    if len(text) > limit:
        text = text[:limit] + f"\n…[cut: {len(text)} characters, showing the first {limit}]"
    return f"{table.note()}\n{text}"


# ---------------------------------------------------------------- the answer


def write_answer(ctx: RunContext, results: list[str]) -> Answer:
    """The last model call: the results → the `answer` tool (the planning workflow's answer step)."""
    return answer_from_results(ctx, [Message(role="user", content=text) for text in results])


# ---------------------------------------------------------------- the system


@dataclass
class OperatorRun:
    """The state one task's operators share: the tables, the endpoint and a scratch folder."""

    ctx: RunContext
    endpoint: Endpoint
    tables: dict[str, Table]
    workdir: str  # the library's own files (indexes, intermediates), removed with the run
    state: dict[str, Any] = field(default_factory=dict)  # the library's per-run objects


class SemanticOperatorSystem(System):
    """A planned pipeline of a semantic-operator library (module docstring); a subclass says how the
    library runs one operator."""

    kind = "semantic-operator"
    engine: ClassVar[str]
    framework_packages: ClassVar[tuple[str, ...]]
    operators: ClassVar[dict[str, str]]  # name → what it does, for the plan prompt

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "framework": distribution_versions(*self.framework_packages),
            "prompt_version": SEMANTIC_PROMPT_VERSION,
            "prompt_hash": prompt_hash(PLAN_SYSTEM, ANSWER_SYSTEM, ANSWER_REFUSED, *self.operators.values()),
            "operators": sorted(self.operators),
        }

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        """Import the library before any task's clock starts (LOTUS takes ~10 s: torch, sentence-transformers)."""
        self.import_library()
        return []

    @abstractmethod
    def import_library(self) -> None:
        """Import the library, offline and with its global side effects undone (`isolated_import`)."""

    @abstractmethod
    def operator_schemas(self, tables: list[str]) -> list[dict[str, Any]]:
        """One JSON-schema branch per operator (`operator_branch`)."""

    @abstractmethod
    def apply(self, run: OperatorRun, operator: dict[str, Any]) -> Table:
        """Run one operator of the plan with the library; return the table it produced."""

    def expected_calls(self, run: OperatorRun, operator: dict[str, Any]) -> int | None:
        """Model calls the operator will make, when known before it runs (None: unknown)."""
        return None

    def open(self, run: OperatorRun) -> contextlib.AbstractContextManager[Any]:
        """A context manager around all of one task's operators (the library's per-run settings)."""
        return contextlib.nullcontext()

    def run(self, task: Task, ctx: RunContext) -> Answer:
        offline_environment()  # before the library (and LiteLLM) is first imported
        try:
            tables, results = self._plan_and_operate(ctx)
            limit = ctx.budgets.tool_result_max_chars
            # The documents only as the operators left them: the answer step is no retrieval of its own.
            shown = [t for t in tables.values() if t.name != DOCUMENTS or t.history]
            results += [render_table(table, limit) for table in shown]
            return write_answer(ctx, results)
        except BudgetExceeded as limit:
            return Answer(status=limit.status, error=str(limit))
        except MalformedPlan as wrong:  # the model's plan, not the suite: the system's own failure
            return Answer(status="error", error=f"{self.name}: {wrong}")

    def _plan_and_operate(self, ctx: RunContext) -> tuple[dict[str, Table], list[str]]:
        schema_text = describe_data(ctx)
        documents = document_table(ctx)
        fetch = [s.model_dump() for s in ctx.tool_specs() if s.name in FETCH_TOOLS]
        inputs = table_names() + ([DOCUMENTS] if documents is not None else [])
        schema = plan_schema(fetch, self.operator_schemas(inputs))
        plan = self.plan(ctx, plan_request(ctx, self.engine, self.operators, schema_text), schema)
        queries, operators = plan_parts(plan)
        tables, notes = fetch_tables(ctx, queries)
        if documents is not None:
            tables[DOCUMENTS] = documents
        operators = operators[:MAX_OPERATORS]
        if not operators:
            notes.append("the plan has no operators")
            ctx.warn("no_operator", "the plan has no operators" if plan else "the plan could not be read")
            return tables, notes
        calls_before = len(ctx.model.recorder.trace.model_calls)
        rows = {name: len(table.frame) for name, table in tables.items() if name != DOCUMENTS}  # before the operators
        failed = self._operate(ctx, tables, operators)
        if len(failed) == len(operators):
            ctx.warn("no_operator", f"every operator of the plan failed ({len(failed)})")
        elif len(ctx.model.recorder.trace.model_calls) == calls_before:  # they ran, over nothing to read
            ran = len(operators) - len(failed)
            ctx.warn("empty_operator", f"{ran} operator(s) ran without a model call; rows of the tables: {rows}")
        return tables, notes + failed

    def plan(self, ctx: RunContext, request: list[Message], schema: dict[str, Any]) -> dict[str, Any]:
        """The planning call: queries and operators (`plan_schema`) as structured output."""
        return read_json_object(ctx.generate(request, response_schema=schema).message.content)

    def _operate(self, ctx: RunContext, tables: dict[str, Table], operators: list[dict[str, Any]]) -> list[str]:
        import tempfile

        notes: list[str] = []
        endpoint = ctx.openai_endpoint(agent=OPERATOR_AGENT)
        with tempfile.TemporaryDirectory(prefix=f"dac-{self.name}-") as workdir, endpoint as served:
            run = OperatorRun(ctx, served, tables, workdir)
            with self.open(run):
                for number, operator in enumerate(operators, 1):
                    note = self._one_operator(run, number, operator)
                    if note:
                        notes.append(note)
        return notes

    def _one_operator(self, run: OperatorRun, number: int, operator: dict[str, Any]) -> str | None:
        """Run one operator as a traced tool step; a failure is a note for the answer step, a budget
        refusal ends the task with the budget's status."""
        ctx, name = run.ctx, str(operator.get("operator", "?"))
        table = run.tables.get(str(operator.get("input")))
        ctx.check_budget()
        arguments = {**operator, "rows": len(table.frame) if table else 0, "truncated": bool(table and table.truncated)}
        try:
            with ctx.tool_step(self.trace_name(name), arguments) as step:
                if table is None:
                    raise ValueError(f"no table {operator.get('input')!r} (tables: {', '.join(run.tables) or 'none'})")
                self._refuse_if_too_many(run, operator)  # inside the step: the trace shows the refused operator
                produced = self.apply(run, operator)
                produced.history = [*table.history, name]
                run.tables[table.name] = produced
                step.content = f"{len(table.frame)} rows in, {len(produced.frame)} out; {produced.note()}"
        except Exception as failure:
            stop = ctx.budget_stop  # the gateway refused a call (HTTP 402) and the library raised
            if stop is not None:
                raise stop from failure
            return f"operator {number} ({name}) failed: {type(failure).__name__}: {failure}"
        return None

    def trace_name(self, operator: str) -> str:
        """The tool name of an operator's step in the trace."""
        return operator

    def _refuse_if_too_many(self, run: OperatorRun, operator: dict[str, Any]) -> None:
        calls = self.expected_calls(run, operator)
        recorder = run.ctx.model.recorder
        left = run.ctx.budgets.max_steps - len(recorder.trace.model_calls)
        if calls is not None and calls > left:
            detail = (
                f"step limit of {run.ctx.budgets.max_steps} model calls: operator {operator.get('operator')} "
                f"needs {calls} model calls and {left} are left"
            )
            raise recorder.refuse("max_steps", detail)
