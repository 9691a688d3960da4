"""End to end on one task of each published benchmark: the tool-use workflow with a scripted test
model, the benchmark's real data behind the tools (SQLite, context files, a real PostgreSQL server),
scored by the benchmark's own rule. (DBGorilla's end-to-end test is in test_dab_tools.py.)"""

import json
import shutil

from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.tools.postgres import find_bin_dir

from helpers import FIXTURES, load_tasks, postgres_bin_dir_or_skip, run_task, steps_taken


def script(*calls):
    """A scripted test model that makes these tool calls in order, one per turn."""

    def respond(request: ModelRequest, context: CallContext) -> Message:
        name, arguments = calls[steps_taken(request)]
        return tool_call_message(name, arguments, f"call_{steps_taken(request)}")

    return respond


def test_fdabench_task_over_a_real_sqlite_database(tmp_path, scripted_model):
    record = json.loads((FIXTURES / "fdabench/test_multichoice.jsonl").read_text().splitlines()[0])
    record["db"] = "regional_sales"  # the one BIRD database we have; the question is FDABench's own
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks/test_multichoice.jsonl").write_text(json.dumps(record) + "\n")
    (tmp_path / "tasks/databases/regional_sales").mkdir(parents=True)
    shutil.copy(FIXTURES / "regional_sales.sqlite", tmp_path / "tasks/databases/regional_sales/regional_sales.sqlite")
    (task,) = load_tasks("fdabench", tmp_path / "tasks")
    assert task.unavailable is None
    respond = script(
        ("get_schema_info", {}),
        ("execute_sql", {"sql": 'SELECT COUNT(*) FROM "Sales Orders"'}),
        ("answer", {"answer": record["correct_answer"]}),
    )
    result, trace, _ = run_task(tmp_path, scripted_model(respond), task, "tool_use")
    assert result["status"] == "completed"
    assert result["scores"]["exact_match"] == 1.0
    assert "7991" in trace["steps"][3]["result_summary"]  # the real row count came back through the tool
    assert 0 < result["scores"]["tos"] <= 1 and result["scores"]["sr"] == 1.0


def test_dabstep_task_over_its_context_files(tmp_path, scripted_model):
    task = next(t for t in load_tasks("dabstep", FIXTURES / "dabstep") if t.id == "1273")
    respond = script(
        ("list_files", {}), ("read_file", {"path": "fees.json", "max_bytes": 2000}), ("answer", {"answer": "0.120132"})
    )
    result, trace, _ = run_task(tmp_path, scripted_model(respond), task, "tool_use")
    assert result["scores"]["correct"] == 1.0 and result["scores"]["correct_strict"] == 1.0
    reads = [s for s in trace["steps"] if s["kind"] == "tool_call" and s["tool"] == "read_file"]
    assert reads[0]["success"] and "ID" in reads[0]["result_summary"]


def test_dab_task_over_a_real_postgres_server_and_sqlite(tmp_path, scripted_model):
    postgres_bin_dir_or_skip()
    assert find_bin_dir() is not None
    dataset = tmp_path / "query_bookreview"
    shutil.copytree(FIXTURES / "dab/query_bookreview", dataset)
    task = next(t for t in load_tasks("dab", dataset) if t.id == "bookreview/query1")
    assert task.unavailable is None  # the review SQLite was built from the published JSON Lines
    respond = script(
        ("list_db", {"db_name": "books_dataset"}),
        ("query_db", {"db_name": "books_dataset", "query": "SELECT COUNT(*) AS n FROM books_info"}),
        ("query_db", {"db_name": "review_dataset", "query": "SELECT COUNT(*) AS n FROM review"}),
        ("return_answer", {"answer": "The 2020s have the highest average rating."}),
    )
    result, trace, _ = run_task(tmp_path, scripted_model(respond), task, "tool_use")
    assert result["status"] == "completed", result["error"]
    assert result["scores"]["correct"] == 1.0
    queries = [s for s in trace["steps"] if s["kind"] == "tool_call" and s["tool"] == "query_db"]
    assert all(q["success"] for q in queries), queries
    assert "200" in queries[0]["result_summary"] and "1833" in queries[1]["result_summary"]
