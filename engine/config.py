"""Run configuration: configs/defaults.yaml, then the benchmark's harness, then `--config FILE`,
then command-line flags.

The defaults ship inside the package (`data_agent_compare/configs/`), so an installed suite
works from any directory. Model aliases resolve through configs/models.yaml; ad-hoc
OpenAI-compatible models can be named on the command line as `openai-compatible:<model id>`
with `--base-url`.
"""

from __future__ import annotations

import importlib
import importlib.resources
import os
import runpy
import traceback
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, SerializeAsAny, ValidationError, model_validator

from ..core.benchmark import BENCHMARKS
from ..core.limits import RateLimit
from ..core.model import PROVIDERS, GenerationSettings, ModelConfig, RetrySettings
from ..core.registry import RegistryError
from ..core.runlog import register_secret
from ..core.safe_load import DocumentTooComplex, load_yaml
from ..core.task import Task
from ..core.tool import ToolSettings
from ..core.trace import Budgets
from .benchmark_settings import SECTIONS, BenchmarkSettingsError, alias_owners, gather, input_keys, settings_model

OPENAI_COMPATIBLE_PREFIX = "openai-compatible:"


class ConfigError(Exception):
    """A configuration problem the user must fix; the CLI exits with status 2."""


class CacheSettings(BaseModel):
    """The response cache (`providers/cache.py`); off by default, since a cached call measures no model."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False  # `--cache`
    dir: str | None = None  # default: $XDG_CACHE_HOME/data-agent-compare/responses (~/.cache/...)


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # The systems under test (`workflows:` is the key's old name, still read) and their parameters by system
    # (`--system-arg NAME.KEY=VALUE`, or `systems: {NAME: {args: {KEY: VALUE}}}`).
    systems: list[str] = Field(
        default_factory=lambda: ["tool_use"], validation_alias=AliasChoices("systems", "workflows")
    )
    system_args: dict[str, dict[str, Any]] = Field(default_factory=dict)
    models: list[str] = Field(default_factory=lambda: ["local"])
    models_file: str | None = None  # a YAML alias table of your own, over configs/models.yaml
    benchmark: str = "bundled"
    tasks_path: str | None = None
    limit: int | None = Field(default=None, ge=1, strict=True)  # strict: `true` is no count
    task_ids: list[str] | None = None
    levels: list[str] | None = None  # only tasks of these levels
    question_types: list[str] | None = None  # only tasks of these question types
    epochs: int = Field(default=1, ge=1, strict=True)
    concurrency: int | None = Field(default=None, ge=1, strict=True)  # None: by the models' providers (RunPlan)
    out: str | None = None
    label: str | None = None  # the run's name in a report of several runs (default: its folder's name)
    judge: str | None = None  # model alias of the LLM judge for report rubrics; None: no judge
    base_url: str | None = None  # for openai-compatible:<id> models named on the command line
    api_key_env: str | None = None
    plugins: list[str] = Field(default_factory=list)  # modules or .py files that register systems, benchmarks, ...
    budgets: Budgets = Field(default_factory=Budgets)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    retries: RetrySettings = Field(default_factory=RetrySettings)  # every model call, every provider
    # Sampling of every request of every system (unset: removed, the provider's default), and of the judge.
    generation: GenerationSettings = Field(default_factory=GenerationSettings)
    judge_generation: GenerationSettings = Field(default_factory=lambda: GenerationSettings(temperature=0.0))
    # `--strict-answers`: an answer flagged as hedged (it lists many candidates) scores as wrong (docs/scoring.md)
    strict_answers: bool = False
    cache: CacheSettings = Field(default_factory=CacheSettings)
    # Requests/tokens per minute by provider name or model alias (`core/limits.py`).
    limits: dict[str, RateLimit] = Field(default_factory=dict)
    # Where units run (`engine/executors.py`); auto: worker processes when a run is CPU-bound, else threads.
    executor: Literal["auto", "thread", "process", "ray"] = "auto"
    workers: int | None = Field(default=None, ge=1, strict=True)  # `--executor process`: None = one per core
    ray_address: str | None = None  # `--executor ray`: a cluster to join; None starts a local one
    # The run's benchmark's own settings (`Benchmark.settings_model`, engine/benchmark_settings.py), under its
    # name: `dab: {hints: true}` in a config file; old top-level keys and flags (`--hints`) still set them.
    benchmark_settings: dict[str, SerializeAsAny[BaseModel]] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _gather_benchmark_settings(cls, data: Any) -> Any:
        try:
            return gather(data, input_keys(cls), cls.model_fields["benchmark"].default)
        except BenchmarkSettingsError as refused:
            raise ConfigError(str(refused)) from None

    @property
    def workflows(self) -> list[str]:
        """The old name of `systems`."""
        return self.systems

    def benchmark_options(self) -> dict[str, Any]:
        """The settings the run's benchmark declares (`Benchmark.__init__`), passwords and all."""
        settings = self.benchmark_settings.get(self.benchmark)
        return dict(settings) if settings is not None else {}


