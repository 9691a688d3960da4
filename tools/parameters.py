"""A tool's parameters as a typed pydantic model, and the JSON schema the model is offered for it.

A tool declares its arguments as a `Parameters` subclass (a field per argument: its type,
constraints and description; a default makes it optional) and sets `parameters =
parameters_schema(TheModel)`. Settings known only when the tool is built (the task's database
names, a configured maximum) go in with `with_fields`.

The schema is plain JSON Schema as models read it: no titles, no `$defs`, no defaults (the tool
applies them), an optional `T | None` offered as `T`, a Literal as `{"type": "string", "enum":
[...]}` whatever its length, and the keys in one fixed order. That order is part of every cached
and replayed request's key (providers/cache.py `request_key` serializes the tools as they are), so
it is the order the hand-written schemas had: tests/tools/test_tool_schemas.py holds them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue, WithJsonSchema
from pydantic_core import core_schema

_TOP_LEVEL_ORDER = ("type", "properties", "required", "additionalProperties")
_PROPERTY_ORDER = ("type", "items", "enum", "minimum", "maximum", "minItems", "uniqueItems", "description")
_DROPPED = {"title", "default"}


class Parameters(BaseModel):
    """The arguments of one tool; an argument the model does not declare is refused."""

    model_config = ConfigDict(extra="forbid")


class _OfferedSchema(GenerateJsonSchema):
    def nullable_schema(self, schema: core_schema.NullableSchema) -> JsonSchemaValue:
        # `x: str | None = None` is an argument one may leave out; null is not offered as a value
        return self.generate_inner(schema["schema"])

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        values = list(schema["expected"])
        if not all(isinstance(value, str) for value in values):
            return super().literal_schema(schema)
        return {"type": "string", "enum": values}  # pydantic writes one value as `const`


def parameters_schema(model: type[Parameters]) -> dict[str, Any]:
    """The JSON schema of `model`'s fields as a tool's `parameters`; `required` only when some
    field has no default."""
    schema = model.model_json_schema(schema_generator=_OfferedSchema)
    if "$defs" in schema:
        raise TypeError(f"{model.__name__}: nested models are not offered to models; use plain field types")
    schema["properties"] = {name: _ordered(prop, _PROPERTY_ORDER) for name, prop in schema["properties"].items()}
    return _ordered(schema, _TOP_LEVEL_ORDER)


def _ordered(schema: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    kept = {key: value for key, value in schema.items() if key not in _DROPPED}
    if "items" in kept:
        kept["items"] = _ordered(kept["items"], _PROPERTY_ORDER)
    unknown = kept.keys() - set(order)
    if unknown:  # a key without a place would land in pydantic's order, which may change between releases
        raise TypeError(f"parameter schema keys without a fixed place: {sorted(unknown)}")
    return {key: kept[key] for key in order if key in kept}


def with_fields(model: type[Parameters], **fields: tuple[Any, FieldInfo]) -> type[Parameters]:
    """`model` with `fields` (name: (type, Field(...))) added or replaced, in `model`'s field order
    (new fields last): for what is known only when the tool is built."""
    return create_model(model.__name__, __base__=model, **fields)  # type: ignore[call-overload,no-any-return]


def one_of_field(values: list[str], description: str, *, required: bool) -> tuple[Any, FieldInfo]:
    """A field for `with_fields`: a string argument that must be one of `values`."""
    return one_of(values), Field(... if required else None, description=description)


def one_of(values: list[str]) -> Any:
    """The type of a string argument that must be one of `values` (a Literal of them; with no values,
    a string that the offered `"enum": []` lets no call give)."""
    if not values:
        return Annotated[str, WithJsonSchema({"type": "string", "enum": []})]
    return Literal[tuple(values)]
