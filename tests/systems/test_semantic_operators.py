"""The semantic-operator systems (LOTUS, DocETL): a planning step, the library's operators over every
row the SQL tool returns, traced as tool calls with their model calls metered through the gateway,
budget stops with the budget's status, offline imports."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from data_agent_compare.core import CallContext, DataSource, DataSourceKind, Gold, Message, ModelRequest, Task
from data_agent_compare.core.task import QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, make_plan, no_network, read_records, registered_system, run_task

ROWS = 500


def review_database(tmp_path: Path, rows: int = ROWS) -> Path:
    """A table of `rows` reviews; every third one mentions a late delivery."""
    path = tmp_path / "reviews.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE reviews (id INTEGER PRIMARY KEY, comment TEXT)")
        con.executemany(
            "INSERT INTO reviews VALUES (?, ?)",
            [(i, f"review {i}: " + ("the parcel came late" if i % 3 == 0 else "great lamp")) for i in range(rows)],
        )
    return path


def review_task(database: Path) -> Task:
    source = DataSource(name="shop", kind=DataSourceKind.SQLITE, location=str(database))
    return Task(
        id="late",
        benchmark="bundled",
        question="How many reviews mention a late delivery?",
        question_type=QuestionType.FACTOID,
        data=[source],
        gold=Gold(answer=str(len(range(0, ROWS, 3)))),
    )


def is_plan(request: ModelRequest) -> bool:
    return request.response_schema is not None and "operators" in request.response_schema.get("properties", {})


def offers_answer(request: ModelRequest) -> bool:
    return any(t.name == "answer" for t in request.tools)


def last_user(request: ModelRequest) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def plan_message(operator: dict, sql: str = "SELECT id, comment FROM reviews") -> Message:
    plan = {"queries": [{"tool": "execute_sql", "arguments": {"sql": sql}}], "operators": [operator]}
    return Message(role="assistant", content=json.dumps(plan))


def model_calls(trace: dict) -> list[dict]:
    return [s for s in trace["steps"] if s["kind"] == "model_call"]


def tool_calls(trace: dict) -> list[dict]:
    return [s for s in trace["steps"] if s["kind"] == "tool_call"]


BIG = {"budgets": {"max_steps": 2000, "max_tokens": 5_000_000}, "tools": {"sql_max_rows": 1000}}


def test_scripted_lotus_filter_reads_every_row_of_the_sql_result(tmp_path, scripted_model):
    task = review_task(review_database(tmp_path))
    operator = {"operator": "sem_filter", "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    seen: list[str] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            return plan_message(operator)
        if offers_answer(request):  # the table's note gives its row count after the filter
            kept = re.findall(r"^table_1: (\d+) rows", last_user(request), re.M)
            return tool_call_message("answer", {"answer": kept[0] if kept else "none"})
        seen.append(last_user(request))
        return Message(role="assistant", content="True" if "parcel came late" in last_user(request) else "False")

    failing = {"tool": "execute_sql", "arguments": {"sql": "SELECT nothing FROM nowhere"}}

    def respond_with_a_failing_query(request: ModelRequest, context: CallContext) -> Message:
        reply = respond(request, context)
        if is_plan(request):
            plan = json.loads(reply.content or "{}")
            return Message(role="assistant", content=json.dumps({**plan, "queries": [*plan["queries"], failing]}))
        return reply

    record, trace, _ = run_task(tmp_path, scripted_model(respond_with_a_failing_query), task, "lotus", **BIG)

    # One operator prompt per row, each row once, each a metered model call through the gateway.
    assert len(seen) == ROWS
    assert sorted(int(re.search(r"review (\d+):", text).group(1)) for text in seen) == list(range(ROWS))
    calls = model_calls(trace)
    assert len(calls) == 1 + ROWS + 1  # plan, the operator's prompts, answer
    assert all(call["via_http"] for call in calls[1:-1]) and all(c["usage"]["input_tokens"] > 0 for c in calls)
    tools = tool_calls(trace)
    assert [t["tool"] for t in tools] == ["get_schema_info", "execute_sql", "execute_sql", "sem_filter", "answer"]
    fetch, operator_step = tools[1], tools[3]
    assert tools[2]["success"] is False  # table_2's query failed; the operators are no retry for it
    assert {(c["agent"], c["phase"]) for c in calls[1:-1]} == {("operators", "decision")}
    assert (calls[0]["phase"], calls[-1]["phase"]) == ("decision", "generate")
    assert fetch["result_summary"].startswith(f"{ROWS} rows")
    assert operator_step["arguments"]["rows"] == ROWS and operator_step["arguments"]["truncated"] is False
    assert operator_step["result_summary"].startswith(f"{ROWS} rows in, {len(range(0, ROWS, 3))} out")
    # Every operator prompt falls inside the operator's step.
    begin, end = operator_step["start_s"], operator_step["start_s"] + operator_step["duration_s"]
    assert all(begin <= call["start_s"] <= end for call in calls[1:-1])
    assert record["status"] == "completed" and record["scores"]["exact_match"] == 1.0


def scripted_filter(operator: dict, seen: list[str], verdict):
    """Plan `operator` over the review table, answer each row's prompt with `verdict(prompt)`, and
    answer the task with table_1's row count as the answer step reads it."""

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            return plan_message(operator)
        if offers_answer(request):
            kept = re.findall(r"^table_1: (\d+) rows", last_user(request), re.M)
            return tool_call_message("answer", {"answer": kept[0] if kept else "none"})
        seen.append(last_user(request))
        return verdict(request)

    return respond


