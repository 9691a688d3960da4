"""DBGorilla and DAB loaders on the published samples (tests/fixtures/dbgorilla, tests/fixtures/dab)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from compare.task import DataSourceKind, QuestionType
from tasks.dab import build_sqlite_from_jsonl, load_dab
from tasks.dbgorilla import load_dbgorilla, query_database_spec
from tasks.errors import TaskLoadError

FIXTURES = Path(__file__).parent / "fixtures"
GORILLA = FIXTURES / "dbgorilla" / "queries-sample.json"
DAB = FIXTURES / "dab"
BOOKREVIEW = DAB / "query_bookreview"
REVIEW_DB = "query_dataset/review_query.db"
REVIEW_JSONL = "origin_dataset/review_query_remapped.json"
REVIEW_COLUMNS = ["rating", "title", "text", "review_time", "helpful_vote", "verified_purchase", "purchase_id"]
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 123456\n"


def gorilla_records() -> list[dict]:
    return json.loads(GORILLA.read_text(encoding="utf-8"))


def write_records(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.fixture
def bookreview(tmp_path: Path) -> Path:
    """A writable copy of the bookreview dataset, without the big data files unless a test adds them."""
    folder = tmp_path / "query_bookreview"
    shutil.copytree(BOOKREVIEW, folder, ignore=shutil.ignore_patterns("books_info.sql", "*.json"))
    (folder / "query_dataset" / "books_info.sql").write_text("-- stand-in dump\n", encoding="utf-8")
    for query in ("query1", "query2", "query3"):
        shutil.copy(BOOKREVIEW / query / "query.json", folder / query / "query.json")
    return folder


# ---------------------------------------------------------------- DBGorilla


def test_dbgorilla_sample_task_fields():
    tasks = {task.id: task for task in load_dbgorilla(GORILLA)}
    assert len(tasks) == 40
    assert set(tasks) == {f"dbgorilla-{record['index']}" for record in gorilla_records()}
    task = tasks["dbgorilla-6"]
    assert task.question == (
        "What romantic dining locations have an average rating greater than 4.5, "
        "and can you group them by whether they are currently open?"
    )
    assert task.question_type == QuestionType.FUNCTION_CALL
    assert task.max_steps == 1
    assert task.tools == ["query_database"]
    assert task.gold.tool_call.name == "query_database"
    assert task.gold.tool_call.arguments == {
        "collection_name": "Restaurants",
        "search_query": "romantic dining locations",
        "integer_property_filter": {"property_name": "averageRating", "operator": ">", "value": 4.5},
        "groupby_property": "openNow",
    }
    assert task.metadata["gold_query"]["target_collection"] == "Restaurants"
    assert task.metadata["gold_query"]["text_property_filter"] is None


def test_dbgorilla_tool_spec_is_built_from_the_schema():
    (spec,) = load_dbgorilla(GORILLA)[0].tool_specs
    parameters = spec["parameters"]
    assert spec["name"] == "query_database"
    assert parameters["required"] == ["collection_name"]
    assert parameters["properties"]["collection_name"]["enum"] == ["Restaurants", "Menus", "Reservations"]
    assert "- averageRating (number): The average rating score out of 5 for the restaurant." in spec["description"]
    assert "Collection Name: Reservations" in spec["description"]
    properties = parameters["properties"]
    assert properties["integer_property_filter"]["properties"]["operator"]["enum"] == ["=", "<", ">", "<=", ">="]
    assert properties["text_property_filter"]["properties"]["operator"]["enum"] == ["=", "LIKE"]
    assert properties["boolean_property_filter"]["properties"]["value"] == {"type": "boolean"}
    assert properties["text_property_aggregation"]["properties"]["top_occurrences_limit"] == {"type": "integer"}
    assert properties["boolean_property_aggregation"]["properties"]["metrics"]["enum"][-1] == "PERCENTAGE_FALSE"
    assert set(properties) == {
        "collection_name",
        "search_query",
        "integer_property_filter",
        "text_property_filter",
        "boolean_property_filter",
        "integer_property_aggregation",
        "text_property_aggregation",
        "boolean_property_aggregation",
        "groupby_property",
    }


def test_dbgorilla_every_record_enum_and_gold_arguments_match_the_file():
    for record, task in zip(gorilla_records(), load_dbgorilla(GORILLA), strict=True):
        schema = json.loads(record["database_schema"])
        names = [collection["name"] for collection in schema["weaviate_collections"]]
        assert task.tool_specs == [query_database_spec(schema)]
        assert task.tool_specs[0]["parameters"]["properties"]["collection_name"]["enum"] == names
        query = record["query"]
        expected = {key: value for key, value in query.items() if value is not None}
        expected["collection_name"] = expected.pop("target_collection")
        del expected["corresponding_natural_language_query"]
        assert task.gold.tool_call.arguments == expected
        assert task.metadata["gold_query"] == query


def test_dbgorilla_record_without_index_is_numbered_by_position(tmp_path):
    records = [{"database_schema": r["database_schema"], "query": r["query"]} for r in gorilla_records()[:3]]
    tasks = load_dbgorilla(write_records(tmp_path, records))
    assert [task.id for task in tasks] == ["dbgorilla-0", "dbgorilla-1", "dbgorilla-2"]
    assert tasks[2].question == records[2]["query"]["corresponding_natural_language_query"]


def test_dbgorilla_record_without_query_names_file_record_and_field(tmp_path):
    records = gorilla_records()[:2]
    del records[1]["query"]
    path = write_records(tmp_path, records)
    with pytest.raises(TaskLoadError) as caught:
        load_dbgorilla(path)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 1, "query")


def test_dbgorilla_schema_that_is_not_json_names_the_field(tmp_path):
    records = gorilla_records()[:1]
    records[0]["database_schema"] = '{"weaviate_collections": ['
    path = write_records(tmp_path, records)
    with pytest.raises(TaskLoadError, match="invalid JSON") as caught:
        load_dbgorilla(path)
    assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 0, "database_schema")


def test_dbgorilla_bad_nested_fields_get_dotted_paths(tmp_path):
    records = gorilla_records()[:1]
    records[0]["query"]["text_property_filter"] = "name = 'x'"
    with pytest.raises(TaskLoadError) as caught:
        load_dbgorilla(write_records(tmp_path, records))
    assert caught.value.field == "query.text_property_filter"
    records = gorilla_records()[:1]
    schema = json.loads(records[0]["database_schema"])
    schema["weaviate_collections"][1]["properties"][2]["data_type"] = "number"
    records[0]["database_schema"] = json.dumps(schema)
    with pytest.raises(TaskLoadError) as caught:
        load_dbgorilla(write_records(tmp_path, records))
    assert caught.value.field == "database_schema.weaviate_collections.1.properties.2.data_type"


# ---------------------------------------------------------------- DAB


def test_dab_bookreview_tasks():
    tasks = load_dab(BOOKREVIEW)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    first, second, third = tasks
    assert first.question == (
        "Which decade of publication (e.g., 1980s) has the highest average rating among decades with at least 10 "
        "distinct books that have been rated? Return the decade with the highest average rating."
    )
    assert third.question == (
        "Which books categorized as 'Children's Books' have received an average rating of at least 4.5 "
        "based on reviews from 2020 onwards?"
    )
    assert all(task.question_type == QuestionType.FACTOID and task.benchmark == "dab" for task in tasks)
    root = BOOKREVIEW.resolve()
    assert first.gold.ground_truth_file == str(root / "query1" / "ground_truth.csv")
    assert Path(first.gold.ground_truth_file).read_text(encoding="utf-8").strip() == "2020"
    assert Path(second.gold.ground_truth_file).read_text(encoding="utf-8").splitlines()[0] == "The Sludge"
    assert first.gold.validator is None  # the sample ships no validate.py
    books, reviews = first.data
    assert (books.name, books.kind, books.location) == (
        "books_dataset",
        DataSourceKind.POSTGRES,
        str(root / "query_dataset" / "books_info.sql"),
    )
    assert "bookreview_db" in books.description
    assert (reviews.name, reviews.kind, reviews.location) == (
        "review_dataset",
        DataSourceKind.SQLITE,
        str(root / REVIEW_DB),
    )
    assert first.metadata["dataset"] == "bookreview"
    assert first.metadata["db_description"] == (BOOKREVIEW / "db_description.txt").read_text(encoding="utf-8")
    assert first.metadata["db_config"]["db_clients"]["books_dataset"]["db_name"] == "bookreview_db"


def test_dab_sample_without_review_db_is_unavailable_not_an_error():
    # The published sample has no review_query.db: every query loads, marked unavailable.
    for task in load_dab(BOOKREVIEW):
        assert task.unavailable == f"review_dataset: {BOOKREVIEW.resolve() / REVIEW_DB} is missing"


def test_dab_parent_folder_and_hints():
    tasks = load_dab(DAB, hints=True)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    description = tasks[0].metadata["db_description"]
    assert description == (BOOKREVIEW / "db_description_withhint.txt").read_text(encoding="utf-8")
    assert "### Hint:" in description


def test_dab_only_query_digit_folders_are_queries_and_validator_is_found(bookreview):
    abandoned = bookreview / "query2_abandon"
    abandoned.mkdir()
    (abandoned / "query.json").write_text('"an abandoned question"', encoding="utf-8")
    (abandoned / "ground_truth.csv").write_text("x\n", encoding="utf-8")
    (bookreview / "query1" / "validate.py").write_text("def validate(llm_output):\n    return True, ''\n")
    tasks = load_dab(bookreview)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    assert tasks[0].gold.validator == str(bookreview.resolve() / "query1" / "validate.py")


def test_dab_build_missing_makes_the_queries_available(bookreview):
    shutil.copy(BOOKREVIEW / REVIEW_JSONL, bookreview / REVIEW_JSONL)
    assert all(task.unavailable for task in load_dab(bookreview))  # the loader never writes unasked
    assert not (bookreview / REVIEW_DB).exists()
    tasks = load_dab(bookreview, build_missing=True)
    assert (bookreview / REVIEW_DB).is_file()
    assert [task.unavailable for task in tasks] == [None, None, None]


def test_dab_lfs_pointer_makes_the_queries_unavailable(bookreview):
    (bookreview / REVIEW_DB).write_text(LFS_POINTER, encoding="utf-8")
    for task in load_dab(bookreview):
        assert task.unavailable is not None
        assert task.unavailable.startswith("review_dataset:") and "Git LFS pointer" in task.unavailable


def test_sqlite_built_from_json_lines(tmp_path):
    out = tmp_path / "review_query.db"
    build_sqlite_from_jsonl(BOOKREVIEW / REVIEW_JSONL, out, "review")
    con = sqlite3.connect(out)
    try:
        columns = {row[1]: row[2] for row in con.execute("PRAGMA table_info(review)")}
        count = con.execute("SELECT COUNT(*) FROM review").fetchone()[0]
        first = con.execute("SELECT rating, review_time, verified_purchase, purchase_id FROM review LIMIT 1").fetchone()
        stored = con.execute("SELECT DISTINCT typeof(review_time) FROM review").fetchall()
    finally:
        con.close()
    assert list(columns) == REVIEW_COLUMNS
    assert columns["review_time"] == "TEXT"
    assert columns["rating"] == "INTEGER" and columns["verified_purchase"] == "INTEGER"
    assert count == 1833
    assert first == (4, "November 24, 2012 at 06:52 PM", 0, "purchaseid_186")
    assert stored == [("text",)]


def test_dab_unknown_db_type_names_the_config_field(bookreview):
    config = bookreview / "db_config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("db_type: sqlite", "db_type: oracle"))
    with pytest.raises(TaskLoadError, match="oracle") as caught:
        load_dab(bookreview)
    assert (caught.value.file, caught.value.field) == (str(config.resolve()), "db_clients.review_dataset.db_type")


def test_dab_malformed_query_json_names_the_file(bookreview):
    query = bookreview / "query2" / "query.json"
    query.write_text('"Which books have', encoding="utf-8")
    with pytest.raises(TaskLoadError, match="invalid JSON") as caught:
        load_dab(bookreview)
    assert caught.value.file == str(query.resolve())


def test_dab_missing_db_config_is_an_error(bookreview):
    (bookreview / "db_config.yaml").unlink()
    with pytest.raises(TaskLoadError, match="file not found") as caught:
        load_dab(bookreview)
    assert caught.value.file == str((bookreview / "db_config.yaml").resolve())
