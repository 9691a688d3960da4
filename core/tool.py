"""Tools and the tool environment of one task run.

A `Tool` has a canonical name, a description and JSON-schema parameters — the same
for every system. `ToolEnvironment.call` validates the arguments, times the real
work, truncates what goes back into the model's context, and records a
`ToolCallStep` with its phase (`trace.PhaseRules`). Expected failures (bad SQL, a refused
write, a path outside the data folder) are raised as `ToolError` and come back as an
unsuccessful result the agent can read; they never crash the run. A call that ends the
task (DBGorilla's prediction, DAB's `return_answer`) raises `FinalToolCall`, which the
environment records and re-raises for the runner.

The built-in tools live in `tools/`; a benchmark chooses which a task gets.
"""

from __future__ import annotations

import contextvars
import functools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from .model import ToolSpec
from .task import Answer, ToolCall
from .trace import ToolCallStep, TraceRecorder, utc_now

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

# imported on first use, and before units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("jsonschema.exceptions", "jsonschema.validators")


class ToolError(Exception):
    """An expected, explainable failure of a tool call; its message goes back to the agent."""


class DataUnavailable(ToolError):
    """The task's data is not here (a database file, a corpus, a dump missing; a kind of source this benchmark
    cannot serve). Raised while building a task's tools, it makes the task `data_unavailable` (left out of
    every mean); any other exception there is the suite's `error`, counted."""


class FinalToolCall(Exception):
    """Raised by a tool whose call ends the task run: the call is the system's final answer.

    `ToolEnvironment.call` records the step (its message as the result), then re-raises;
    the runner returns `answer`. By default that is the call itself as the prediction of
    a function-calling task.
    """

    def __init__(self, call: ToolCall, answer: Answer | None = None, note: str = "recorded as the prediction") -> None:
        super().__init__(note)
        self.call = call
        self.answer = answer or Answer(text=f"{call.name} {to_json(call.arguments)}", tool_call=call)


class ToolResult(BaseModel):
    success: bool
    content: str  # what the agent reads (after truncation)
    data: Any = None  # structured result (e.g. rows) for programmatic use
    truncated: bool = False  # the tool itself cut its output (row/byte caps) or the context limit did
    error: str | None = None


class Tool(ABC):
    name: str
    description: str
    parameters: dict[str, Any]
    answers: bool = False  # calling it gives the task's final answer (its calls are GENERATE)
    aliases: tuple[str, ...] = ()  # other names it answers to, offered only when asked for by name

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    @abstractmethod
    def run(self, arguments: dict[str, Any]) -> ToolResult:
        """Do the work. Raise ToolError for failures the agent should see."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections and subprocesses."""


