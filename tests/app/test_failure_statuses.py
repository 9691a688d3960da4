"""Failures counted where they belong: a request the provider refused because of what the system sent is the
system's failure (counted in accuracy); only the provider's own faults after the retries are `infra_error`;
an exception while building a task's tools is `error`; `--resume --retry-errors` runs infra errors again."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import CallContext, Message, ModelConfig, ModelError, ModelRequest, Task
from data_agent_compare.core.model import Price
from data_agent_compare.core.runlog import read_run
from data_agent_compare.core.task import QuestionType
from data_agent_compare.core.tool import DataUnavailable
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.http_deadline import status_error
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.reports.summary import markdown, summarize
from data_agent_compare.tasks.bundled import BundledBenchmark

from helpers import FakeOpenAIServer, FakeResponse, load_tasks, make_plan, steps_taken

FAST_RETRIES = {"max_attempts": 2, "base_backoff_s": 0.01, "max_backoff_s": 0.01}
OVERFLOW = "This model's maximum context length is 8192 tokens. However, your messages resulted in 9001 tokens."


def four_factoid_tasks() -> list[Task]:
    tasks = [t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID and t.gold]
    assert len(tasks) >= 4
    return tasks[:4]


def answers_or_fails(tasks: list[Task], failing: set[str], failure: ModelError):
    """A scripted model that answers the gold answer at once, except for the `failing` tasks."""
    gold = {task.id: task.gold.answer for task in tasks if task.gold}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.task_id in failing:
            raise copy.copy(failure)  # each call its own error: the retry policy writes its attempts into it
        return tool_call_message("answer", {"answer": gold[context.task_id]})

    return respond


def run_four(tmp_path: Path, scripted_model, failure: ModelError, **config: object):
    tasks = four_factoid_tasks()
    failing = {tasks[2].id, tasks[3].id}
    model = scripted_model(answers_or_fails(tasks, failing, failure))
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], retries=FAST_RETRIES, **config)
    execute(plan)
    return read_run(plan.run_dir), failing


def test_a_400_context_length_exceeded_from_a_scripted_model_is_a_failure_in_accuracy(tmp_path, scripted_model):
    refused = status_error(400, f"HTTP 400: {OVERFLOW}", code="context_length_exceeded")
    run, failing = run_four(tmp_path, scripted_model, refused)
    statuses = {r.task_id: r.status for r in run.records}
    assert {statuses[t] for t in failing} == {"context_overflow"}
    (row,) = summarize(run.records)
    assert (row.accuracy, row.accuracy_n) == (0.5, 4)  # 2 correct, 2 refused: not 1.0 on n=2
    assert (row.refused, row.infra_errors, row.errors) == (2, 0, 0)
    assert "| 2 | 0 |" in markdown([row], run.manifest)  # refused requests beside infra errors


@pytest.mark.parametrize(
    ("message", "code", "status"),
    [
        ("Invalid 'messages[1].content': string too long", None, "invalid_request"),
        ("Your request was flagged by our content filter", "content_filter", "content_filter"),
        ("prompt is too long: 210000 tokens > 200000 maximum", None, "context_overflow"),
    ],
)
def test_each_refusal_of_a_scripted_model_ends_with_the_systems_own_status(
    tmp_path, scripted_model, message, code, status
):
    run, failing = run_four(tmp_path, scripted_model, status_error(400, f"HTTP 400: {message}", code=code))
    assert {r.status for r in run.records if r.task_id in failing} == {status}


@pytest.mark.parametrize(
    "failure",
    [
        status_error(503, "HTTP 503: upstream unavailable"),
        status_error(429, "HTTP 429: rate limited"),
        ModelError("timed out (ReadTimeout)", retryable=True, kind="timeout"),
        ModelError("malformed completion response: no choices", retryable=True, kind="malformed"),
    ],
    ids=["5xx", "429", "timeout", "malformed"],
)
def test_provider_faults_after_the_retries_of_a_scripted_model_are_infra_errors(tmp_path, scripted_model, failure):
    run, failing = run_four(tmp_path, scripted_model, failure)
    failed = [r for r in run.records if r.task_id in failing]
    assert {r.status for r in failed} == {"infra_error"}
    assert all(r.retries == 1 for r in failed)  # retried (max_attempts 2) before giving up
    (row,) = summarize(run.records)
    assert (row.accuracy, row.accuracy_n, row.infra_errors, row.refused) == (1.0, 2, 2, 0)


def test_a_400_over_http_is_classified_from_the_error_code(tmp_path):
    """The openai-compatible provider against a local fake: OpenAI's code `context_length_exceeded` in the body."""
    tasks = four_factoid_tasks()[:1]
    error = {"message": "Too many input tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}
    with FakeOpenAIServer(default=FakeResponse({"error": error}, status=400)) as fake:
        model = ModelConfig(alias="fake", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        plan = make_plan(tmp_path, tasks, model, ["tool_use"], retries=FAST_RETRIES)
        execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert record.status == "context_overflow" and len(fake.requests) == 1  # a refusal is not retried


def test_a_refusal_seen_by_a_framework_through_the_endpoint_is_the_systems_failure(tmp_path):
    """LangGraph gets the endpoint's 502 and raises; the unit ends with what the provider said about the request."""
    pytest.importorskip("langchain")
    tasks = four_factoid_tasks()[:1]
    body = {"error": {"message": OVERFLOW, "type": "invalid_request_error", "code": "context_length_exceeded"}}
    with FakeOpenAIServer(default=FakeResponse(body, status=400)) as fake:
        model = ModelConfig(alias="fake", provider="openai-compatible", model_id="m", base_url=fake.base_url)
        plan = make_plan(tmp_path, tasks, model, ["langgraph_react"], retries=FAST_RETRIES)
        execute(plan)
    (record,) = read_run(plan.run_dir).records
    assert record.status == "context_overflow", record.error


class ToolsFailFor(BundledBenchmark):
    """The bundled benchmark whose tools cannot be built for one task (a bug of ours, or missing data)."""

    def __init__(self, failing: str, error: Exception) -> None:
        super().__init__(None)
        self.failing, self.error = failing, error

    def tools(self, task, settings):
        if task.id == self.failing:
            raise self.error
        return super().tools(task, settings)


def test_an_exception_while_building_tools_is_an_error_counted_in_accuracy(tmp_path, scripted_model):
    tasks = four_factoid_tasks()
    model = scripted_model(answers_or_fails(tasks, set(), ModelError("unused")))
    benchmark = ToolsFailFor(tasks[0].id, RuntimeError("the index would not open"))
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], benchmark=benchmark)
    execute(plan)
    run = read_run(plan.run_dir)
    failed = next(r for r in run.records if r.task_id == tasks[0].id)
    assert failed.status == "error" and "RuntimeError: the index would not open" in (failed.error or "")
    (row,) = summarize(run.records)
    assert (row.errors, row.unavailable, row.accuracy_n, row.accuracy) == (1, 0, 4, 0.75)