def config_text(name: str) -> str:
    """A file of the shipped configs/ folder."""
    return (importlib.resources.files("data_agent_compare") / "configs" / name).read_text(encoding="utf-8")


def read_yaml(path: Path | None = None, *, shipped: str | None = None) -> dict[str, Any]:
    """A YAML mapping from `path`, or from the shipped configs file `shipped`."""
    source = str(path) if path is not None else f"configs/{shipped}"
    try:
        text = path.read_text(encoding="utf-8") if path is not None else config_text(str(shipped))
        data = load_yaml(text)
    except DocumentTooComplex as bad:
        raise ConfigError(f"{source}: refused: {bad}") from None
    except FileNotFoundError as missing:
        raise ConfigError(f"config file not found: {source}") from missing
    except UnicodeDecodeError as bad:
        byte = bad.object[bad.start]
        raise ConfigError(f"{source}: not UTF-8 text: byte 0x{byte:02x} at offset {bad.start}") from bad
    except OSError as bad:
        raise ConfigError(f"{source}: cannot be read: {bad.strerror or bad}") from bad
    except yaml.YAMLError as bad:
        raise ConfigError(f"{source}: not valid YAML: {bad}") from bad
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping at the top level")
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
    """defaults.yaml < the benchmark's harness (`Benchmark.harness`) < config file < flags
    (flags given as None are not set). Plugins are imported first: they may add the benchmark."""
    source = "configs/defaults.yaml"
    settings = named_systems(read_yaml(shipped="defaults.yaml"), source)
    user = named_systems(read_yaml(config_file), str(config_file)) if config_file is not None else {}
    flags = named_systems({k: v for k, v in overrides.items() if v is not None}, "the flags")
    if user.get("plugins"):
        user["plugins"] = absolute_plugins(user["plugins"], config_file.parent if config_file else Path.cwd())
    if flags.get("plugins"):
        flags["plugins"] = absolute_plugins(flags["plugins"], Path.cwd())
    load_plugins(flags.get("plugins", user.get("plugins", settings.get("plugins"))) or [])
    benchmark = flags.get("benchmark", user.get("benchmark", settings.get("benchmark")))
    settings = merge(settings, named_systems(benchmark_harness(benchmark), f"the {benchmark} harness"))
    if config_file is not None:
        settings = merge(settings, user)
        source = str(config_file)
    settings = merge(settings, flags)
    try:
        return RunConfig.model_validate(settings)
    except ValidationError as invalid:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in invalid.errors())
        raise ConfigError(f"invalid configuration (from {source} and flags): {problems}") from invalid


PLUGIN_FILES = (".py", ".yaml", ".yml")


def absolute_plugins(plugins: Any, base: Path) -> Any:
    """Plugin files as absolute paths, so that `resume`, `replay` and `rescore` find them from any folder (the
    manifest records them so): a config file's relative to its folder (else the working one, as before), a
    flag's relative to the working folder. Module names stay as they are."""
    if not isinstance(plugins, list):
        return plugins  # RunConfig refuses it, naming the field
    resolved = []
    for plugin in plugins:
        if isinstance(plugin, str) and plugin.endswith(PLUGIN_FILES) and not Path(plugin).is_absolute():
            near = (base / plugin).resolve()
            plugin = str(near if near.exists() or not Path(plugin).exists() else Path(plugin).resolve())
        resolved.append(plugin)
    return resolved