def summarize(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ToolEnvironment:
    """The tools of one task run, each call validated, timed, phase-labelled and traced.

    A tool answers to its `aliases` without being listed under them, and is offered under an
    alias only when asked for by that name (DAB's `return_answer` serves the workflows' `answer`).
    """

    def __init__(self, tools: list[Tool], recorder: TraceRecorder) -> None:
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate tool names: {names}")
        self.tools = {tool.name: tool for tool in tools}
        self.aliases = {alias: tool.name for tool in tools for alias in tool.aliases if alias not in self.tools}
        self.recorder = recorder
        answering = [tool.name for tool in tools if tool.answers]
        recorder.phases.answer_tools |= {*answering, *(a for a, name in self.aliases.items() if name in answering)}

    def ends_task(self, name: str) -> bool:
        """Whether a call of `name` gives the task's final answer (`answer`, DAB's `return_answer`, a
        function-calling task's prediction): a framework should stop its loop after it."""
        return name in self.recorder.phases.answer_tools

    def specs(self, names: list[str] | None = None) -> list[ToolSpec]:
        if names is None:
            return [tool.spec() for tool in self.tools.values()]
        found = [(name, self._tool(name)) for name in names]
        return [tool.spec().model_copy(update={"name": name}) for name, tool in found if tool is not None]

    def _tool(self, name: str) -> Tool | None:
        return self.tools.get(self.aliases.get(name, name))

    def call(self, name: str, arguments: dict[str, Any], *, agent: str | None = None) -> ToolResult:
        phase = self.recorder.phases.tool_call(agent, name)
        started_at = utc_now()
        start = time.perf_counter()
        final: FinalToolCall | None = None
        try:
            result = self._run(name, arguments)
        except FinalToolCall as ending:  # recorded below before re-raising, so the trace shows the call
            final, result = ending, ToolResult(success=True, content=str(ending))
        duration_s = time.perf_counter() - start
        result = self._fit_to_context(result)
        if not result.success:
            self.recorder.phases.redo(agent)
        self.recorder.add(
            ToolCallStep(
                index=0,
                phase=phase,
                agent=agent,
                tool=self.aliases.get(name, name),  # the canonical name, also when called by an alias
                arguments=arguments,
                started_at=started_at,
                duration_s=duration_s,
                start_s=self.recorder.clock(start),
                success=result.success,
                error=result.error,
                result_summary=summarize(result.content),
                truncated=result.truncated,
            )
        )
        if final is not None:
            raise final
        return result

    @contextmanager
    def step(self, name: str, arguments: dict[str, Any], *, agent: str | None = None) -> Iterator[SystemStep]:
        """A tool call that the system's own code carries out (a LlamaIndex query engine, a LOTUS
        operator, a RAG retrieval), timed around the block and traced like `call` under `name`.
        The block reports its outcome on the yielded `SystemStep`; an exception marks it failed
        and propagates. Model calls made inside the block are traced as their own steps."""
        phase = self.recorder.phases.tool_call(agent, name)
        outcome = SystemStep()
        started_at, start = utc_now(), time.perf_counter()
        try:
            yield outcome
        except BaseException as failure:
            outcome.success, outcome.error = False, outcome.error or f"{type(failure).__name__}: {failure}"
            raise
        finally:
            if not outcome.success:
                self.recorder.phases.redo(agent)
            self.recorder.add(
                ToolCallStep(
                    index=0,
                    phase=phase,
                    agent=agent,
                    tool=name,
                    arguments=arguments,
                    started_at=started_at,
                    duration_s=time.perf_counter() - start,
                    start_s=self.recorder.clock(start),
                    success=outcome.success,
                    error=outcome.error,
                    result_summary=summarize(outcome.content or outcome.error or ""),
                )
            )

    def _run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self._tool(name)
        if tool is None:
            message = f"unknown tool {name!r}; available: {', '.join(self.tools)}"
            return ToolResult(success=False, content=message, error=message)
        invalid = validation_error(arguments, tool.parameters)
        if invalid is not None:
            where = "/".join(str(p) for p in invalid.absolute_path) or "arguments"
            message = f"invalid arguments for {name} at {where}: {invalid.message}"
            return ToolResult(success=False, content=message, error=message)
        token = TOOL_DEADLINE.set(time.monotonic() + max(0.0, self.recorder.remaining_s()))
        try:
            return tool.run(arguments)
        except ToolError as failure:
            return ToolResult(success=False, content=f"error: {failure}", error=str(failure))
        except FinalToolCall:
            raise
        except Exception as failure:  # a tool bug must not end the run; the trace keeps it
            message = f"{type(failure).__name__}: {failure}"
            return ToolResult(success=False, content=f"error: {message}", error=message)
        finally:
            TOOL_DEADLINE.reset(token)

    def _fit_to_context(self, result: ToolResult) -> ToolResult:
        limit = self.recorder.budgets.tool_result_max_chars
        if len(result.content) <= limit:
            return result
        note = f"\n…[truncated: {len(result.content)} characters, showing the first {limit}]"
        return result.model_copy(update={"content": result.content[:limit] + note, "truncated": True})

    def close(self) -> None:
        for tool in self.tools.values():
            tool.close()


# When the tool call running in this thread must end (time.monotonic()): the end of the unit's wall-time
# budget. Engines that can be stopped mid-call (tools/worker_process.py) stop there; None outside a unit.
TOOL_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("tool_deadline", default=None)


def validation_error(arguments: Any, schema: dict[str, Any]) -> ValidationError | None:
    """The error `jsonschema.validate(arguments, schema)` would raise (its best match), or None.

    Building a validator checks the schema against its meta-schema (~0.5 ms); tools are built per task,
    so validators are cached by the schema's content for the whole process. An invalid schema raises
    `jsonschema.SchemaError`, as `validate` does."""
    from jsonschema.exceptions import best_match  # jsonschema costs 0.1 s to import: not at CLI start

    error: ValidationError | None = best_match(_validator(json.dumps(schema)).iter_errors(arguments))
    return error


@functools.lru_cache(maxsize=1024)
def _validator(schema_json: str) -> Validator:
    from jsonschema.validators import validator_for

    schema = json.loads(schema_json)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


@dataclass
class SystemStep:
    """What a system reports about a step it carried out itself (`ToolEnvironment.step`)."""

    content: str = ""  # the result, as summarized in the trace
    success: bool = True
    error: str | None = None

    def fail(self, error: str) -> None:
        self.success, self.error = False, error


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class ToolSettings(BaseModel):
    """Limits of the tools themselves (the context-size limit is in `Budgets`)."""

    model_config = ConfigDict(extra="forbid")  # a misspelt limit must not be ignored

    sql_max_rows: int = Field(default=200, gt=0)  # rows returned to the agent; more sets `truncated`
    sql_max_bytes: int = Field(default=64_000, gt=0)  # bytes of rendered result
    sql_timeout_s: float = Field(default=30.0, gt=0)  # per statement
    python_timeout_s: float = Field(default=60.0, gt=0)
    python_memory_mb: int = Field(default=1024, gt=0, le=1_048_576)  # at most 1 TiB: more is a typo
    file_max_bytes: int = Field(default=64_000, gt=0)  # per read_file call
    search_top_k: int = Field(default=5, gt=0)
    cache_dir: str = ".cache"  # FAISS indexes and assembled model files
    # Run model-written Python without the bubblewrap sandbox. Only for machines where bubblewrap
    # cannot run; off by default, recorded in the manifest (`--unsafe-python`).
    unsafe_python: bool = False
    # An external agent's sandbox (systems/agent_sandbox.py): its limits, recorded in the manifest; and running
    # agents WITHOUT one (`--unsandboxed-agents`), only where none can be made, stated on every external row.
    agent_memory_mb: int = Field(default=1536, ge=64, le=1 << 20)  # all its processes together
    agent_processes: int = Field(default=256, ge=8, le=1 << 16)  # processes and threads together
    agent_cpus: float = Field(default=1.0, gt=0, le=1024)  # cores of CPU time
    agent_scratch_mb: int = Field(default=512, ge=1, le=1 << 20)  # its writable folder (and /tmp)
    agent_file_size_mb: int = Field(default=256, ge=1, le=1 << 20)  # the largest file it may write
    unsandboxed_agents: bool = False
