"""Tools and the tool environment of one task run.

A `Tool` has a canonical name, a description and JSON-schema parameters — the same
for every system. `ToolEnvironment.call` validates the arguments, times the real
work, truncates what goes back into the model's context, and records a
`ToolCallStep`. Expected failures (bad SQL, a refused write, a path outside the
data folder) are raised as `ToolError` and come back as an unsuccessful result the
agent can read; they never crash the run.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from typing import Any

import jsonschema
from pydantic import BaseModel

from compare.model import ToolSpec
from compare.trace import Phase, ToolCallStep, TraceRecorder, utc_now


class ToolError(Exception):
    """An expected, explainable failure of a tool call; its message goes back to the agent."""


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
    """The tools of one task run, each call validated, timed and traced."""

    def __init__(self, tools: list[Tool], recorder: TraceRecorder) -> None:
        names = [tool.name for tool in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate tool names: {names}")
        self.tools = {tool.name: tool for tool in tools}
        self.recorder = recorder

    def specs(self, names: list[str] | None = None) -> list[ToolSpec]:
        chosen = names if names is not None else list(self.tools)
        return [self.tools[name].spec() for name in chosen if name in self.tools]

    def call(
        self, name: str, arguments: dict[str, Any], *, phase: Phase = Phase.EXECUTE, agent: str | None = None
    ) -> ToolResult:
        started_at = utc_now()
        start = time.perf_counter()
        result = self._run(name, arguments)
        duration_s = time.perf_counter() - start
        result = self._fit_to_context(result)
        self.recorder.add(
            ToolCallStep(
                index=0,
                phase=phase,
                agent=agent,
                tool=name,
                arguments=arguments,
                started_at=started_at,
                duration_s=duration_s,
                success=result.success,
                error=result.error,
                result_summary=summarize(result.content),
                truncated=result.truncated,
            )
        )
        return result

    def _run(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        tool = self.tools.get(name)
        if tool is None:
            message = f"unknown tool {name!r}; available: {', '.join(self.tools)}"
            return ToolResult(success=False, content=message, error=message)
        try:
            jsonschema.validate(arguments, tool.parameters)
        except jsonschema.ValidationError as invalid:
            where = "/".join(str(p) for p in invalid.absolute_path) or "arguments"
            message = f"invalid arguments for {name} at {where}: {invalid.message}"
            return ToolResult(success=False, content=message, error=message)
        try:
            return tool.run(arguments)
        except ToolError as failure:
            return ToolResult(success=False, content=f"error: {failure}", error=str(failure))
        except Exception as failure:  # a tool bug must not end the run; the trace keeps it
            message = f"{type(failure).__name__}: {failure}"
            return ToolResult(success=False, content=f"error: {message}", error=message)

    def _fit_to_context(self, result: ToolResult) -> ToolResult:
        limit = self.recorder.budgets.tool_result_max_chars
        if len(result.content) <= limit:
            return result
        note = f"\n…[truncated: {len(result.content)} characters, showing the first {limit}]"
        return result.model_copy(update={"content": result.content[:limit] + note, "truncated": True})

    def close(self) -> None:
        for tool in self.tools.values():
            tool.close()


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class ToolSettings(BaseModel):
    """Limits of the tools themselves (the context-size limit is in `Budgets`)."""

    sql_max_rows: int = 200  # rows returned to the agent; more sets `truncated`
    sql_max_bytes: int = 64_000  # bytes of rendered result
    sql_timeout_s: float = 30.0  # per statement
    python_timeout_s: float = 60.0
    python_memory_mb: int = 1024
    file_max_bytes: int = 64_000  # per read_file call
    search_top_k: int = 5
    cache_dir: str = ".cache"  # FAISS indexes and assembled model files
