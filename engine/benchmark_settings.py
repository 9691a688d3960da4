"""Each benchmark's own run settings, inside the run configuration but declared by the benchmark.

A benchmark declares its settings as a pydantic model (`settings_model`, e.g. DAB's hints and
PostgreSQL servers) and, optionally, the flags and old top-level config keys that set them
(`settings_aliases`: key -> field). In the run configuration they live under the benchmark's name:
`dab: {hints: true}` in a config file, `benchmark_settings: {dab: {...}}` as `RunConfig` holds and
the manifest records them. The run's benchmark always gets its section, so the manifest records
its defaults too; a setting given for another benchmark is refused (exit 2), not ignored.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from pydantic import AliasChoices, BaseModel, ValidationError

from ..core.benchmark import BENCHMARKS
from ..core.registry import RegistryError

SECTIONS = "benchmark_settings"


class BenchmarkSettingsError(Exception):
    """A benchmark setting the run cannot take; the message is one line. Not a ValueError, so that
    pydantic lets it through a validator unwrapped (the CLI turns it into exit 2)."""


def input_keys(model: type[BaseModel]) -> set[str]:
    """The keys a model's input may use: its field names and their validation aliases."""
    keys = set(model.model_fields)
    for field in model.model_fields.values():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias] if alias is not None else []
        keys |= {choice for choice in choices if isinstance(choice, str)}
    return keys


def gather(data: Any, known_keys: Collection[str], default_benchmark: str) -> Any:
    """`data` (a run configuration's input) with every benchmark setting moved under SECTIONS and the
    run's benchmark's section validated into its settings model. Old top-level keys (aliases) win
    over a section's keys: the flags set them."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    benchmark = str(data.get("benchmark") or default_benchmark)
    sections = {str(name): dict(_mapping(name, value)) for name, value in (data.pop(SECTIONS, None) or {}).items()}
    for key in [key for key in data if key not in known_keys and settings_model(key) is not None]:
        sections[key] = {**sections.get(key, {}), **_mapping(key, data.pop(key))}
    unknown = [key for key in data if key not in known_keys]
    owners = alias_owners() if unknown else {}
    given_as: dict[tuple[str, str], str] = {}
    for key in [key for key in unknown if key in owners]:
        name, field = owners[key]
        sections.setdefault(name, {})[field] = data.pop(key)
        given_as[name, field] = key
    refuse_foreign(sections, benchmark, given_as)
    model = settings_model(benchmark)
    data[SECTIONS] = {benchmark: validated(benchmark, model, sections.get(benchmark, {}))} if model else {}
    return data


def settings_model(name: str) -> type[BaseModel] | None:
    """The settings model benchmark `name` declares; None for a name that is no benchmark or declares none."""
    if name not in BENCHMARKS:
        return None
    try:
        model = getattr(BENCHMARKS.load(name), "settings_model", None)
    except RegistryError as error:
        raise BenchmarkSettingsError(str(error)) from error
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def alias_owners() -> dict[str, tuple[str, str]]:
    """Every registered benchmark's aliases: key -> (benchmark, field)."""
    owners: dict[str, tuple[str, str]] = {}
    for name in BENCHMARKS.names():
        try:
            aliases = getattr(BENCHMARKS.load(name), "settings_aliases", None) or {}
        except RegistryError:
            continue  # a broken plugin is reported when the run loads it
        owners |= {key: (name, field) for key, field in aliases.items()}
    return owners


def refuse_foreign(sections: dict[str, dict[str, Any]], benchmark: str, given_as: dict[tuple[str, str], str]) -> None:
    """A section of another benchmark may only hold that benchmark's defaults (a shared config file)."""
    for name, section in sections.items():
        if name == benchmark:
            continue
        model = settings_model(name)
        if model is None:
            raise BenchmarkSettingsError(f"{SECTIONS}.{name}: no benchmark {name!r} declares settings")
        defaults = model().model_dump()
        for field, value in validated(name, model, section).model_dump().items():
            if value != defaults[field]:
                raise BenchmarkSettingsError(
                    f"{_named(name, field, given_as)} applies only to --benchmark {name}, and this run's benchmark is"
                    f" {benchmark!r}: drop it"
                )


def validated(name: str, model: type[BaseModel], section: dict[str, Any]) -> BaseModel:
    """The section as `model` (a password the manifest masked stays masked: the benchmark asks for it
    when it needs it, a rescore does not)."""
    try:
        return model.model_validate(section)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        where = ".".join(map(str, (name, *error["loc"])))
        raise BenchmarkSettingsError(f"{where}: {str(error['msg']).removeprefix('Value error, ')}") from None


def _named(name: str, field: str, given_as: dict[tuple[str, str], str]) -> str:
    """How the user set `field`: its flag (`--hints`) when it has an alias, else `name.field`."""
    aliases = getattr(BENCHMARKS.load(name), "settings_aliases", None) or {}
    key = given_as.get((name, field)) or next((k for k, f in aliases.items() if f == field), None)
    return f"--{key.replace('_', '-')} ({name}.{field})" if key else f"{name}.{field}"


def _mapping(name: object, value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BenchmarkSettingsError(f"{name}: expected a mapping of the benchmark's settings, got {value!r}")
    return value
