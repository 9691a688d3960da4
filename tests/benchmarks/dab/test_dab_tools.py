"""The DAB tool profile over real data and the function-calling profile through the real runner.

DAB: bookreview's real review table (SQLite, built from its published JSON Lines) and a small
mongodump written here with bson.encode, served by the mongomock stand-in (tools.mongo).
DBGorilla: tasks of the real sample, answered by a scripted test model.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bson
import pytest

from data_agent_compare.core import ToolEnvironment, ToolError
from data_agent_compare.core.model import CallContext, Message, ModelRequest
from data_agent_compare.core.task import DataSource, DataSourceKind, Gold, QuestionType, Task
from data_agent_compare.core.trace import Phase
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.tasks.dab import build_sqlite_from_jsonl
from data_agent_compare.tools.dab import DAB_TOOL_NAMES
from data_agent_compare.tools.mongo import MongoDatabase, MongoQueryError

from helpers import FIXTURES, run_task, steps_taken
from helpers import environment as environment_of

REVIEWS = FIXTURES / "dab" / "query_bookreview" / "origin_dataset" / "review_query_remapped.json"
REVIEW_COUNT = 1833  # lines of the JSON Lines file

BOOKS = [
    {"_id": bson.ObjectId(), "book_id": 1, "title": "Dune", "year": 1965, "tags": ["sf", "classic"]},
    {"_id": bson.ObjectId(), "book_id": 2, "title": "Emma", "year": 1815, "tags": ["classic"]},
    {
        "_id": bson.ObjectId(),
        "book_id": 3,
        "title": "Neuromancer",
        "year": 1984,
        "tags": ["sf"],
        "added": dt.datetime(2020, 5, 1, 12, 0),
        "publisher": {"name": "Ace", "city": "New York"},
    },
]
LOANS = [{"book_id": 1, "days": 14}, {"book_id": 1, "days": 7}, {"book_id": 3, "days": 21}]


# ---------------------------------------------------------------- fixtures


def write_collection(folder: Path, name: str, documents: list[dict[str, Any]], *, compress: bool = False) -> None:
    data = b"".join(bson.encode(document) for document in documents)
    suffix = ".bson.gz" if compress else ".bson"
    (folder / f"{name}{suffix}").write_bytes(gzip.compress(data) if compress else data)
    (folder / f"{name}.metadata.json").write_text(json.dumps({"collectionName": name, "indexes": []}))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """review_query.db (the real reviews) and dump/bookreview_db/{books,loans}.bson, as mongodump lays them out."""
    root = tmp_path_factory.mktemp("dab")
    build_sqlite_from_jsonl(REVIEWS, root / "review_query.db", "review")
    dump = root / "dump" / "bookreview_db"
    dump.mkdir(parents=True)
    write_collection(dump, "books", BOOKS)
    write_collection(dump, "loans", LOANS, compress=True)
    (root / "ground_truth.csv").write_text(f"count\n{REVIEW_COUNT}\n")
    return root


def dab_task(root: Path, **fields: Any) -> Task:
    clients = {"books_db": {"db_type": "mongo", "db_name": "bookreview_db", "dump_folder": "dump"}}
    return Task(
        id="bookreview/query99",
        benchmark="dab",
        question="How many reviews are there?",
        question_type=QuestionType.FACTOID,
        data=[
            DataSource(name="review_db", kind=DataSourceKind.SQLITE, location=str(root / "review_query.db")),
            DataSource(name="books_db", kind=DataSourceKind.MONGO, location=str(root / "dump")),
        ],
        metadata={"dataset": "bookreview", "db_config": {"db_clients": clients}},
        gold=Gold(ground_truth_file=str(root / "ground_truth.csv")),
        **fields,
    )


@pytest.fixture
def env(data: Path) -> Iterator[ToolEnvironment]:
    environment = environment_of(dab_task(data), tool_result_max_chars=10_000)
    yield environment
    environment.close()


def query(env: ToolEnvironment, db_name: str, text: str | dict[str, Any]) -> Any:
    return env.call("query_db", {"db_name": db_name, "query": text if isinstance(text, str) else json.dumps(text)})


def python(env: ToolEnvironment, code: str) -> Any:
    return env.call("execute_python", {"code": code})


# ---------------------------------------------------------------- the profile and list_db


def test_dab_tasks_get_the_four_official_tools_and_no_listed_answer_tool(env):
    assert [spec.name for spec in env.specs()] == DAB_TOOL_NAMES
    assert env.specs(["query_db"])[0].parameters["properties"]["db_name"]["enum"] == ["review_db", "books_db"]
    # The workflows' writer steps ask for `answer` by name: they get return_answer under that name.
    (alias,) = env.specs(["answer"])
    assert alias.name == "answer" and alias.parameters == env.specs(["return_answer"])[0].parameters


def test_dab_task_with_a_source_kind_the_profile_cannot_serve_is_refused(data):
    task = dab_task(data)
    task = task.model_copy(update={"data": [*task.data, DataSource(name="bq", kind=DataSourceKind.BIGQUERY)]})
    with pytest.raises(ToolError, match=r"unsupported data source.*'bq'"):
        environment_of(task)


def test_list_db_describes_the_sqlite_tables_with_columns_and_row_counts(env):
    result = env.call("list_db", {"db_name": "review_db"})
    assert result.success
    assert f"review — {REVIEW_COUNT} rows" in result.content
    columns = {c["name"]: c["type"] for c in result.data["tables"][0]["columns"]}
    assert columns["rating"] == "INTEGER" and columns["review_time"] == "TEXT"


def test_list_db_describes_the_mongo_collections_with_their_fields(env):
    result = env.call("list_db", {"db_name": "books_db"})
    assert result.success
    assert "served by mongomock" in result.content  # the stand-in says what it is
    assert "books — 3 documents" in result.content and "loans — 3 documents" in result.content
    books = next(c for c in result.data["collections"] if c["name"] == "books")
    fields = {f["name"]: f["type"] for f in books["fields"]}
    assert fields["title"] == "string" and fields["tags"] == "array" and fields["_id"] == "ObjectId"


# ---------------------------------------------------------------- query_db


def test_query_db_sql_result_is_stored_as_a_numbered_variable(env):
    first = query(env, "review_db", "SELECT COUNT(*) AS n FROM review")
    second = query(env, "review_db", "SELECT rating, COUNT(*) AS n FROM review GROUP BY rating ORDER BY rating")
    assert first.success and first.data == {"variable": "result_1", "rows": [{"n": REVIEW_COUNT}]}
    assert first.content.startswith("stored as variable result_1 (1 rows)")
    assert second.data["variable"] == "result_2"
    assert sum(row["n"] for row in second.data["rows"]) == REVIEW_COUNT


def test_query_db_sql_keeps_every_column_of_a_self_join(env):
    result = query(
        env, "review_db", "SELECT a.rating, b.rating FROM review a JOIN review b ON a.rowid = b.rowid LIMIT 1"
    )
    assert set(result.data["rows"][0]) == {"rating", "rating_2"}


@pytest.mark.parametrize(
    "statement",
    [
        "DELETE FROM review",
        "UPDATE review SET rating = 0",
        "DROP TABLE review",
        "INSERT INTO review (rating) VALUES (1)",
        "SELECT 1; DELETE FROM review",
    ],
)
def test_query_db_sql_refuses_writes(env, statement):
    result = query(env, "review_db", statement)
    assert not result.success and "refused" in result.error
    assert query(env, "review_db", "SELECT COUNT(*) AS n FROM review").data["rows"] == [{"n": REVIEW_COUNT}]


def test_query_db_mongo_find_with_filter_projection_sort_and_limit(env):
    find = {
        "collection": "books",
        "filter": {"tags": "sf", "year": {"$gte": 1900}},
        "projection": {"_id": 0, "title": 1, "year": 1},
        "sort": {"year": -1},
        "limit": 5,
    }
    result = query(env, "books_db", find)
    assert result.success
    assert result.data["rows"] == [{"title": "Neuromancer", "year": 1984}, {"title": "Dune", "year": 1965}]


def test_query_db_mongo_values_become_plain_json(env):
    find = {"collection": "books", "filter": {"added": {"$gt": {"$date": "2020-01-01T00:00:00Z"}}}}
    (row,) = query(env, "books_db", find).data["rows"]
    assert row["_id"] == str(BOOKS[2]["_id"]) and row["added"] == "2020-05-01 12:00:00"
    assert row["publisher"] == {"name": "Ace", "city": "New York"}


def test_query_db_mongo_aggregation_pipeline_with_lookup_and_group(env):
    pipeline = [
        {"$lookup": {"from": "loans", "localField": "book_id", "foreignField": "book_id", "as": "loans"}},
        {"$unwind": "$loans"},
        {"$group": {"_id": "$title", "days": {"$sum": "$loans.days"}, "loans": {"$sum": 1}}},
        {"$sort": {"days": -1}},
    ]
    result = query(env, "books_db", {"collection": "books", "pipeline": pipeline})
    assert result.success
    assert result.data["rows"] == [
        {"_id": "Dune", "days": 21, "loans": 2},
        {"_id": "Neuromancer", "days": 21, "loans": 1},
    ]


@pytest.mark.parametrize(
    ("mongo_query", "reason"),
    [
        ({"collection": "books", "pipeline": [{"$match": {}}, {"$out": "stolen"}]}, "refused $out"),
        ({"collection": "books", "pipeline": [{"$merge": {"into": "loans"}}]}, "refused $merge"),
        ({"collection": "books", "pipeline": [{"$facet": {"a": [{"$out": "stolen"}]}}]}, "refused $out"),
        ({"collection": "books", "insert": [{"title": "x"}]}, "refused field(s) insert"),
        ({"collection": "books", "update": {"$set": {"year": 0}}}, "refused field(s) update"),
        ({"collection": "books", "filter": {"$where": "this.year > 0"}}, "refused $where"),
        ({"collection": "books", "pipeline": [], "filter": {}}, "refused field(s) filter"),
    ],
)
def test_query_db_mongo_refuses_writes_and_javascript(env, mongo_query, reason):
    result = query(env, "books_db", mongo_query)
    assert not result.success and reason in result.error
    collections = env.call("list_db", {"db_name": "books_db"}).data["collections"]
    assert [(c["name"], c["documents"]) for c in collections] == [("books", 3), ("loans", 3)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("db.books.find({})", "not valid (Extended) JSON"),
        ('{"filter": {}}', "missing collection name"),
        ('{"collection": "movies"}', "no collection 'movies'; collections: books, loans"),
        ('{"collection": "books", "limit": -1}', "limit must be a non-negative integer"),
        ('{"collection": "books", "sort": {"year": "up"}}', "sort must be"),
        ('{"collection": "books", "pipeline": [{"$bucketAuto": {}}]}', "query failed in mongomock"),
    ],
)
def test_query_db_mongo_explains_bad_queries(env, text, message):
    result = query(env, "books_db", text)
    assert not result.success and message in result.error


# ---------------------------------------------------------------- execute_python, truncation, return_answer


def test_execute_python_sees_earlier_query_results_as_variables(env):
    query(env, "review_db", "SELECT rating FROM review")
    query(env, "books_db", {"collection": "books", "projection": {"_id": 0, "title": 1}})
    result = python(env, "print(len(result_1), sum(r['rating'] for r in result_1) > 0, result_2[0]['title'])")
    assert result.success and result.content.startswith(f"{REVIEW_COUNT} True Dune\n")


def test_execute_python_errors_point_at_the_agents_code(env):
    result = python(env, "x = 1\nprint(result_1)")
    assert not result.success and "NameError" in result.error
    assert 'File "<code>", line 2, in <module>\n    print(result_1)' in result.content
    assert "main.py" not in result.content


def test_execute_python_gets_the_code_and_variables_as_files_in_its_working_folder(env):
    query(env, "books_db", {"collection": "books", "projection": {"_id": 0, "title": 1}})
    code = "import json, os, sys\nprint(sorted(os.listdir('.')), repr(sys.stdin.read()))\n"
    code += "print(json.load(open('variables.json'))['result_1'] == result_1)"
    result = python(env, code)
    assert result.success and result.content.startswith("['code.py', 'main.py', 'variables.json'] ''\nTrue\n")


def test_a_big_result_is_cut_at_the_budget_but_the_variable_keeps_every_row(env):
    result = query(env, "review_db", "SELECT * FROM review")
    assert result.success and result.truncated
    assert result.content.index("\n…[truncated:") == 10_000  # Budgets.tool_result_max_chars
    assert python(env, "print(len(result_1))").content.startswith(f"{REVIEW_COUNT}\n")


def dab_agent(request: ModelRequest, context: CallContext) -> Message:
    """Counts the reviews with query_db, checks the count in Python, returns it."""
    step = steps_taken(request)
    if step == 0:
        return tool_call_message("query_db", {"db_name": "review_db", "query": "SELECT COUNT(*) AS n FROM review"})
    if step == 1:
        return tool_call_message("execute_python", {"code": "print(result_1[0]['n'])"})
    counted = request.messages[-1].content.split()[0]
    return tool_call_message("return_answer", {"answer": counted})


def test_return_answer_ends_the_task_with_its_answer_through_the_runner(tmp_path, scripted_model, data):
    record, trace, _ = run_task(tmp_path, scripted_model(dab_agent), dab_task(data), "tool_use")
    assert record["status"] == "completed" and record["answer"]["text"] == str(REVIEW_COUNT)
    assert record["scores"]["correct"] == 1.0
    tools = [(s["tool"], s["success"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools == [("query_db", True), ("execute_python", True), ("return_answer", True)]
    assert len([s for s in trace["steps"] if s["kind"] == "model_call"]) == 3  # nothing after return_answer


def planner(request: ModelRequest, context: CallContext) -> Message:
    """Plans one count query, then answers with the tool offered to the writer step."""
    if context.phase == Phase.DECISION:
        arguments = {"db_name": "review_db", "query": "SELECT COUNT(*) AS n FROM review"}
        return Message(role="assistant", content=json.dumps({"steps": [{"tool": "query_db", "arguments": arguments}]}))
    (tool,) = request.tools
    return tool_call_message(tool.name, {"answer": str(REVIEW_COUNT)})


def test_planning_finishes_on_return_answer_through_the_answer_alias(tmp_path, scripted_model, data):
    record, trace, _ = run_task(tmp_path, scripted_model(planner), dab_task(data), "planning")
    assert record["status"] == "completed" and record["scores"]["correct"] == 1.0
    tools = [(s["tool"], s["phase"]) for s in trace["steps"] if s["kind"] == "tool_call"]
    assert tools == [("query_db", "execute"), ("return_answer", "generate")]  # recorded under its own name


# ---------------------------------------------------------------- the mongodump loader


def test_mongodump_loads_from_the_folder_itself_and_from_its_only_database_folder(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    write_collection(flat, "loans", LOANS, compress=True)
    nested = tmp_path / "nested"
    (nested / "somedb").mkdir(parents=True)
    write_collection(nested / "somedb", "books", BOOKS)
    for folder, collection, count in ((flat, "loans", 3), (nested, "books", 3)):
        database = MongoDatabase("x", folder)
        assert database.collections() == [collection] and database.count(collection) == count
        database.close()


def test_a_missing_mongodump_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="mongodump folder not found"):
        MongoDatabase("x", tmp_path / "missing")


def test_mongo_query_refuses_a_write_nested_in_a_lookup_and_caps_the_rows(tmp_path):
    folder = tmp_path / "dump"
    folder.mkdir()
    write_collection(folder, "books", BOOKS)
    database = MongoDatabase("x", folder)
    with pytest.raises(MongoQueryError, match=r"refused \$merge"):
        database.query('{"collection": "books", "pipeline": [{"$lookup": {"pipeline": [{"$merge": "x"}]}}]}', 10)
    result = database.query('{"collection": "books", "sort": [["year", 1]], "limit": 2}', 1)
    assert [d["title"] for d in result.documents] == ["Emma"] and result.more
    database.close()


# ---------------------------------------------------------------- DBGorilla through the runner
