"""Run configuration: configs/defaults.yaml, then `--config FILE`, then command-line flags.

Model aliases resolve through configs/models.yaml. Ad-hoc OpenAI-compatible models
can be named on the command line as `openai-compatible:<model id>` with `--base-url`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from compare.model import ModelConfig
from compare.tools.base import ToolSettings
from compare.trace import Budgets

PROJECT_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = PROJECT_ROOT / "configs"
OPENAI_COMPATIBLE_PREFIX = "openai-compatible:"


class ConfigError(Exception):
    """A configuration problem the user must fix; the CLI exits with status 2."""


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workflows: list[str] = Field(default_factory=lambda: ["tool_use"])
    models: list[str] = Field(default_factory=lambda: ["local"])
    benchmark: str = "bundled"
    tasks_path: str | None = None
    limit: int | None = Field(default=None, ge=1)
    task_ids: list[str] | None = None
    hints: bool = False  # DAB: dataset descriptions with hints
    levels: list[str] | None = None  # only tasks of these levels
    question_types: list[str] | None = None  # only tasks of these question types
    epochs: int = Field(default=1, ge=1)
    concurrency: int = Field(default=1, ge=1)
    out: str | None = None
    judge: str | None = None  # model alias of the LLM judge for report rubrics; None: no judge
    postgres_url: str | None = None  # a server for DAB's PostgreSQL dumps; None: a throw-away local one
    base_url: str | None = None  # for openai-compatible:<id> models named on the command line
    api_key_env: str | None = None
    budgets: Budgets = Field(default_factory=Budgets)
    tools: ToolSettings = Field(default_factory=ToolSettings)


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as missing:
        raise ConfigError(f"config file not found: {path}") from missing
    except yaml.YAMLError as bad:
        raise ConfigError(f"{path}: not valid YAML: {bad}") from bad
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Nested dict merge: override's keys win; nested mappings are merged, not replaced."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def load_run_config(config_file: Path | None, overrides: dict[str, Any]) -> RunConfig:
    """defaults.yaml < the benchmark's own defaults (benchmarks.yaml) < config file < flags
    (flags given as None are not set)."""
    settings = read_yaml(CONFIG_DIR / "defaults.yaml")
    source = CONFIG_DIR / "defaults.yaml"
    user = read_yaml(config_file) if config_file is not None else {}
    flags = {k: v for k, v in overrides.items() if v is not None}
    benchmark = flags.get("benchmark", user.get("benchmark", settings.get("benchmark")))
    benchmark_defaults = (read_yaml(CONFIG_DIR / "benchmarks.yaml").get("benchmarks") or {}).get(benchmark) or {}
    settings = merge(settings, benchmark_defaults)
    if config_file is not None:
        settings = merge(settings, user)
        source = config_file
    settings = merge(settings, flags)
    try:
        return RunConfig.model_validate(settings)
    except ValidationError as invalid:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in invalid.errors())
        raise ConfigError(f"invalid configuration (from {source} and flags): {problems}") from invalid


def load_model_table(path: Path | None = None) -> dict[str, ModelConfig]:
    path = path or CONFIG_DIR / "models.yaml"
    entries = read_yaml(path).get("models") or {}
    table: dict[str, ModelConfig] = {}
    for alias, entry in entries.items():
        try:
            table[alias] = ModelConfig.model_validate({"alias": alias, **entry})
        except ValidationError as invalid:
            raise ConfigError(f"{path}: model {alias!r}: {invalid.errors()[0]['msg']}") from invalid
    return table


def resolve_models(names: list[str], run: RunConfig) -> list[ModelConfig]:
    table = load_model_table()
    resolved = []
    for name in names:
        if name.startswith(OPENAI_COMPATIBLE_PREFIX):
            resolved.append(_ad_hoc_model(name, run))
        elif name in table:
            resolved.append(table[name])
        else:
            valid = ", ".join([*sorted(table), f"{OPENAI_COMPATIBLE_PREFIX}<model id> (with --base-url)"])
            raise ConfigError(f"unknown model {name!r}; valid models: {valid}")
    return resolved


def _ad_hoc_model(name: str, run: RunConfig) -> ModelConfig:
    model_id = name.removeprefix(OPENAI_COMPATIBLE_PREFIX)
    if not model_id or not run.base_url:
        raise ConfigError(f"{name!r} needs a model id after the colon and --base-url (e.g. http://127.0.0.1:8000/v1)")
    return ModelConfig(
        alias=name, provider="openai-compatible", model_id=model_id, base_url=run.base_url, api_key_env=run.api_key_env
    )


def missing_api_keys(models: list[ModelConfig]) -> dict[str, list[str]]:
    """Environment variables that must be set for these models, and which models need each."""
    missing: dict[str, list[str]] = {}
    for model in models:
        needs_key = model.provider == "openrouter" or (model.provider == "openai-compatible" and model.api_key_env)
        variable = model.api_key_env or ("OPENROUTER_API_KEY" if model.provider == "openrouter" else None)
        if needs_key and variable and not os.environ.get(variable):
            missing.setdefault(variable, []).append(model.alias)
    return missing
