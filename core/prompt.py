"""The prompt helpers every system shares: the task as a user message and the answer formats.

Every system shows a task the same way (`task_prompt`), so systems differ in how they work,
not in what they were told. Each system keeps its own prompts at the top of its module, with a
version to bump on every edit; `prompt_hash` of those texts (plus the shared answer formats and
the task prompt's version) goes into the manifest, so a prompt change is visible when comparing
runs."""

from __future__ import annotations

import hashlib

from .task import QuestionType, Task

ANSWER_TOOL = "answer"

# The answer format is the same for every workflow (what differs is how they get there).
ANSWER_FORMATS: dict[QuestionType, str] = {
    QuestionType.SINGLE_CHOICE: (
        "This is a single-choice question: exactly one option is correct. "
        'Finish by calling the `answer` tool with {"answer": "<letter>"}.'
    ),
    QuestionType.MULTIPLE_CHOICE: (
        "This is a multiple-choice question: one or more options are correct, and you must select all of them. "
        'Finish by calling the `answer` tool with {"answer": ["<letter>", ...]}.'
    ),
    QuestionType.FACTOID: (
        "Answer with the value only, following the answer guidelines exactly (format, rounding, units). "
        'Finish by calling the `answer` tool with {"answer": "<value>"}.'
    ),
    QuestionType.REPORT: (
        "Write a Markdown report with these sections: ## Executive Summary, ## Data Analysis Results, "
        "## External Context & Insights, ## Key Connections, ## Conclusions. Cite the numbers you computed. "
        'Finish by calling the `answer` tool with {"answer": "<the whole report>"}.'
    ),
    QuestionType.FUNCTION_CALL: "Answer by calling the one tool that performs the request, with its arguments.",
}


TASK_PROMPT_VERSION = "2"  # bump when task_prompt's wording or layout changes; it is part of every prompt hash


def task_prompt(task: Task, *, answer_format: bool = True) -> str:
    """The user message: question, options, guidelines, data sources and (for whoever writes
    the answer) the answer format."""
    parts = [f"Question: {task.question}"]
    if task.options:
        parts.append("Options:\n" + "\n".join(f"{letter}. {text}" for letter, text in sorted(task.options.items())))
    if task.guidelines:
        parts.append(f"Answer guidelines: {task.guidelines}")
    if task.context:
        parts.append(f"About the data:\n{task.context}")
    if task.data:
        sources = [f"- {s.name} ({s.kind.value})" + (f": {s.description}" if s.description else "") for s in task.data]
        parts.append("Data sources:\n" + "\n".join(sources))
    if answer_format:
        parts.append(ANSWER_FORMATS[task.question_type])
    return "\n\n".join(parts)


def prompt_hash(*texts: str) -> str:
    digest = hashlib.sha256()
    for text in (*texts, *ANSWER_FORMATS.values(), TASK_PROMPT_VERSION):
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]
