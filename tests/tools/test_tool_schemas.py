"""The parameter schemas the model is offered for each tool: derived from typed parameter models, and
byte for byte what the hand-written JSON was (property names, types, required, descriptions, key
order), so that the cache and replay keys of recorded runs stay the same."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import duckdb
import pytest
from pydantic import Field

from data_agent_compare.core.model import ModelRequest
from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.core.tool import Tool, ToolSettings
from data_agent_compare.providers.cache import request_key
from data_agent_compare.tools import documents
from data_agent_compare.tools.answer import AnswerTool
from data_agent_compare.tools.dab import (
    DabDatabases,
    DabPythonTool,
    ListDbTool,
    QueryDbTool,
    ResultStore,
    ReturnAnswerTool,
)
from data_agent_compare.tools.files import ListFilesTool, ReadFileTool
from data_agent_compare.tools.frozen_search import FrozenSearchTool
from data_agent_compare.tools.parameters import Parameters, one_of_field, parameters_schema, with_fields
from data_agent_compare.tools.python_sandbox import PythonTool
from data_agent_compare.tools.sql import Databases, SchemaTool, SqlTool

from helpers import FIXTURES, QUESTION, SCRIPTED

# Written from the hand-written schemas (commit dbcfc64, before the parameter models): one entry per
# tool and configuration, the spec as `ToolSpec.model_dump_json` gives it, and the cache key of a request
# offering all of them.
RECORDED = FIXTURES / "tool_schemas.json"
SETTINGS = ToolSettings(file_max_bytes=32_000, search_top_k=7)


class _NoMongo:
    def close(self) -> None:
        pass


def _sources(tmp_path: Path) -> list[DataSource]:
    sqlite = tmp_path / "sales.sqlite"
    shutil.copy(FIXTURES / "regional_sales.sqlite", sqlite)
    with duckdb.connect(str(tmp_path / "shop.duckdb")) as con:
        con.execute("CREATE TABLE x (a INTEGER)")
    return [
        DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(sqlite)),
        DataSource(name="shop", kind=DataSourceKind.DUCKDB, location=str(tmp_path / "shop.duckdb")),
    ]


def _task(question_type: QuestionType, data: list[DataSource] | None = None) -> Task:
    options = {"A": "one", "B": "two", "C": "three"} if "choice" in question_type else None
    return Task(id="t", benchmark="test", question="?", question_type=question_type, options=options, data=data or [])


def offered_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Tool]]:
    """Every tool of tools/ with a schema of its own, in each configuration that changes the schema."""
    monkeypatch.setattr(documents, "load_index", lambda files, cache_dir: (None, False))
    monkeypatch.setattr(documents, "embedding_model", lambda: None)
    sources = _sources(tmp_path)
    one, two = Databases(sources[:1], SETTINGS), Databases(sources, SETTINGS)
    try:
        for label, databases in (("one database", one), ("two databases", two)):
            yield f"get_schema_info, {label}", SchemaTool(databases, SETTINGS)
            yield f"execute_sql, {label}", SqlTool(databases, SETTINGS)
        yield "search_documents", documents.DocumentSearchTool([], SETTINGS)
        yield "list_files", ListFilesTool(tmp_path)
        yield "read_file", ReadFileTool(tmp_path, SETTINGS)
        yield "execute_python", PythonTool(SETTINGS, tmp_path)
        yield "frozen_web_search", FrozenSearchTool("web_search", ["recorded"])
        for question_type in QuestionType:
            yield f"answer, {question_type}", AnswerTool(_task(question_type))
        task = _task(QuestionType.FACTOID, [*sources, DataSource(name="reviews", kind=DataSourceKind.MONGO)])
        dab = DabDatabases(task, two, {"reviews": _NoMongo()})  # type: ignore[dict-item]
        store = ResultStore()
        yield "list_db", ListDbTool(dab)
        yield "query_db", QueryDbTool(dab, store)
        yield "execute_python, DAB", DabPythonTool(SETTINGS, store)
        yield "return_answer", ReturnAnswerTool(task)
    finally:
        one.close()
        two.close()


def offered_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    tools = dict(offered_tools(tmp_path, monkeypatch))
    request = ModelRequest(messages=QUESTION, tools=[tool.spec() for tool in tools.values()])
    return {
        "specs": {label: tool.spec().model_dump_json() for label, tool in tools.items()},
        "request_key": request_key(request, SCRIPTED),
    }


def test_every_tool_offers_the_schema_recorded_runs_were_made_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorded = json.loads(RECORDED.read_text())
    offered = offered_specs(tmp_path, monkeypatch)
    assert offered["specs"].keys() == recorded["specs"].keys()
    for label, spec in offered["specs"].items():
        assert spec == recorded["specs"][label], label  # a string: key order counts, as in the cache key
    assert offered["request_key"] == recorded["request_key"]


class Example(Parameters):
    name: str = Field(description="A name.")
    limit: int | None = Field(None, ge=1, le=9)
    mode: Literal["fast"] = "fast"


def test_a_parameter_model_offers_optional_arguments_as_their_type_and_literals_as_enums() -> None:
    assert parameters_schema(Example) == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "A name."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 9},
            "mode": {"type": "string", "enum": ["fast"]},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    with_choice = with_fields(Example, mode=one_of_field(["a", "b"], "How.", required=True))
    assert list(parameters_schema(with_choice)["properties"]) == ["name", "limit", "mode"]
    assert parameters_schema(with_choice)["required"] == ["name", "mode"]


def test_a_parameter_model_whose_schema_has_no_fixed_form_is_refused() -> None:
    class Nested(Parameters):
        inner: Example

    class Unordered(Parameters):
        pattern: str = Field(pattern="^a")

    with pytest.raises(TypeError, match="nested models"):
        parameters_schema(Nested)
    with pytest.raises(TypeError, match="pattern"):
        parameters_schema(Unordered)