def named_systems(layer: dict[str, Any], source: str) -> dict[str, Any]:
    """One layer of the configuration with its systems under `systems:` (`workflows:`, the old name, read as it),
    and `systems: {NAME: {args: {...}}}` read as the names and their `system_args`."""
    layer = dict(layer)
    if "workflows" in layer:
        if "systems" in layer:
            raise ConfigError(f"{source}: give `systems:` or its old name `workflows:`, not both")
        layer["systems"] = layer.pop("workflows")
    systems = layer.get("systems")
    if isinstance(systems, dict):
        args: dict[str, Any] = {}
        for name, spec in systems.items():
            given = {} if spec is None else spec
            if not isinstance(given, dict) or set(given) - {"args"} or not isinstance(given.get("args", {}), dict):
                raise ConfigError(f"{source}: systems.{name}: expected nothing or {{args: {{KEY: VALUE, ...}}}}")
            if given.get("args"):
                args[str(name)] = given["args"]
        layer["systems"] = [str(name) for name in systems]
        layer["system_args"] = merge(layer.get("system_args") or {}, args)
    return layer


# Run configuration keys renamed since runs were recorded, old → new, each read as the new one ever since:
# a recorded run that spells them the old way asked for the same thing. A benchmark's old top-level settings
# (`hints`, ...) are its `settings_aliases` (engine/benchmark_settings.py).
RENAMED_KEYS = {"workflows": "systems"}


def in_current_spelling(config: dict[str, Any]) -> dict[str, Any]:
    """A recorded run configuration (a manifest's `config`) with the keys renamed since it was recorded
    spelt as a run records them today, so that a resume compares what the run asked for, not how it was
    spelt: `workflows` as `systems`, and a benchmark's old top-level settings (DAB's `hints`,
    `dab_validator_cpu_s`, `postgres_url`, `postgres_reader_url`) under `benchmark_settings.<benchmark>`.
    Never a difference hidden: an old key whose new place holds another value stays as it is (and shows),
    and so does a setting of another benchmark than the run's unless it is that benchmark's default (which
    the configuration drops today, as it asks for nothing)."""
    renamed = dict(config)
    for old, new in RENAMED_KEYS.items():
        if old in renamed and (new not in renamed or renamed[new] == renamed[old]):
            renamed[new] = renamed.pop(old)
    old_settings = [key for key in renamed if key not in input_keys(RunConfig)]
    owners = alias_owners() if old_settings else {}
    benchmark = renamed.get("benchmark") or RunConfig.model_fields["benchmark"].default
    sections = {name: dict(section) for name, section in (renamed.get(SECTIONS) or {}).items()}
    for key in [key for key in old_settings if key in owners]:
        owner, field = owners[key]
        value = renamed[key]
        if owner == benchmark:
            section = sections.setdefault(owner, {})
            if field not in section or section[field] == value:
                section[field] = renamed.pop(key)
        elif value == _default_setting(owner, field):
            del renamed[key]
    if sections:
        renamed[SECTIONS] = sections
    return renamed


def _default_setting(benchmark: str, field: str) -> Any:
    """The default of one of a benchmark's settings, as the manifest records it (a value no setting has when
    the benchmark's settings cannot be loaded)."""
    try:
        model = settings_model(benchmark)
        return model().model_dump(mode="json").get(field, _NO_DEFAULT) if model else _NO_DEFAULT
    except (BenchmarkSettingsError, ValidationError):
        return _NO_DEFAULT


_NO_DEFAULT = object()


def benchmark_harness(name: Any) -> dict[str, Any]:
    """The run settings of the benchmark's official harness; {} for a name that is not registered
    (planning the run reports that)."""
    if not isinstance(name, str) or name not in BENCHMARKS:
        return {}
    try:
        return dict(BENCHMARKS.load(name).harness)
    except RegistryError as error:
        raise ConfigError(str(error)) from error


