"""Tools of function-calling tasks (DBGorilla): the call is the prediction, nothing is executed.

A `SpecTool` is built from one entry of `Task.tool_specs` ({name, description, parameters}).
Calling it raises `FinalToolCall`: the environment records the step and the runner ends the
task with the call as the answer. The benchmark scores the first call as made, so the
arguments are not validated against the schema the model was shown: a malformed call is a
prediction too (and scored as one), not an error the model may correct in a second step.
"""

from __future__ import annotations

from typing import Any

from ..core.model import ToolSpec
from ..core.task import Task, ToolCall
from ..core.tool import FinalToolCall, Tool, ToolResult

ANY_ARGUMENTS: dict[str, Any] = {"type": "object"}


class SpecTool(Tool):
    answers = True  # its call is the prediction

    def __init__(self, spec: dict[str, Any]) -> None:
        self.name = spec["name"]
        self.description = spec.get("description", "")
        self.shown_parameters = spec.get("parameters", ANY_ARGUMENTS)
        self.parameters = ANY_ARGUMENTS  # what the environment validates: any object (see the module docstring)

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.shown_parameters)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        raise FinalToolCall(ToolCall(name=self.name, arguments=arguments))


def function_call_tools(task: Task) -> list[Tool]:
    """One SpecTool per entry of the task's tool_specs."""
    return [SpecTool(spec) for spec in task.tool_specs or []]
