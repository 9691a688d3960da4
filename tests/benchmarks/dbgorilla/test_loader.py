"""The DBGorilla loader on the published sample (tests/fixtures/dbgorilla)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.core.task import QuestionType
from data_agent_compare.tasks.dbgorilla import load_dbgorilla, query_database_spec

from helpers import FIXTURES

GORILLA = FIXTURES / "dbgorilla" / "queries-sample.json"


def gorilla_records() -> list[dict]:
    return json.loads(GORILLA.read_text(encoding="utf-8"))


def write_records(tmp_path: Path, records: list) -> Path:
    path = tmp_path / "queries.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


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