def load_plugins(plugins: list[str]) -> None:
    """Import each plugin (a module name, or a .py file) so its `register_*` decorators run; a .yaml file
    defines external systems (systems/external.py, docs/bring-your-own-agent.md)."""
    for plugin in plugins:
        if plugin.endswith((".yaml", ".yml")):
            from ..systems.external import ExternalSystemError
            from ..systems.external_yaml import load_external_systems

            try:
                load_external_systems(Path(plugin))
            except ExternalSystemError as wrong:
                raise ConfigError(str(wrong)) from None
            continue
        try:
            if plugin.endswith(".py"):
                runpy.run_path(plugin, run_name=f"data_agent_compare_plugin_{Path(plugin).stem}")
            else:
                importlib.import_module(plugin)
        except FileNotFoundError:
            raise ConfigError(f"plugin file not found: {plugin}") from None
        except (ImportError, SyntaxError, RegistryError) as error:
            raise ConfigError(f"plugin {plugin!r} cannot be loaded: {error}") from error
        except Exception as error:  # the plugin's own code failed at import: its bug, named, no traceback
            where = _plugin_line(error, plugin)
            raise ConfigError(f"plugin {plugin!r} failed at import{where}: {type(error).__name__}: {error}") from error
        except SystemExit as exit_call:  # sys.exit() at import would end the run with its status, silently
            where = _plugin_line(exit_call, plugin)
            raise ConfigError(f"plugin {plugin!r} called sys.exit({exit_call.code!r}) at import{where}") from None


def _plugin_line(error: BaseException, plugin: str) -> str:
    """` (file.py:12)`: the plugin's last line in the traceback, or nothing when none is its own."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if "site-packages" not in frame.filename]
    own = [f for f in frames if f.filename == plugin or plugin.replace(".", "/") in f.filename] or frames[-1:]
    return f" ({own[-1].filename}:{own[-1].lineno})" if own else ""


def load_model_table(path: Path | None = None) -> dict[str, ModelConfig]:
    data = read_yaml(path, shipped="models.yaml")
    source = str(path) if path else "configs/models.yaml"
    table: dict[str, ModelConfig] = {}
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise ConfigError(f"{source}: field 'models': expected a mapping of model aliases")
    for alias, entry in models.items():
        if not isinstance(entry, dict):
            raise ConfigError(f"{source}: model {alias!r}: expected a mapping (provider, model_id, ...), got {entry!r}")
        try:
            table[alias] = ModelConfig.model_validate({"alias": alias, **entry})
        except ValidationError as invalid:
            error = invalid.errors()[0]
            field = ".".join(map(str, error["loc"]))
            raise ConfigError(f"{source}: model {alias!r}: field {field!r}: {error['msg']}") from invalid
        model, where = table[alias], f"{source}: model {alias!r}: field 'base_url'"
        if model.base_url is not None:
            check_base_url(model.base_url, where, model.basic_auth)
        elif model.provider == "openai-compatible":  # refused here, not as infra_error on every unit
            raise ConfigError(
                f"{where} is missing: an openai-compatible alias needs the server's address"
                " (e.g. base_url: http://127.0.0.1:8000/v1)"
            )
    return table


# Query parameters that carry a credential (a base URL takes none: the key goes in `api_key_env`).
_CREDENTIAL_PARAMETERS = {"api_key", "api-key", "apikey", "key", "token", "access_token", "auth", "password", "secret"}


def check_base_url(url: str, where: str, basic_auth: bool = False) -> None:
    """Refuse (ConfigError naming `where`) a base URL that is no http(s) URL, or that carries a credential:
    user info (`http://alice:secret@host/v1`, unless `basic_auth` says HTTP Basic auth is meant) or a query
    string (`?api_key=…`, which also breaks the request path) or path parameters (`/v1;password=…`). Credentials
    belong in `api_key_env`. A refusal shows the URL without any of its credentials (`shown_url`)."""
    shown = shown_url(url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError as bad:
        raise ConfigError(f"{where}: {shown!r} is not a valid URL ({bad})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{where}: {shown!r} is not an http(s) URL with a host (e.g. http://127.0.0.1:8000/v1)")
    key_hint = "put the key in api_key_env (the name of an environment variable holding it)"
    if (parts.username or parts.password) and not basic_auth:
        raise ConfigError(
            f"{where}: the URL holds a user name or password ({shown}); {key_hint}, or, if the server wants"
            " HTTP Basic auth, name it in a models.yaml alias with basic_auth: true"
        )
    names = {name.lower() for name, _ in parse_qsl(parts.query, keep_blank_values=True)}
    if names & _CREDENTIAL_PARAMETERS:
        raise ConfigError(f"{where}: {shown} carries a credential in its query string; {key_hint}")
    if {name.lower() for name, _ in path_parameters(parts.path)} & _CREDENTIAL_PARAMETERS:
        raise ConfigError(f"{where}: {shown} carries a credential in a path parameter (;name=value); {key_hint}")
    if parts.query or parts.fragment:
        raise ConfigError(
            f"{where}: {shown} has a query string or fragment, which a base URL takes none of:"
            " requests go to <base URL>/chat/completions"
        )


def path_parameters(path: str) -> list[tuple[str, str]]:
    """(name, value) of each `;name=value` in the path's segments (RFC 3986 path parameters)."""
    found = []
    for segment in path.split("/"):
        for parameter in segment.split(";")[1:]:
            name, _, value = parameter.partition("=")
            found.append((unquote(name), value))
    return found


