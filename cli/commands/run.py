"""`compare run` (also plain `compare` with no verb): run systems × models on a benchmark into a run directory.

ADD RUN FLAGS HERE: one field of `RunOptions` is one flag (its typer.Option says the flag's name and help).
A field named like a key of the run configuration (engine/config.py `RunConfig`) reaches that key as it is;
one that must be reshaped (a comma list, a nested setting) says how in `RunOptions.overrides`."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import fail, split


@dataclass(frozen=True)
class RunOptions:
    """Every flag of `compare run`; `--resume`/`--replay` are the verbs `compare resume`/`compare replay`."""

    workflows: Annotated[
        str | None, typer.Option(help="Comma-separated workflows/systems, or 'all' (the four workflows).")
    ] = None
    systems: Annotated[
        str | None,
        typer.Option(help="Comma-separated systems (compare systems), or 'all' (every system but workflow variants)."),
    ] = None
    system_arg: Annotated[
        list[str] | None,
        typer.Option(help="A system's parameter: NAME.KEY=VALUE, VALUE read as JSON or else as text (repeatable)."),
    ] = None
    models: Annotated[str | None, typer.Option(help="Comma-separated model aliases (compare models).")] = None
    benchmark: Annotated[str | None, typer.Option(help="A benchmark name (compare benchmarks).")] = None
    tasks_path: Annotated[str | None, typer.Option(help="Benchmark files (not needed for bundled).")] = None
    limit: Annotated[int | None, typer.Option(help="Run only the first N tasks.")] = None
    task_ids: Annotated[str | None, typer.Option(help="Comma-separated task ids to run.")] = None
    level: Annotated[str | None, typer.Option(help="Comma-separated levels (easy,medium,hard).")] = None
    question_type: Annotated[
        str | None,
        typer.Option(help="Comma-separated: single_choice, multiple_choice, factoid, report, function_call."),
    ] = None
    epochs: Annotated[int | None, typer.Option(help="Runs of each task (for pass@k).")] = None
    label: Annotated[
        str | None, typer.Option(help="This run's name in a report of several runs (default: its folder's name).")
    ] = None
    hints: Annotated[bool | None, typer.Option("--hints", help="DAB: dataset descriptions with hints.")] = None
    concurrency: Annotated[int | None, typer.Option(help="Tasks run at once.")] = None
    executor: Annotated[
        str | None,
        typer.Option(help="Where units run: auto (default; processes if CPU-bound), thread, process or ray."),
    ] = None
    ray_address: Annotated[
        str | None, typer.Option(help="--executor ray: the Ray cluster to join (default: start a local one).")
    ] = None
    workers: Annotated[
        int | None, typer.Option(help="--executor process: worker processes (default: one per core).")
    ] = None
    out: Annotated[str | None, typer.Option(help="Run directory (default runs/<time>-<benchmark>).")] = None
    judge: Annotated[str | None, typer.Option(help="Model alias that judges report rubrics.")] = None
    postgres_url: Annotated[
        str | None, typer.Option(help="PostgreSQL server for DAB dumps (default: a throw-away local one).")
    ] = None
    postgres_reader_url: Annotated[
        str | None,
        typer.Option(help="--postgres-url: an existing read-only role for agent queries (default: one per run)."),
    ] = None
    base_url: Annotated[str | None, typer.Option(help="Base URL for openai-compatible:<id> models.")] = None
    api_key_env: Annotated[str | None, typer.Option(help="Env variable with the key for --base-url.")] = None
    plugin: Annotated[
        list[str] | None, typer.Option(help="A module or .py file that registers systems etc. (repeatable).")
    ] = None
    unsafe_python: Annotated[
        bool | None,
        typer.Option("--unsafe-python", help="Where bubblewrap cannot run, run model-written Python unsandboxed."),
    ] = None
    unsandboxed_agents: Annotated[
        bool | None,
        typer.Option(
            "--unsandboxed-agents",
            help="Where no agent sandbox can be made, run external agents WITHOUT one (stated on every external row).",
        ),
    ] = None
    max_steps: Annotated[int | None, typer.Option(help="Budget: model calls per task.")] = None
    max_tokens: Annotated[int | None, typer.Option(help="Budget: tokens per task.")] = None
    wall_time: Annotated[float | None, typer.Option(help="Budget: seconds per task.")] = None
    config: Annotated[Path | None, typer.Option(help="YAML file overriding configs/defaults.yaml.")] = None
    cache: Annotated[
        bool | None, typer.Option("--cache", help="Answer a model call seen before from the response cache (cost 0).")
    ] = None
    temperature: Annotated[
        float | None, typer.Option(help="Sampling temperature of every request of every system (0-2).")
    ] = None
    top_p: Annotated[float | None, typer.Option(help="Nucleus sampling of every request (0 < p <= 1).")] = None
    seed: Annotated[int | None, typer.Option(help="Sampling seed of every request.")] = None
    max_output_tokens: Annotated[int | None, typer.Option(help="Output-token limit of every request.")] = None
    strict_answers: Annotated[
        bool | None,
        typer.Option("--strict-answers", help="Score answers flagged as hedged (listing many candidates) as wrong."),
    ] = None
    view: Annotated[
        bool,
        typer.Option(
            "--view", help="Follow the run in the browser: start `compare view` beside it, print its address."
        ),
    ] = False

    def overrides(self) -> dict[str, Any]:
        """The run configuration's keys these flags set (None: not given, the configuration's value stays)."""
        given = {field.name: getattr(self, field.name) for field in fields(self) if field.name not in RESHAPED}
        return given | self._reshaped()

    def _reshaped(self) -> dict[str, Any]:
        budgets = {"max_steps": self.max_steps, "max_tokens": self.max_tokens, "wall_time_s": self.wall_time}
        sampling = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "max_output_tokens": self.max_output_tokens,
        }
        return {
            "systems": _systems(self.workflows, self.systems),
            "system_args": _system_args(self.system_arg or []),
            "models": split(self.models),
            "task_ids": split(self.task_ids),
            "levels": split(self.level),
            "question_types": split(self.question_type),
            "plugins": self.plugin or None,
            "budgets": {k: v for k, v in budgets.items() if v is not None} or None,
            "tools": {
                **({"unsafe_python": True} if self.unsafe_python else {}),
                **({"unsandboxed_agents": True} if self.unsandboxed_agents else {}),
            }
            or None,
            "cache": {"enabled": True} if self.cache else None,
            "generation": _generation_flags(sampling),
        }


# The fields `_reshaped` turns into configuration keys, `config`, which names the file under the flags, and
# `view`, which is how the run is watched, not how it runs.
RESHAPED = {
    "workflows", "systems", "system_arg", "models", "task_ids", "level", "question_type", "plugin", "max_steps",
    "max_tokens", "wall_time", "unsafe_python", "unsandboxed_agents", "cache", "temperature", "top_p", "seed",
    "max_output_tokens", "config", "view",
}  # fmt: skip


def run(options: RunOptions) -> None:
    """Run systems × models on a benchmark and write a run directory."""
    from ...engine.config import ConfigError, load_run_config
    from ...engine.runner import plan_run  # loads the tools: not for --help
    from .running import run_plan

    try:
        plan = plan_run(load_run_config(options.config, options.overrides()))
    except ConfigError as problem:
        raise fail(str(problem)) from None
    raise typer.Exit(run_plan(plan, view=options.view))


def _systems(workflows: str | None, systems: str | None) -> list[str] | None:
    """--workflows and --systems name systems alike; `--systems all` is every registered system but the
    workflow variants (frameworks, semantic operators, RAG), `--workflows all` the four workflows."""
    from ...core.system import SYSTEMS

    named = [*(split(workflows) or []), *(split(systems) or [])]
    if systems and "all" in (split(systems) or []):
        everything = [name for name in SYSTEMS.names() if SYSTEMS.load(name).kind != "workflow-variant"]
        named = [*everything, *(n for n in named if n != "all" and n not in everything)]
    return list(dict.fromkeys(named)) or None


def _system_args(given: list[str]) -> dict[str, dict[str, Any]] | None:
    """`--system-arg reflection.max_revisions=1` → {"reflection": {"max_revisions": 1}}."""
    args: dict[str, dict[str, Any]] = {}
    for text in given:
        target, equals, value = text.partition("=")
        system, dot, key = target.partition(".")
        if not (equals and dot and system.strip() and key.strip()):
            raise fail(f"--system-arg {text}: expected NAME.KEY=VALUE (e.g. reflection.max_revisions=1)")
        args.setdefault(system.strip(), {})[key.strip()] = _value(value)
    return args or None


def _value(text: str) -> Any:
    """A flag's value as JSON (1, 0.5, true, [1, 2]), or else as the text it is."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _generation_flags(given: dict[str, float | int | None]) -> dict[str, float | int] | None:
    """The sampling flags given, checked here so that a bad value names its flag (exit 2)."""
    from pydantic import ValidationError

    from ...core.model import GenerationSettings

    flags = {name: value for name, value in given.items() if value is not None}
    try:
        GenerationSettings.model_validate(flags)
    except ValidationError as invalid:
        error = invalid.errors()[0]
        flag = "--" + str(error["loc"][0]).replace("_", "-")
        raise fail(f"{flag} {flags.get(str(error['loc'][0]))}: {error['msg']}") from None
    return flags or None