def test_data_the_benchmark_declares_missing_is_still_unavailable(tmp_path, scripted_model):
    tasks = four_factoid_tasks()
    model = scripted_model(answers_or_fails(tasks, set(), ModelError("unused")))
    benchmark = ToolsFailFor(tasks[0].id, DataUnavailable("database 'shop': file not found"))
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], benchmark=benchmark)
    execute(plan)
    (row,) = summarize(read_run(plan.run_dir).records)
    assert (row.errors, row.unavailable, row.accuracy_n, row.accuracy) == (0, 1, 3, 1.0)


def test_retry_errors_runs_infra_errors_again_and_keeps_their_spend(tmp_path, scripted_model):
    tasks = four_factoid_tasks()
    flaky, outage = tasks[3].id, {"on": True}
    gold = {task.id: task.gold.answer for task in tasks if task.gold}

    def respond(request: ModelRequest, context: CallContext) -> Message:
        if context.task_id == flaky and outage["on"]:
            if steps_taken(request) == 0:  # a paid first call, then the provider goes down
                return tool_call_message("get_schema_info", {})
            raise status_error(502, "HTTP 502: bad gateway")
        return tool_call_message("answer", {"answer": gold[context.task_id]})

    price = Price(input_per_mtok=1000.0, output_per_mtok=1000.0)
    model = scripted_model(respond).model_copy(update={"price": price})
    plan = make_plan(tmp_path, tasks, model, ["tool_use"], retries={"max_attempts": 1})
    execute(plan)
    failed = next(r for r in read_run(plan.run_dir).records if r.task_id == flaky)
    assert failed.status == "infra_error" and failed.usage.cost_usd > 0

    outage["on"] = False
    again = make_plan(tmp_path, tasks, model, ["tool_use"], retries={"max_attempts": 1})
    again.retry_errors = True
    execute(again, resume=True)
    run = read_run(again.run_dir)
    assert len((again.run_dir / "results.jsonl").read_text().splitlines()) == 5
    assert len(run.records) == 4  # the new record supersedes the infra error's
    retried = next(r for r in run.records if r.task_id == flaky)
    assert retried.status == "completed" and retried.retried_attempts == [failed.attempt]
    assert retried.retried_usage == failed.usage
    kept = again.run_dir / failed.trace_file.replace(".json", f".try-{failed.attempt}.json")
    assert kept.is_file() and '"infra_error"' in kept.read_text()  # the failed attempt's trace is kept beside
    own = run.trace(retried).usage().cost_usd  # this attempt's calls
    assert retried.usage.cost_usd == pytest.approx(own + failed.usage.cost_usd)
    (row,) = summarize(run.records)
    assert (row.accuracy, row.accuracy_n, row.infra_errors) == (1.0, 4, 0)
    assert row.total_cost_usd == pytest.approx(sum(r.usage.cost_usd for r in run.records))
    assert run.interrupted == []  # the superseded attempt's calls are not counted a second time

    execute(again, resume=True)  # nothing left to retry
    assert len((again.run_dir / "results.jsonl").read_text().splitlines()) == 5


def test_retry_errors_without_resume_exits_2(tmp_path):
    result = CliRunner().invoke(app, ["--retry-errors", "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and "--retry-errors goes with --resume" in result.output


def test_resume_without_retry_errors_keeps_infra_errors(tmp_path, scripted_model):
    run, _ = run_four(tmp_path, scripted_model, status_error(503, "HTTP 503: down"))
    plan = make_plan(tmp_path, four_factoid_tasks(), run.manifest.models[0], ["tool_use"], retries=FAST_RETRIES)
    execute(plan, resume=True)
    assert len((plan.run_dir / "results.jsonl").read_text().splitlines()) == 4
