"""The task interface: one `Task` shape for every benchmark, its gold side, and the `Answer`.

A FDABench choice/report task, a DABstep factoid, a DAB multi-database query and a
DBGorilla function-calling query are all a `Task`; what differs is which optional
fields are set. Systems see everything except `gold`.
"""

from __future__ import annotations

import graphlib
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class QuestionType(StrEnum):
    SINGLE_CHOICE = "single_choice"
    MULTIPLE_CHOICE = "multiple_choice"
    FACTOID = "factoid"
    REPORT = "report"
    FUNCTION_CALL = "function_call"  # DBGorilla: the answer is the first tool call


class DataSourceKind(StrEnum):
    SQLITE = "sqlite"
    DUCKDB = "duckdb"
    POSTGRES = "postgres"
    MONGO = "mongo"
    BIGQUERY = "bigquery"
    SNOWFLAKE = "snowflake"
    FILES = "files"  # a folder of context files (DABstep)
    DOCUMENTS = "documents"  # a text corpus searched through the vector index


class DataSource(BaseModel):
    """A database or corpus the task needs, under the logical name the agent sees."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: DataSourceKind
    location: str | None = None  # file path, folder, or connection URL
    description: str | None = None


class ToolCall(BaseModel):
    """A call of a named tool with JSON arguments (used by models, traces and gold)."""

    id: str = ""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------- gold DAG


class EdgeType(StrEnum):
    HARD_DEP = "HARD_DEP"  # target must run after source
    SOFT_DEP = "SOFT_DEP"  # order preferred, not required
    ALT_GROUP = "ALT_GROUP"  # the two nodes are alternatives


class DagNode(BaseModel):
    id: str
    type: str = "tool"  # e.g. schema, sql, search, python, file, synthesize, answer
    tool: str | None = None  # canonical tool name
    description: str = ""
    required: bool = True
    critical: bool = False
    input: dict[str, Any] | None = None
    expected_sql: str | None = None
    expected_result: str | None = None


class DagEdge(BaseModel):
    source: str
    target: str
    type: EdgeType = EdgeType.HARD_DEP


class AltGroup(BaseModel):
    node_ids: list[str]
    min_required: int = 1


class GoldDag(BaseModel):
    nodes: list[DagNode]
    edges: list[DagEdge] = Field(default_factory=list)
    critical_path: list[str] = Field(default_factory=list)
    alt_groups: dict[str, AltGroup] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _references_exist_and_order_is_acyclic(self) -> GoldDag:
        ids = {node.id for node in self.nodes}
        if len(ids) != len(self.nodes):
            raise ValueError("DAG node ids must be unique")
        referenced = [e.source for e in self.edges] + [e.target for e in self.edges]
        referenced += self.critical_path
        referenced += [n for group in self.alt_groups.values() for n in group.node_ids]
        unknown = sorted(set(referenced) - ids)
        if unknown:
            raise ValueError(f"DAG references unknown node ids: {unknown}")
        # HARD_DEP and SOFT_DEP edges order the steps (SOFT_DEP as a preference); ALT_GROUP edges do not
        before: dict[str, list[str]] = {node.id: [] for node in self.nodes}
        for edge in self.edges:
            if edge.type is not EdgeType.ALT_GROUP:
                before[edge.target].append(edge.source)
        try:
            graphlib.TopologicalSorter(before).prepare()
        except graphlib.CycleError as error:
            cycle = error.args[1][:-1]  # each node runs before the next, the last before the first
            position = {node.id: i for i, node in enumerate(self.nodes)}
            first = min(range(len(cycle)), key=lambda i: position[cycle[i]])
            path = " → ".join([*cycle[first:], *cycle[:first], cycle[first]])
            raise ValueError(f"DAG has a cycle in its HARD_DEP/SOFT_DEP edges: {path}") from None
        return self


# ---------------------------------------------------------------- rubric


class RubricDimension(BaseModel):
    name: str  # SQL_ACCURACY, EXTERNAL_INTEGRATION, LOGICAL_REASONING, COMPLETENESS
    weight: float = 0.25
    criteria: list[str] = Field(default_factory=list)


class Rubric(BaseModel):
    dimensions: list[RubricDimension]
    chain_validation: list[str] = Field(default_factory=list)


# ---------------------------------------------------------------- gold side


class Gold(BaseModel):
    """Everything a scorer may use; never shown to the system under test."""

    answer: str | list[str] | None = None  # letters for choice tasks, text for factoids
    report: str | None = None  # reference report (Markdown)
    sql: str | None = None  # the SQL that produced the answer
    sql_result: str | None = None  # its result as CSV text
    tool_call: ToolCall | None = None  # DBGorilla ground-truth call
    dag: GoldDag | None = None
    rubric: Rubric | None = None
    explanation: str | None = None
    validator: str | None = None  # DAB: path of the query's validate.py
    ground_truth_file: str | None = None  # DAB: path of ground_truth.csv


class Task(BaseModel):
    """One question of one benchmark, with the data it needs and its (hidden) gold."""

    id: str
    benchmark: str
    question: str
    question_type: QuestionType
    level: str | None = None
    options: dict[str, str] | None = None  # letter -> text, for choice tasks
    guidelines: str | None = None  # answer-format instructions shown to the agent
    context: str | None = None  # background shown to the agent, e.g. DAB's description of its databases
    data: list[DataSource] = Field(default_factory=list)
    data_dir: Path | None = None  # the only folder file tools may read
    tools: list[str] | None = None  # tool names offered; None = the environment's defaults
    tool_specs: list[dict[str, Any]] | None = None  # task-specific tool schemas (DBGorilla)
    max_steps: int | None = None  # benchmark-imposed step limit (DBGorilla: 1)
    unavailable: str | None = None  # why the task cannot run here, e.g. BigQuery database
    metadata: dict[str, Any] = Field(default_factory=dict)
    gold: Gold | None = None

    @model_validator(mode="after")
    def _choices_have_options(self) -> Task:
        choice = self.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE)
        if choice and not self.options:
            raise ValueError(f"{self.question_type} task needs options")
        return self

    def for_agent(self) -> Task:
        """The task as a system under test may see it: gold removed, and metadata keys starting
        with `gold` (loaders keep raw gold material there, e.g. FDABench gold_subtasks)."""
        metadata = {k: v for k, v in self.metadata.items() if not k.startswith("gold")}
        return self.model_copy(update={"gold": None, "metadata": metadata})


AnswerStatus = Literal[
    "completed",  # the system gave its final answer
    "max_steps",
    "max_tokens",
    "time_limit",
    "no_answer",  # stopped without answering
    "no_tool_call",  # a function-calling task with no call
    "error",  # the system failed (an exception of its own, or building its tools): a failure of the system
    # The provider refused what the system sent (HTTP 400/413/422, the embedded model's window): the system's
    # failure, counted in every quality mean (`model.REQUEST_FAULTS`).
    "context_overflow",  # the prompt is longer than the model's context window
    "output_limit",  # the reply was cut at the output-token limit before it was usable
    "invalid_request",  # any other request the provider refused as invalid
    "content_filter",  # the provider's content filter refused the request
    "infra_error",  # the infrastructure failed (the model provider, after its retries): not the system's fault
    "data_unavailable",  # the task's data cannot be reached here: not run, left out of every mean
    "replay_miss",  # `compare --replay` met a request the recorded run never made: no verdict on the system
]


class Answer(BaseModel):
    """What a system returns. Fill the field that fits the task's question type."""

    text: str = ""  # the final answer as the system stated it
    choices: list[str] | None = None  # option letters, for choice tasks
    report: str | None = None  # Markdown report, for report tasks
    tool_call: ToolCall | None = None  # the predicted call, for function-calling tasks
    status: AnswerStatus = "completed"
    error: str | None = None


def answer_from_text(task: Task, text: str, status: AnswerStatus = "completed") -> Answer:
    """A free-text final answer; choice letters are extracted later by the scorer (documented there)."""
    if task.question_type == QuestionType.REPORT:
        return Answer(text=text, report=text, status=status)
    return Answer(text=text, status=status)


def answer_from_tool(task: Task, arguments: dict[str, Any]) -> Answer:
    """The arguments of an `answer` tool call as an Answer of the task's question type."""
    value = arguments.get("answer")
    if task.question_type in (QuestionType.SINGLE_CHOICE, QuestionType.MULTIPLE_CHOICE):
        letters = value if isinstance(value, list) else [value]
        choices = [str(v).strip().upper() for v in letters if v is not None and str(v).strip()]
        return Answer(text=", ".join(choices), choices=choices)
    return answer_from_text(task, "" if value is None else str(value))
