"""Issue 26, item 3: every engine an agent reaches from the runner ends by its deadline and stays within
its memory, however the query is written: one SQLite function call that never returns to the progress
handler, SQL text too large to parse, a catastrophic Mongo regex and a doubling $concat, a DAB result
whose column names make it huge as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import bson
import pytest

from data_agent_compare.core import ToolError
from data_agent_compare.core.task import DataSource, DataSourceKind
from data_agent_compare.core.tool import ToolSettings
from data_agent_compare.tools.mongo import MongoQueryError, MongoWorker
from data_agent_compare.tools.sql import SQL_TEXT_MAX_CHARS, Databases, SqlTool
from data_agent_compare.tools.worker_process import CALL_GRACE_S

from helpers import FIXTURES

TIMEOUT_S = 2.0
# The call's deadline plus what a loaded machine may add to killing and answering.
ENDS_BY_S = TIMEOUT_S + CALL_GRACE_S + 3.0


@pytest.fixture
def sqlite_tool() -> Any:
    settings = ToolSettings(sql_timeout_s=TIMEOUT_S)
    source = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(FIXTURES / "regional_sales.sqlite"))
    tool = SqlTool(Databases([source], settings), settings)
    yield tool
    tool.close()


def timed_refusal(tool: SqlTool, sql: str) -> tuple[str, float]:
    start = time.monotonic()
    with pytest.raises(ToolError) as refused:
        tool.run({"sql": sql})
    return str(refused.value), time.monotonic() - start


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT length(printf('%.*c', 2147483647, 'x'))",
        # a long LIKE: the 40,000-character rest of the pattern is compared at each position of a 1 MB string
        "SELECT replace(hex(zeroblob(500000)), '0', 'a') LIKE '%' || replace(hex(zeroblob(20000)), '0', 'a') || 'b'",
    ],
    ids=["printf", "like"],
)
def test_one_sqlite_call_ends_within_its_timeout_and_the_database_answers_again(sqlite_tool, sql):
    message, elapsed = timed_refusal(sqlite_tool, sql)
    assert elapsed < ENDS_BY_S, f"took {elapsed:.1f}s: {message}"
    assert "timeout" in message or "refused" in message
    assert sqlite_tool.run({"sql": "SELECT 1 AS one"}).content.startswith("one\n1")


def test_sql_text_past_the_cap_is_refused_before_any_parser_sees_it(sqlite_tool):
    sql = "SELECT 1 WHERE 1 IN (" + ",".join(["1"] * 750_000) + ")"  # 1.5 MB
    message, elapsed = timed_refusal(sqlite_tool, sql)
    assert f"more than {SQL_TEXT_MAX_CHARS:,}" in message and elapsed < 1.0


# ---------------------------------------------------------------- the Mongo stand-in


@pytest.fixture
def mongo(tmp_path: Path) -> Any:
    folder = tmp_path / "dump"
    folder.mkdir()
    documents = [{"_id": i, "text": "word " * 12 + "!", "n": i} for i in range(200)]
    (folder / "docs.bson").write_bytes(b"".join(bson.encode(d) for d in documents))
    database = MongoWorker("docs_db", folder, None, TIMEOUT_S)
    yield database
    database.close()


def timed_mongo(database: MongoWorker, query: dict[str, Any]) -> tuple[str, float]:
    start = time.monotonic()
    with pytest.raises(MongoQueryError) as refused:
        database.query(json.dumps(query), 100)
    return str(refused.value), time.monotonic() - start


def test_a_catastrophic_mongo_regex_ends_at_its_deadline_and_the_database_answers_again(mongo):
    query = {"collection": "docs", "filter": {"text": {"$regex": r"^(\w+\s?)*$"}}}
    message, elapsed = timed_mongo(mongo, query)
    assert "timeout" in message and elapsed < ENDS_BY_S, f"took {elapsed:.1f}s: {message}"
    assert mongo.count("docs") == 200  # reloaded in a fresh worker


def test_a_doubling_concat_pipeline_is_stopped_by_the_workers_memory_limit(mongo):
    doubling = [{"$set": {"text": {"$concat": ["$text", "$text"]}}} for _ in range(22)]
    message, elapsed = timed_mongo(mongo, {"collection": "docs", "pipeline": doubling})
    assert ("memory" in message or "timeout" in message) and elapsed < ENDS_BY_S, message
    assert mongo.query('{"collection": "docs", "limit": 1}', 10).documents[0]["n"] == 0


def test_a_mongo_query_nested_past_the_depth_limit_is_refused(mongo):
    deep = {"collection": "docs", "filter": json.loads('{"$and": [' * 400 + "{}" + "]}" * 400)}
    message, _ = timed_mongo(mongo, deep)
    assert "nested deeper" in message


# ---------------------------------------------------------------- DAB query_db results, measured in a child

WIDE_RESULT_PROBE = """
import sys
from pathlib import Path
from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.core.tool import ToolError, ToolSettings
from data_agent_compare.tools.dab import dab_tools

