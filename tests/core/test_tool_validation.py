"""Tool arguments are validated by a validator cached per schema: still every error, named by field."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from data_agent_compare.core import ToolEnvironment
from data_agent_compare.core.tool import Tool, ToolResult, _validator, validation_error

from helpers import recorder

SCHEMA = {
    "type": "object",
    "properties": {"sql": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["sql"],
    "additionalProperties": False,
}


class Echo(Tool):
    name = "echo"
    description = "Echoes its SQL."

    def __init__(self) -> None:
        self.parameters = dict(SCHEMA)  # a new dict per instance, as the built-in tools build theirs per task

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(success=True, content=arguments["sql"])


@pytest.mark.parametrize(
    "arguments",
    [{"sql": 1}, {"sql": "x", "limit": 0}, {}, {"sql": "x", "extra": 1}, {"sql": 2, "limit": "a"}, {"sql": "ok"}],
)
def test_the_cached_validator_finds_what_jsonschema_validate_finds(arguments: dict[str, Any]) -> None:
    try:
        jsonschema.validate(arguments, SCHEMA)
        expected = None
    except jsonschema.ValidationError as error:
        expected = (error.message, list(error.absolute_path))
    found = validation_error(arguments, SCHEMA)
    assert (found and (found.message, list(found.absolute_path))) == expected


def test_a_bad_argument_is_named_and_the_validator_is_built_once_per_schema() -> None:
    _validator.cache_clear()
    for _ in range(3):  # three tasks, three tool instances with equal schemas
        env = ToolEnvironment([Echo()], recorder())
        result = env.call("echo", {"sql": 42})
        assert not result.success
        assert result.error == "invalid arguments for echo at sql: 42 is not of type 'string'"
        assert env.call("echo", {"sql": "SELECT 1"}).content == "SELECT 1"
    assert _validator.cache_info().misses == 1 and _validator.cache_info().hits == 5


def test_an_invalid_schema_still_fails_loudly() -> None:
    with pytest.raises(jsonschema.SchemaError):
        validation_error({}, {"type": "no-such-type"})