def shown_url(url: str) -> str:
    """`url` as an error message may show it: scheme, host, port and path, with any user info, parameter
    values, query and fragment masked (`http://***@host/v1;password=***?***`); a URL that does not parse
    is not shown at all."""
    try:
        parts = urlsplit(url)
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "the URL (not shown: it does not parse)"
    user = ""  # a user without a password may be a token itself
    if "@" in parts.netloc:
        user = f"{parts.username or ''}:***@" if parts.password is not None else "***@"
    path = "/".join(segment.split(";")[0] + ";***" * segment.count(";") for segment in parts.path.split("/"))
    query = "?***" if parts.query else ""
    fragment = "#***" if parts.fragment else ""
    return f"{parts.scheme}://{user}{parts.hostname or ''}{port}{path}{query}{fragment}"


def check_base_url_flag(run: RunConfig) -> None:
    """`--base-url` (and `--api-key-env`) serve only `openai-compatible:<model id>` models: refused, not ignored,
    when no model of the run is one."""
    named = [*run.models, *([run.judge] if run.judge else [])]
    if any(name.startswith(OPENAI_COMPATIBLE_PREFIX) for name in named):
        return
    for flag, value in (("--base-url", run.base_url), ("--api-key-env", run.api_key_env)):
        if value:
            raise ConfigError(
                f"{flag} applies only to {OPENAI_COMPATIBLE_PREFIX}<model id> models, and the run has none"
                f" (models: {', '.join(named)}); drop {flag}, or name an alias's base_url in a models.yaml"
            )


def register_model_secrets(model: ModelConfig) -> None:
    """Mask the model's API key and its base URL's password in everything written from now on."""
    provider = PROVIDERS.load(model.provider) if model.provider in PROVIDERS else None
    variable = provider.key_variable(model) if provider is not None and hasattr(provider, "key_variable") else None
    register_secret(os.environ.get(variable or model.api_key_env or "") or None)
    for url in (model.base_url, os.environ.get("OPENROUTER_BASE_URL") if model.provider == "openrouter" else None):
        parts = urlsplit(url or "")
        if parts.password:
            register_secret(parts.password, user=parts.username or "")
            register_secret(unquote(parts.password), user=unquote(parts.username or ""))


def resolve_models(names: list[str], run: RunConfig) -> list[ModelConfig]:
    table = load_model_table()
    if run.models_file:  # read at every start: `--resume` sees an alias edited since, and refuses
        table |= load_model_table(Path(run.models_file))
    resolved = []
    for name in names:
        if name.startswith(OPENAI_COMPATIBLE_PREFIX):
            model = _ad_hoc_model(name, run)
        elif name in table:
            model = table[name]
        else:
            valid = ", ".join([*sorted(table), f"{OPENAI_COMPATIBLE_PREFIX}<model id> (with --base-url)"])
            raise ConfigError(f"unknown model {name!r}; valid models: {valid}")
        if model.provider not in PROVIDERS:
            known = ", ".join(PROVIDERS.names())
            raise ConfigError(f"model {name!r}: unknown provider {model.provider!r}; registered providers: {known}")
        _check_endpoint(name, model)
        register_model_secrets(model)
        resolved.append(model)
    return resolved