folder = Path(sys.argv[1])
alias = "c" * 300
columns = ", ".join(f"value AS {alias}{i}" for i in range(int(sys.argv[2])))
task = Task(id="wide", benchmark="dab", question="?", question_type=QuestionType.FACTOID,
            data=[DataSource(name="db", kind=DataSourceKind.SQLITE, location="t.db")], data_dir=folder)
tools = {tool.name: tool for tool in dab_tools(task, ToolSettings())}
outcomes = []
for _ in range(2):
    try:
        result = tools["query_db"].run({"db_name": "db", "query": f"SELECT {columns} FROM t"})
        outcomes.append(f"stored {len(result.data['rows'])}")
    except ToolError as error:
        outcomes.append(f"refused: {error}")
tools["query_db"].close()
# VmHWM, this process's own peak: ru_maxrss would carry the peak of the pytest process it was forked from
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")) // 1024)
print(outcomes)
"""


def wide_result_peak_mb(folder: Path, columns: int) -> tuple[int, str]:
    """The child's peak RSS (MB) after two query_db calls for 100k rows of `columns` 300-character aliases."""
    three_gb = ["prlimit", f"--as={3 << 30}", "--"]  # the probe itself may not take the machine
    child = subprocess.run(
        [*three_gb, sys.executable, "-c", WIDE_RESULT_PROBE, str(folder), str(columns)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    peak, outcomes = child.stdout.splitlines()[-2:]
    return int(peak), outcomes


@pytest.mark.slow
def test_two_wide_100k_row_dab_results_keep_the_runner_bounded(tmp_path: Path) -> None:
    import sqlite3

    with sqlite3.connect(tmp_path / "t.db") as connection:
        connection.execute("CREATE TABLE t (value INTEGER)")
        connection.executemany("INSERT INTO t VALUES (?)", ((i,) for i in range(100_000)))
    narrow_peak, narrow = wide_result_peak_mb(tmp_path, 1)
    wide_peak, wide = wide_result_peak_mb(tmp_path, 20)  # 593 M characters of JSON each, unbounded
    assert "stored 100000" in narrow
    assert wide.count("refused: the result is larger than") == 2, wide
    assert wide_peak < 1024, f"runner peak {wide_peak} MB (narrow result: {narrow_peak} MB)"
    print(f"peak RSS: narrow {narrow_peak} MB, wide {wide_peak} MB")


def test_a_mongo_result_larger_than_the_cap_is_refused_in_the_worker(mongo):
    doubling = [{"$set": {"text": {"$concat": ["$text", "$text"]}}} for _ in range(16)]  # 200 x 4.6 MB
    message, elapsed = timed_mongo(mongo, {"collection": "docs", "pipeline": doubling})
    # refused by size in the worker, or (a loaded machine) by its memory limit or its deadline: never sent whole
    assert any(word in message for word in ("larger than", "memory", "timeout")) and elapsed < ENDS_BY_S, message


def test_a_query_ends_at_the_units_wall_time_when_that_comes_before_its_timeout():
    from data_agent_compare.core import ToolEnvironment
    from data_agent_compare.tools.sql import Databases, SqlTool

    from helpers import recorder

    settings = ToolSettings(sql_timeout_s=60)  # the unit's 3 s budget ends first
    source = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(FIXTURES / "regional_sales.sqlite"))
    environment = ToolEnvironment([SqlTool(Databases([source], settings), settings)], recorder(wall_time_s=3))
    start = time.monotonic()
    result = environment.call("execute_sql", {"sql": "SELECT length(printf('%.*c', 2147483647, 'x'))"})
    elapsed = time.monotonic() - start
    environment.close()
    assert not result.success and "wall-time limit" in (result.error or ""), result
    assert elapsed < 3 + 3.0, elapsed


def test_the_mongo_result_cap_counts_documents_as_bson():
    from data_agent_compare.tools.mongo import RESULT_MAX_BYTES, check_result_size

    check_result_size([{"text": "x" * 1000}] * 100)
    with pytest.raises(MongoQueryError, match=f"larger than {RESULT_MAX_BYTES >> 20} MB"):
        check_result_size([{"text": "x" * (1 << 20)}] * 40)


def test_a_kept_worker_that_died_meanwhile_is_replaced_when_a_database_opens() -> None:
    from data_agent_compare.tools import worker_process

    settings = ToolSettings(sql_timeout_s=TIMEOUT_S)
    source = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(FIXTURES / "regional_sales.sqlite"))
    worker_process.prestart(1)
    for child in worker_process._idle:  # killed while idle (the thread that started it ended), not yet seen dead
        child.process.kill()
        child.process.wait()
        child.process.poll = lambda: None  # type: ignore[method-assign]
    tool = SqlTool(Databases([source], settings), settings)
    try:
        assert tool.run({"sql": "SELECT 1 AS one"}).content.startswith("one\n1")
    finally:
        tool.close()
