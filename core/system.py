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
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

from .context import EndpointFactory, RunContext
from .model import (
    REQUEST_FAULTS,
    GenerationSettings,
    MeteredModel,
    ModelConfig,
    ModelError,
    ModelProvider,
    RetrySettings,
    failure_status,
    get_provider,
    unrecovered_failure,
)
from .registry import Registry, summary_line
from .task import Answer, AnswerStatus, Task
from .tool import DataUnavailable, FinalToolCall, Tool, ToolEnvironment, ToolSettings
from .trace import BudgetExceeded, Budgets, Trace, TraceRecorder


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


def run_system(
    system: System,
    task: Task,
    tools: Callable[[], list[Tool]],
    model: MeteredModel,
    endpoint: EndpointFactory | None = None,
) -> Answer:
    """`system`'s answer to `task` with the task's `tools` (built here: a benchmark may find its data
    missing) and `model`, its clock started after the tools are built; never raises for the system's
    failures: how the run ended is the answer's status (a budget's, a provider's, the system's own)."""
    recorder = model.recorder
    if task.unavailable:
        return Answer(status="data_unavailable", error=task.unavailable)
    try:
        env = ToolEnvironment(tools(), recorder)
    except DataUnavailable as missing:  # the benchmark says the data is not here: left out of every mean
        return Answer(status="data_unavailable", error=str(missing))
    except Exception as failure:  # ours, counted: only the benchmark's `task.unavailable` leaves a task out
        why = f"building the task's tools failed: {type(failure).__name__}: {failure}"
        return Answer(status="error", error=f"{why}\n{traceback.format_exc(limit=8)}")
    agent_view = task.for_agent()
    recorder.start()
    try:
        answer = system.run(agent_view, RunContext(agent_view, env, model, endpoint=endpoint))
    except FinalToolCall as final:  # a call that ends the task (DBGorilla's prediction, DAB's return_answer)
        answer = final.answer
    except BudgetExceeded as limit:
        answer = Answer(status=limit.status, error=str(limit))
    except ModelError as failure:  # the provider refused the request (the system's), or failed after its retries
        status = _after_failed_call(recorder.trace, failure.kind) or "infra_error"
        answer = Answer(status=status, error=f"model error: {failure}")
    except Exception as failure:  # a system bug ends this task, not the run; the trace keeps the stack
        status = _after_failed_call(recorder.trace) or "error"
        answer = Answer(status=status, error=f"{type(failure).__name__}: {failure}\n{traceback.format_exc(limit=8)}")
    finally:
        env.close()
    failed_inside = unrecovered_failure(recorder.trace) if answer.status in ("completed", "no_answer") else None
    if failed_inside and recorder.stopped_by is None:  # a provider failure the system went on past (issue 25)
        answer = answer.model_copy(update={"status": "infra_error", "error": failed_inside})
    return _with_budget_status(answer, recorder.stopped_by)


def _after_failed_call(trace: Trace, kind: str | None = None) -> AnswerStatus | None:
    """How a unit ends that failed on a model call's failure (`kind`), or right after a failed model call
    (a framework given the endpoint's 502): the system's own status when the provider refused what it sent
    (`REQUEST_FAULTS`), else `infra_error`; None when neither applies."""
    calls = trace.model_calls
    last = calls[-1] if calls and not calls[-1].success else None
    if kind not in REQUEST_FAULTS and last is not None and last.failed_attempts:
        kind = last.failed_attempts[-1].kind  # what the provider said (a system may re-raise it as its own)
    return failure_status(kind) if kind is not None or last is not None else None


def _with_budget_status(answer: Answer, stopped_by: BudgetExceeded | None) -> Answer:
    """A budget that refused a call decides how the task ended, also when the system went on
    without that call or failed on the refusal (a framework given HTTP 402 by the endpoint)."""
    if stopped_by is None or answer.status == stopped_by.status or answer.status == "data_unavailable":
        return answer
    error = str(stopped_by)
    if answer.status == "error" and answer.error:
        error += f"; then the system failed: {answer.error.splitlines()[0]}"
    return answer.model_copy(update={"status": stopped_by.status, "error": error})


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