def _check_endpoint(name: str, model: ModelConfig) -> None:
    """OpenRouter's address from the environment is checked like any base URL, before any model call."""
    override = os.environ.get("OPENROUTER_BASE_URL")
    if model.provider == "openrouter" and not model.base_url and override:
        check_base_url(override, "OPENROUTER_BASE_URL")


# Characters per token, at the most, of any tokenizer on text long enough to matter: a task whose question
# holds more than this many characters per token of the budget cannot be asked within it.
CHARS_PER_TOKEN_AT_MOST = 8


def check_task_sizes(tasks: list[Task], run: RunConfig) -> None:
    """Refuse a task whose question (with its context) alone is over the per-task token budget: every call
    would send it, so the unit could only fail, after paying for the first call."""
    budget = run.budgets.max_tokens
    for task in tasks:
        chars = len(task.question) + len(task.context or "")
        if chars // CHARS_PER_TOKEN_AT_MOST > budget:
            where = run.benchmark + (f" ({run.tasks_path})" if run.tasks_path else "")
            field = "'question'" + (" and 'context'" if task.context else "")
            raise ConfigError(
                f"{where}: task {task.id!r}: field {field} holds {chars:,} characters, at least"
                f" ~{chars // CHARS_PER_TOKEN_AT_MOST:,} tokens: over the per-task token budget (budgets.max_tokens"
                f" = {budget:,}) before any answer; leave the task out (--task-ids) or raise --max-tokens"
            )


def check_out(run: RunConfig) -> None:
    """`--out` must be a folder (or not exist yet): a file there is refused before anything runs."""
    if run.out and Path(run.out).exists() and not Path(run.out).is_dir():
        raise ConfigError(f"--out {run.out}: is a file, not a run directory; give a folder (new or a run's)")


def check_executor(run: RunConfig) -> None:
    """`ray_address` means nothing without the Ray executor: refused rather than ignored."""
    if run.ray_address and run.executor != "ray":
        raise ConfigError(f"--ray-address (ray_address) needs --executor ray (the executor is {run.executor!r})")
    if run.workers and run.executor != "process":
        raise ConfigError(f"--workers (workers) needs --executor process (the executor is {run.executor!r})")


def check_limits(run: RunConfig) -> None:
    """Each key of `limits:` must name a registered provider or a model alias (a typo limits nothing)."""
    if not run.limits:
        return
    table = load_model_table() | (load_model_table(Path(run.models_file)) if run.models_file else {})
    known = set(PROVIDERS.names()) | set(table) | set(run.models)
    unknown = [key for key in run.limits if key not in known]
    if unknown:
        raise ConfigError(
            f"limits: {', '.join(map(repr, unknown))} is neither a provider nor a model alias; "
            f"providers: {', '.join(PROVIDERS.names())}; aliases: {', '.join(sorted(table))}"
        )


def _ad_hoc_model(name: str, run: RunConfig) -> ModelConfig:
    model_id = name.removeprefix(OPENAI_COMPATIBLE_PREFIX)
    if not model_id or not run.base_url:
        raise ConfigError(f"{name!r} needs a model id after the colon and --base-url (e.g. http://127.0.0.1:8000/v1)")
    check_base_url(run.base_url, "--base-url")
    return ModelConfig(
        alias=name, provider="openai-compatible", model_id=model_id, base_url=run.base_url, api_key_env=run.api_key_env
    )


def missing_api_keys(models: list[ModelConfig]) -> dict[str, list[str]]:
    """Environment variables that must be set for these models, and which models need each."""
    missing: dict[str, list[str]] = {}
    for model in models:
        provider = PROVIDERS.load(model.provider)
        variable = provider.key_variable(model) if hasattr(provider, "key_variable") else model.api_key_env
        if variable and not os.environ.get(variable):
            missing.setdefault(variable, []).append(model.alias)
    return missing
