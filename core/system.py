"""A system under test: anything that turns a `Task` into an `Answer`.

Our workflows (`workflows/`) and the adapters for external frameworks (`systems/`) subclass
`System` and are found by name (`SYSTEMS`). A system gets the task (without gold) and its
`RunContext`: the task's tools, the metered model, the budgets, phase labelling and the
gateway's OpenAI-compatible endpoint. Everything it does through the context lands in the
trace, so it never handles timing, tokens or cost itself.

One instance runs many tasks, concurrently with `--concurrency`: keep per-task state in
locals or a per-run object, never on `self`.

`prepare(tasks, setup)` is an optional hook the runner calls once per system and model before any
task's clock starts (`prepare_systems`): a system builds there what it reuses across tasks (a RAG
system's entity graph), with model calls metered on traces of their own (`SystemSetup.metered`), so
that cost is reported apart from every task's. What it returns goes into the manifest under
`systems.<name>.indexing`.
"""

from __future__ import annotations

import inspect
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

from .model import GenerationSettings, MeteredModel, ModelConfig, ModelProvider, RetrySettings, get_provider
from .registry import Registry, summary_line
from .task import Answer, Task
from .tool import ToolSettings
from .trace import Budgets, Trace, TraceRecorder

if TYPE_CHECKING:
    from .context import RunContext

class System(ABC):
    name: ClassVar[str]
    # workflow, workflow-variant, framework, semantic-operator or rag (`compare systems` lists it);
    # `--workflows all` runs the "workflow" kind
    kind: ClassVar[str] = "workflow"
    description: ClassVar[str] = ""  # one line for `compare systems`; the docstring's first line if empty
    args: Mapping[str, Any] = MappingProxyType({})  # what it was built with (`create_system`): manifest, row label

    @abstractmethod
    def run(self, task: Task, ctx: RunContext) -> Answer:
        """Answer the task. Raise nothing for ordinary failures: return an Answer with a status."""

    def describe(self) -> dict[str, Any]:
        """What the manifest records about this system (prompt hashes, settings)."""
        return {"name": self.name, "kind": self.kind}

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        """Build what the tasks share (an index) before their clocks start; one entry per thing built
        or read from a cache (its model calls, tokens, seconds) for the manifest. Default: nothing."""
        return []

    @classmethod
    def summary(cls) -> str:
        return summary_line(cls)


SYSTEMS: Registry[type[System]] = Registry("systems")


def register_system(cls: type[System]) -> type[System]:
    """Class decorator: make `cls` available under `cls.name` (e.g. `--workflows my_system`)."""
    SYSTEMS.register(cls.name, cls)
    return cls


@dataclass(frozen=True)
class SystemSetup:
    """What `System.prepare` gets for one model: the model, the tool settings (`cache_dir`) and the run
    directory, and metered models whose calls land on a trace of their own, never on a task's."""

    model: ModelConfig
    tools: ToolSettings
    run_dir: Path | None = None  # None: nothing is written (a system run outside the runner)
    provider: ModelProvider | None = None  # the runner's (a replay refuses every call); None: the registered one
    generation: GenerationSettings | None = None  # the run's sampling settings (None: as the system asks)

    def metered(self, label: str, system: str, budgets: Budgets, retries: RetrySettings | None = None) -> MeteredModel:
        """A metered model of this setup on a fresh trace (`model.recorder.trace`), its clock started."""
        recorder = TraceRecorder(Trace(task_id=label, system=system, model=self.model.alias), budgets)
        recorder.start()
        provider = self.provider or get_provider(self.model.provider)
        return MeteredModel(self.model, provider, recorder, system=system, retries=retries, generation=self.generation)


def prepare_systems(
    systems: dict[str, System],
    units: Iterable[tuple[str, ModelConfig, Task]],
    tools: ToolSettings,
    run_dir: Path,
    described: dict[str, dict[str, Any]],
    provider: Callable[[ModelConfig], ModelProvider | None] | None = None,
    on_start: Callable[[str, str], None] | None = None,
    generation: GenerationSettings | None = None,
) -> None:
    """Call `prepare` of each system once per model with the tasks it is about to run (`units`: system
    name, model, task), appending what it reports to `described[name]["indexing"]` (the manifest's).
    `on_start(system, model alias)` is told before each call (the progress line: indexes take minutes)."""
    work: dict[tuple[str, str], tuple[ModelConfig, list[Task]]] = {}
    for name, model, task in units:
        work.setdefault((name, model.alias), (model, []))[1].append(task.for_agent())  # gold stays out of reach
    for (name, alias), (model, tasks) in work.items():
        if on_start is not None:
            on_start(name, alias)
        setup = SystemSetup(model, tools, run_dir, provider(model) if provider else None, generation)
        built = systems[name].prepare(tasks, setup)
        if built:
            described.setdefault(name, {}).setdefault("indexing", []).extend(built)


class SystemArgsError(ValueError):
    """A system argument (`--system-arg NAME.KEY=VALUE`, `systems: {NAME: {args: ...}}`) the system does not take."""


def create_system(name: str, args: Mapping[str, Any] | None = None) -> System:
    """The registered system `name`, built with `args` as keyword arguments of its class (its parameters)."""
    cls = SYSTEMS.load(name)
    args = dict(args or {})
    takes = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in takes.values()):
        unknown = sorted(set(args) - set(takes))
        if unknown:
            known = ", ".join(takes) or "none"
            raise SystemArgsError(f"system {name} takes no argument {', '.join(unknown)} (its arguments: {known})")
    if not args:
        return cls()
    try:
        system = cls(**args)
    except (TypeError, ValueError) as bad:  # a value of the wrong kind: the class says which
        raise SystemArgsError(f"system {name} refused its arguments {args}: {bad}") from bad
    system.args = args
    return system


def described_system(system: System) -> dict[str, Any]:
    """What the manifest records of a system: its `describe()`, and the arguments it was built with."""
    return system.describe() | ({"args": dict(system.args)} if system.args else {})


def system_label(name: str, args: Mapping[str, Any] | None = None) -> str:
    """The name a system's rows and records carry: `reflection`, or `reflection[max_revisions=1]` with arguments,
    so that one system run with other arguments is never mistaken for itself."""
    if not args:
        return name
    shown = (f"{key}={value if isinstance(value, str) else json.dumps(value)}" for key, value in sorted(args.items()))
    return f"{name}[{','.join(shown)}]"


def system_name(label: str) -> str:
    """The registered name in a label (`system_label`)."""
    return label.partition("[")[0]


def system_names(kind: str | None = None) -> list[str]:
    return [name for name in SYSTEMS.names() if kind is None or SYSTEMS.load(name).kind == kind]
