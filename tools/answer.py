"""The `answer` tool: the agent's final answer, typed by the task's question type.

Choice tasks get an enum of their option letters, so a model constrained by the
schema (a JSON-schema grammar for the local model) cannot name a letter that does
not exist. The workflow reads the call's arguments; `run` only acknowledges.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field
from pydantic.fields import FieldInfo

from ..core.prompt import ANSWER_TOOL
from ..core.task import QuestionType, Task
from ..core.tool import Tool, ToolResult
from .parameters import Parameters, one_of, parameters_schema, with_fields

_DESCRIPTIONS = {
    QuestionType.SINGLE_CHOICE: "Give the final answer: the letter of the one correct option.",
    QuestionType.MULTIPLE_CHOICE: "Give the final answer: the letters of all correct options.",
    QuestionType.REPORT: "Give the final answer: the complete report in Markdown.",
}
_DEFAULT_DESCRIPTION = "Give the final answer, as short as the question allows."


class AnswerParameters(Parameters):
    answer: str  # typed by the task's question type: `answer_field`


def answer_field(task: Task) -> tuple[Any, FieldInfo]:
    """The `answer` argument for this task: one option letter, a set of them, or text."""
    letters = sorted(task.options or {})
    if task.question_type == QuestionType.SINGLE_CHOICE:
        return one_of(letters), Field()
    if task.question_type == QuestionType.MULTIPLE_CHOICE:
        return set[one_of(letters)], Field(min_length=1)  # type: ignore[misc]
    if task.question_type == QuestionType.REPORT:
        return str, Field(description="The report in Markdown.")
    return str, Field()


def answer_schema(task: Task) -> dict[str, Any]:
    """JSON schema of the `answer` tool's arguments for this task."""
    return parameters_schema(with_fields(AnswerParameters, answer=answer_field(task)))


class AnswerTool(Tool):
    name = ANSWER_TOOL
    answers = True

    def __init__(self, task: Task) -> None:
        self.description = _DESCRIPTIONS.get(task.question_type, _DEFAULT_DESCRIPTION)
        self.parameters = answer_schema(task)

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        return ToolResult(success=True, content="answer recorded", data=arguments["answer"])