def docetl_keep(request: ModelRequest) -> Message:
    """DocETL's structured output is a forced call of its `send_output` tool."""
    assert [t.name for t in request.tools] == ["send_output"] and request.tool_choice == "required"
    return tool_call_message("send_output", {"keep": "parcel came late" in last_user(request)})


def test_scripted_docetl_pipeline_receives_every_row(tmp_path, scripted_model):
    task = review_task(review_database(tmp_path))
    operator = {"operator": "filter", "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    seen: list[str] = []
    respond = scripted_filter(operator, seen, docetl_keep)

    record, trace, _ = run_task(tmp_path, scripted_model(respond), task, "docetl", **BIG)

    assert len(seen) == ROWS
    assert sorted(int(re.search(r"review (\d+):", text).group(1)) for text in seen) == list(range(ROWS))
    calls = model_calls(trace)
    assert len(calls) == 1 + ROWS + 1 and all(call["via_http"] for call in calls[1:-1])
    tools = tool_calls(trace)
    assert [t["tool"] for t in tools] == ["get_schema_info", "execute_sql", "docetl_filter", "answer"]
    assert tools[2]["arguments"]["rows"] == ROWS
    assert tools[2]["result_summary"].startswith(f"{ROWS} rows in, {len(range(0, ROWS, 3))} out")
    assert record["status"] == "completed" and record["scores"]["exact_match"] == 1.0


def lotus_verdict(request: ModelRequest) -> Message:
    return Message(role="assistant", content="True" if "parcel came late" in last_user(request) else "False")


@pytest.mark.parametrize(
    ("system", "operator", "verdict"),
    [
        ("lotus", "sem_filter", lotus_verdict),
        ("docetl", "filter", docetl_keep),
    ],
)
def test_scripted_operator_needing_more_calls_than_steps_left_stops_with_max_steps(
    tmp_path, scripted_model, system, operator, verdict
):
    task = review_task(review_database(tmp_path))
    seen: list[str] = []
    plan = {"operator": operator, "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    budgets = {"budgets": {"max_steps": 50}, "tools": {"sql_max_rows": 1000}}

    record, trace, _ = run_task(tmp_path, scripted_model(scripted_filter(plan, seen, verdict)), task, system, **budgets)

    assert record["status"] == "max_steps" and "needs 500 model calls and 49 are left" in record["error"]
    assert seen == []  # refused before any of its calls was sent
    refused = tool_calls(trace)[-1]
    assert refused["tool"].endswith("filter") and refused["success"] is False


@pytest.mark.parametrize(
    ("system", "operator", "verdict"),
    [
        ("lotus", "sem_filter", lotus_verdict),
        ("docetl", "filter", docetl_keep),
    ],
)
def test_scripted_token_budget_refused_by_the_gateway_mid_operator_is_the_budget_status(
    tmp_path, scripted_model, system, operator, verdict
):
    task = review_task(review_database(tmp_path))
    seen: list[str] = []
    plan = {"operator": operator, "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    budgets = {"budgets": {"max_steps": 2000, "max_tokens": 6000}, "tools": {"sql_max_rows": 1000}}

    record, trace, _ = run_task(tmp_path, scripted_model(scripted_filter(plan, seen, verdict)), task, system, **budgets)

    assert record["status"] == "max_tokens", record["error"]
    assert 0 < len(seen) < ROWS  # the gateway admitted calls until the budget ran out, then refused (HTTP 402)
    assert len(model_calls(trace)) == 1 + len(seen)
    step = next(t for t in tool_calls(trace) if t["tool"].endswith("filter"))
    assert step["success"] is False


IMPORTS = """
import json, logging, os, sys
sys.path.insert(0, {tests!r})
from helpers import no_network
from data_agent_compare.systems.bridge import offline_environment
offline_environment()
handlers = len(logging.getLogger().handlers)
with no_network() as attempts:
    {imports}
import litellm
print(json.dumps({{
    "attempts": attempts,
    "probe": os.environ.get("DAC_DOTENV_PROBE"),
    "drop_params": litellm.drop_params,
    "handlers": [handlers, len(logging.getLogger().handlers)],
    "home": os.environ.get("DOCETL_HOME_DIR"),
}}))
"""


def import_in_child(folder: Path, imports: str) -> dict:
    """Run the imports in a fresh Python whose working directory holds a .env file."""
    (folder / ".env").write_text("DAC_DOTENV_PROBE=leaked\n")
    script = IMPORTS.format(tests=str(Path(__file__).resolve().parents[1]), imports=imports)
    done = subprocess.run([sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_imports_are_offline_and_undo_their_global_changes(tmp_path):
    control = import_in_child(tmp_path, "import docetl")
    assert control["probe"] == "leaked" and control["drop_params"] is True  # what DocETL does on its own

    isolated = import_in_child(
        tmp_path,
        "from data_agent_compare.systems.docetl_pipeline import import_docetl; import_docetl()\n"
        "    from data_agent_compare.systems.lotus_operators import import_lotus; import_lotus()",
    )
    assert isolated["attempts"] == []  # no network attempt (LiteLLM's price map, tokenizers, models)
    assert isolated["probe"] is None  # the .env's variables are gone again
    assert isolated["drop_params"] is False  # LiteLLM's default, put back
    assert isolated["handlers"][0] == isolated["handlers"][1]  # LOTUS's logging.basicConfig undone
    assert isolated["home"] and Path(isolated["home"]).name.startswith("dac-docetl-home-")


BUDGET_STATUSES = {"max_steps", "max_tokens", "time_limit"}
# The embedded model runs one call at a time and a call's deadline includes its wait for the model: on a
# busy machine the structured plan alone can take minutes, and LOTUS sends its calls 64 at once.
EMBEDDED = {
    "budgets": {"max_steps": 8, "wall_time_s": 1800},
    "retries": {"attempt_timeout_s": 1200, "call_timeout_s": 1500},
}


@pytest.mark.slow
@pytest.mark.parametrize(("system", "prefix"), [("lotus", "sem_"), ("docetl", "docetl_")])
def test_system_end_to_end_with_the_embedded_model_offline(tmp_path, system, prefix):
    from data_agent_compare.engine.config import load_model_table

    task = next(t for t in load_tasks("bundled") if t.id == "BND003")
    with no_network() as attempts:
        record, trace, _ = run_task(tmp_path, load_model_table()["local"], task, system, **EMBEDDED)

    assert attempts == []
    assert record["status"] in {"completed", "no_answer", *BUDGET_STATUSES}, record["error"]
    assert record["status"] != "completed" or record["answer"] is not None
    operators = [t for t in tool_calls(trace) if t["tool"].startswith(prefix)]
    assert operators, [t["tool"] for t in tool_calls(trace)]
    calls = model_calls(trace)
    assert calls and all(c["provider"] == "local" for c in calls)
    assert record["usage"]["input_tokens"] > 0 and all(c["usage"]["input_tokens"] > 0 for c in calls)


def labelled_database(folder: Path, label: str, rows: int) -> Path:
    folder.mkdir()
    path = folder / "reviews.sqlite"
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE reviews (id INTEGER PRIMARY KEY, comment TEXT)")
        con.executemany("INSERT INTO reviews VALUES (?, ?)", [(i, f"{label} review {i}") for i in range(rows)])
    return path


def test_scripted_concurrent_lotus_tasks_each_use_their_own_settings(tmp_path, scripted_model):
    """Two tasks at once: each task's operator prompts reach its own gateway session (LOTUS's
    settings are per thread), and each prompt shows a row of that task's own table."""
    sizes = {"alpha": 30, "beta": 45}
    tasks = [
        review_task(labelled_database(tmp_path / label, label, rows)).model_copy(update={"id": label})
        for label, rows in sizes.items()
    ]
    operator = {"operator": "sem_filter", "input": "table_1", "instruction": "the {comment} is positive"}
    seen: dict[str, list[str]] = {label: [] for label in sizes}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            return plan_message(operator)
        if offers_answer(request):
            return tool_call_message("answer", {"answer": "0"})
        seen[context.task_id].append(last_user(request))
        time.sleep(0.2)  # long enough for the two tasks' operators to overlap
        return Message(role="assistant", content="False")

    plan = make_plan(tmp_path, tasks, scripted_model(respond), ["lotus"], concurrency=2, **BIG)
    execute(plan)

    for label, rows in sizes.items():
        assert len(seen[label]) == rows and all(f"{label} review" in prompt for prompt in seen[label])
    records = read_records(plan.run_dir)
    expected = {(label, "completed", rows + 2) for label, rows in sizes.items()}  # plan, rows, answer
    assert {(r.task_id, r.status, r.model_calls) for r in records} == expected
    spans = []
    for record in records:
        trace = json.loads((plan.run_dir / record.trace_file).read_text())
        step = next(t for t in tool_calls(trace) if t["tool"] == "sem_filter")
        begin = datetime.fromisoformat(step["started_at"]).timestamp()
        spans.append((begin, begin + step["duration_s"]))
    (_, first_end), (second_begin, _) = sorted(spans)
    assert second_begin < first_end  # the operators ran at the same time


def generic_reply(request: ModelRequest) -> Message:
    """Any operator prompt: LOTUS reads text, DocETL a call of its output tool with every field filled."""
    if not request.tools:
        return Message(role="assistant", content="True")
    properties = request.tools[0].parameters.get("properties", {})
    values = {k: True if v.get("type") == "boolean" else f"{k} value" for k, v in properties.items()}
    return tool_call_message(request.tools[0].name, values)


STORES = 'SELECT "City Name", "State", "Type" FROM "Store Locations" ORDER BY "StoreID" LIMIT 12'
PIPELINES = {
    "lotus": [
        {"operator": "sem_map", "input": "table_1", "instruction": "the region of {State}", "output_column": "region"},
        {"operator": "sem_search", "input": "documents", "column": "text", "query": "discount policy", "k": 3},
        {
            "operator": "sem_sim_join",
            "input": "table_1",
            "right": "documents",
            "left_column": "City Name",
            "right_column": "text",
            "k": 1,
        },
        {"operator": "sem_agg", "input": "table_1", "instruction": "summarize the {region} of the stores"},
    ],
    "docetl": [
        {"operator": "map", "input": "table_1", "instruction": "the region of {State}", "output_column": "region"},
        {"operator": "resolve", "input": "table_1", "column": "Type", "instruction": "store formats"},
        {"operator": "filter", "input": "documents", "instruction": "the {text} is about discounts"},
        {"operator": "reduce", "input": "table_1", "instruction": "summarize the {region}", "output_column": "summary"},
    ],
}


@pytest.mark.parametrize("system", sorted(PIPELINES))
def test_scripted_pipeline_of_several_operators_over_rows_and_documents(tmp_path, scripted_model, system):
    task = next(t for t in load_tasks("bundled") if t.id == "BND003")
    operators = PIPELINES[system]

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            plan = {"queries": [{"tool": "execute_sql", "arguments": {"sql": STORES}}], "operators": operators}
            return Message(role="assistant", content=json.dumps(plan))
        if offers_answer(request):
            return tool_call_message("answer", {"answer": "1"})
        return generic_reply(request)

    record, trace, _ = run_task(tmp_path, scripted_model(respond), task, system, **BIG)

    steps = [t for t in tool_calls(trace) if t["tool"] not in ("get_schema_info", "execute_sql", "answer")]
    prefix = "docetl_" if system == "docetl" else ""
    assert [s["tool"] for s in steps] == [prefix + op["operator"] for op in operators]
    assert all(s["success"] for s in steps), [s["error"] for s in steps]
    assert record["status"] == "completed"
    assert tool_calls(trace)[1]["arguments"] == {"sql": STORES}


@pytest.mark.slow
@pytest.mark.parametrize(("system", "operator"), [("lotus", "sem_filter"), ("docetl", "filter")])
def test_library_operator_calls_reach_the_embedded_model_through_the_gateway(tmp_path, system, operator):
    """With a fixed plan (the embedded model's own plans rarely run), the library's operator prompts
    go to the embedded model: one per row, metered, offline."""
    from data_agent_compare.core import SYSTEMS
    from data_agent_compare.engine.config import load_model_table

    fixed = {
        "queries": [{"tool": "execute_sql", "arguments": {"sql": STORES.replace("LIMIT 12", "LIMIT 2")}}],
        "operators": [{"operator": operator, "input": "table_1", "instruction": "the {Type} is a city"}],
    }

    class FixedPlan(SYSTEMS.load(system)):
        name = f"{system}_fixed_plan"

        def plan(self, ctx, request, schema):
            return fixed

    task = next(t for t in load_tasks("bundled") if t.id == "BND003")
    with registered_system(FixedPlan), no_network() as attempts:
        record, trace, _ = run_task(tmp_path, load_model_table()["local"], task, FixedPlan.name, **EMBEDDED)

    assert attempts == []
    assert record["status"] in {"completed", "no_answer", *BUDGET_STATUSES}, record["error"]
    step = next(t for t in tool_calls(trace) if t["tool"].endswith(operator))
    assert step["success"], step["error"]
    begin, end = step["start_s"], step["start_s"] + step["duration_s"]
    inside = [c for c in model_calls(trace) if begin <= c["start_s"] <= end]
    assert len(inside) == 2 and all(c["via_http"] and c["provider"] == "local" for c in inside)
    assert all(c["usage"]["input_tokens"] > 0 and c["usage"]["output_tokens"] > 0 for c in inside)


def test_scripted_rows_cut_by_the_sql_cap_are_said_to_be_cut_never_silently(tmp_path, scripted_model):
    task = review_task(review_database(tmp_path))
    operator = {"operator": "sem_filter", "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    seen: list[str] = []
    answer_prompts: list[str] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if offers_answer(request):
            answer_prompts.append("\n".join(m.content or "" for m in request.messages))
        return scripted_filter(operator, seen, lotus_verdict)(request, context)

    capped = {"budgets": BIG["budgets"], "tools": {"sql_max_rows": 100}}
    record, trace, _ = run_task(tmp_path, scripted_model(respond), task, "lotus", **capped)

    assert len(seen) == 100  # the operator saw every row the tool returned: its cap, not a sample
    fetch, step = tool_calls(trace)[1], tool_calls(trace)[2]
    assert fetch["result_summary"].startswith("100 rows (cut by the tool's caps: more rows exist)")
    assert step["arguments"]["rows"] == 100 and step["arguments"]["truncated"] is True
    assert "table_1: 34 rows (cut by the SQL tool's caps: more rows exist)" in answer_prompts[0]
    assert record["status"] == "completed"


def test_rows_of_both_query_tools_and_recorded_search_results_become_tables():
    from types import SimpleNamespace

    from data_agent_compare.core.tool import ToolResult
    from data_agent_compare.systems.semantic_operators import document_table, result_frame
    from data_agent_compare.tools.frozen_search import FrozenSearchTool

    sql = ToolResult(success=True, content="", data={"columns": ["Sales Channel", "n"], "rows": [["Online", 3]]})
    assert result_frame(sql).to_dict("records") == [{"Sales_Channel": "Online", "n": 3}]
    dab = ToolResult(success=True, content="", data={"variable": "result_1", "rows": [{"title": "A", "rating": 5}]})
    assert result_frame(dab).to_dict("records") == [{"title": "A", "rating": 5}]

    recorded = [{"title": "Policy", "content": "Refunds within 30 days.", "url": "https://example.com/p"}, "plain"]
    tools = {"search_documents": FrozenSearchTool("search_documents", recorded)}
    table = document_table(SimpleNamespace(tools=SimpleNamespace(tools=tools)))
    assert table is not None and table.frame.to_dict("records") == [
        {"source": "https://example.com/p", "heading": "Policy", "text": "Refunds within 30 days."},
        {"source": "search_documents", "heading": "", "text": "plain"},
    ]


@pytest.mark.parametrize(
    ("system", "operator", "verdict"),
    [("lotus", "sem_filter", lotus_verdict), ("docetl", "filter", docetl_keep)],
)
def test_scripted_operators_read_the_text_column_of_every_row_a_dab_query_returns(
    tmp_path, scripted_model, system, operator, verdict
):
    """On DAB the unstructured text is in rows: the plan fetches them with query_db (row objects) and the
    operator reads the text column of each."""
    source = DataSource(name="shop", kind=DataSourceKind.SQLITE, location=str(review_database(tmp_path, rows=60)))
    task = review_task(tmp_path).model_copy(update={"benchmark": "dab", "data": [source]})
    fetch = {"tool": "query_db", "arguments": {"db_name": "shop", "query": "SELECT id, comment FROM reviews"}}
    planned = {"operator": operator, "input": "table_1", "instruction": "the {comment} mentions a late delivery"}
    seen: list[str] = []

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            return Message(role="assistant", content=json.dumps({"queries": [fetch], "operators": [planned]}))
        if offers_answer(request):  # the answer step (DAB's return_answer answers to `answer` too)
            kept = re.findall(r"^table_1: (\d+) rows", last_user(request), re.M)
            return tool_call_message("answer", {"answer": kept[0] if kept else "none"})
        seen.append(last_user(request))
        return verdict(request)

    record, trace, _ = run_task(tmp_path, scripted_model(respond), task, system, **BIG)

    assert sorted(int(re.search(r"review (\d+):", text).group(1)) for text in seen) == list(range(60))
    tools = [t["tool"] for t in tool_calls(trace)]
    assert tools[:2] == ["list_db", "query_db"] and tools[-1] == "return_answer"
    assert record["status"] == "completed" and record["answer"]["text"] == "20"


@pytest.mark.parametrize(
    "plan",
    [
        {"queries": ["SELECT id, comment FROM reviews"], "operators": []},  # a query as a bare string
        {"queries": [{"tool": "execute_sql", "arguments": "SELECT 1"}], "operators": []},
        {"queries": [], "operators": "sem_filter"},
    ],
)
def test_scripted_lotus_plan_of_the_wrong_shape_ends_the_unit_as_the_systems_failure(tmp_path, scripted_model, plan):
    task = review_task(review_database(tmp_path))

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if is_plan(request):
            return Message(role="assistant", content=json.dumps(plan))
        return tool_call_message("answer", {"answer": "none"})

    record, _, _ = run_task(tmp_path, scripted_model(respond), task, "lotus", **BIG)
    assert record["status"] == "error"
    assert record["error"].startswith("lotus: the plan's") and "AttributeError" not in record["error"]
