"""Fault injection through the whole runner: a local OpenAI-compatible server answers 20% of calls with a
fault (429 with Retry-After, 500, a 200 without choices, an empty body, invalid JSON, a reset connection,
a trickled body, a hang). Every unit ends completed or with an explicit error, the attempts in the traces
equal the server's count, every injected fault is one recorded failed attempt of the right kind, and the
totals of records, traces and summary add up. Small backoffs and timeouts keep it to seconds."""

from __future__ import annotations

import itertools
import json
import threading
from collections import Counter
from pathlib import Path

import openai
import pytest

from data_agent_compare.core import (
    Answer,
    Benchmark,
    Loading,
    Message,
    ModelConfig,
    RunContext,
    ScoringRules,
    System,
    Task,
    Tool,
    ToolSettings,
    Trace,
)
from data_agent_compare.core.model import RetrySettings
from data_agent_compare.core.runlog import read_records, read_run
from data_agent_compare.engine.runner import execute
from data_agent_compare.reports import markdown, summarize

from helpers import (
    FAULT_KINDS,
    FakeOpenAIServer,
    FakeResponse,
    RecordedRequest,
    fault_response,
    load_tasks,
    make_plan,
    registered_system,
    text_response,
    usage,
)

KIND_OF_FAULT = {
    "429": "rate_limit",
    "500": "server_error",
    "no_choices": "malformed",
    "empty": "malformed",
    "invalid_json": "malformed",
    "reset": "connection",
    "trickle": "timeout",
    "hang": "timeout",
}
POLICY = RetrySettings(
    max_attempts=4,
    base_backoff_s=0.01,
    max_backoff_s=0.05,
    connect_timeout_s=2.0,
    read_timeout_s=1.5,  # generous: a good reply slowed by a busy machine must not time out
    attempt_timeout_s=2.5,
    call_timeout_s=15.0,
)


class ThreeCalls(System):
    """A test system: three model calls in process, then the last reply's text as its answer."""

    name = "test_three_calls"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        text = ""
        for _ in range(3):
            text = ctx.generate([Message(role="user", content=task.question)]).message.content or ""
        return Answer(text=text)


class ThroughTheEndpoint(System):
    """A test system as a framework runs: two calls with the official openai client through the gateway."""

    name = "test_openai_client"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        with ctx.openai_endpoint() as ep:
            client = openai.OpenAI(base_url=ep.base_url, api_key=ep.api_key)  # default retries: the gateway says no
            text = ""
            for _ in range(2):
                reply = client.chat.completions.create(model=ep.model, messages=[{"role": "user", "content": "?"}])
                text = reply.choices[0].message.content or ""
        return Answer(text=text)


class NoTools(Benchmark):
    """The bundled tasks without their tools (no document index to load): only model calls are tested."""

    name = "test_no_tools"
    loading = Loading(needs_path=False)
    scoring = ScoringRules(scorers=("exact_match",))

    def load(self) -> list[Task]:
        return []

    def tools(self, task: Task, settings: ToolSettings) -> list[Tool]:
        return []


class FaultyServer:
    """Every fifth request gets the next fault, in turn; the others a good answer."""

    def __init__(self) -> None:
        self.injected: Counter[str] = Counter()
        self._count = itertools.count(1)
        self._faults = itertools.cycle(FAULT_KINDS)
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> FakeResponse:
        with self._lock:
            if next(self._count) % 5:
                return text_response("A", usage_body=usage(10, 5, cost=0.0001))
            fault = next(self._faults)
            self.injected[fault] += 1
        response = fault_response(fault)
        if fault == "trickle":
            response.trickle_s = 0.1  # ~40 s for the whole body: only the attempt's deadline ends it
        return response


def bare_tasks(count: int) -> list[Task]:
    """Bundled single-choice tasks without their data sources: nothing to load but the model calls."""
    tasks = [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:count]
    return [task.model_copy(update={"data": []}) for task in tasks]


def traces(run_dir: Path) -> list[Trace]:
    return [Trace.model_validate_json(path.read_text()) for path in sorted((run_dir / "traces").rglob("*.json"))]


@pytest.fixture
def systems():
    with registered_system(ThreeCalls), registered_system(ThroughTheEndpoint):
        yield [ThreeCalls.name, ThroughTheEndpoint.name]


def test_faults_are_retried_recorded_and_counted(tmp_path: Path, systems: list[str]) -> None:
    tasks = bare_tasks(12)
    faulty = FaultyServer()
    with FakeOpenAIServer() as server:
        server.responder = faulty
        model = ModelConfig(alias="faulty", provider="openai-compatible", model_id="m", base_url=server.base_url)
        plan = make_plan(tmp_path, tasks, model, systems, NoTools(), epochs=3, concurrency=8, retries=POLICY)
        execute(plan)
        sent = len([r for r in server.requests if r.method == "POST"])

    records, _ = read_records(plan.run_dir)
    assert len(records) == len(tasks) * 3 * len(systems)
    assert {r.status for r in records} <= {"completed", "infra_error"}
    assert all(r.error for r in records if r.status == "infra_error")
    all_traces = traces(plan.run_dir)
    steps = [step for trace in all_traces for step in trace.model_calls]

    # The attempts in the traces are the server's count; each injected fault is one failed attempt of its kind.
    assert sum(step.attempts for step in steps) == sent
    recorded = Counter(attempt.kind for step in steps for attempt in step.failed_attempts)
    expected = Counter()
    for fault, times in faulty.injected.items():
        expected[KIND_OF_FAULT[fault]] += times
    assert recorded == expected and set(faulty.injected) == set(FAULT_KINDS)
    assert all(step.duration_s < POLICY.call_timeout_s + 0.5 for step in steps)  # the hard deadline held

    # Totals add up: records = traces = summary; phases (backoff included) = wall time.
    assert sum(r.retries for r in records) == sum(t.retries() for t in all_traces) == sent - len(steps)
    assert sum(r.provider_errors for r in records) == sum(expected.values())
    assert sum(r.backoff_s for r in records) == pytest.approx(sum(t.backoff_s() for t in all_traces))
    assert sum(r.usage.input_tokens for r in records) == 10 * (sent - sum(expected.values()))
    for trace in all_traces:
        assert sum(p.latency_s for p in trace.by_phase().values()) == pytest.approx(trace.wall_time_s, abs=1e-6)
    rows = summarize(records)
    assert sum(row.retries for row in rows) == sum(r.retries for r in records)
    assert sum(row.provider_errors for row in rows) == sum(expected.values())
    summary = markdown(rows, read_run(plan.run_dir).manifest)  # summary.md: per system and model
    assert "total retries / provider errors / backoff s" in summary and "| backoff |" in summary
    for row in rows:
        assert f"| {row.retries} / {row.provider_errors} / {row.backoff_s:.1f} |" in summary
    assert json.loads((plan.run_dir / "manifest.json").read_text())["config"]["retries"]["max_attempts"] == 4


def test_a_provider_that_keeps_failing_ends_each_unit_with_an_explicit_infra_error(
    tmp_path: Path, systems: list[str]
) -> None:
    tasks = bare_tasks(2)
    with FakeOpenAIServer(default=fault_response("500")) as server:
        model = ModelConfig(alias="down", provider="openai-compatible", model_id="m", base_url=server.base_url)
        plan = make_plan(tmp_path, tasks, model, systems, NoTools(), concurrency=4, retries=POLICY)
        execute(plan)
        sent = len(server.requests)

    records, _ = read_records(plan.run_dir)
    assert [r.status for r in records] == ["infra_error"] * 4
    assert all("HTTP 500" in (r.error or "") or "502" in (r.error or "") for r in records)
    steps = [step for trace in traces(plan.run_dir) for step in trace.model_calls]
    assert len(steps) == 4 and all(not step.success and step.attempts == POLICY.max_attempts for step in steps)
    assert sent == 4 * POLICY.max_attempts == sum(r.retries + r.model_calls for r in records)
    assert sum(r.provider_errors for r in records) == sent


def test_a_trickling_server_cannot_keep_a_task_past_its_wall_time(tmp_path: Path, systems: list[str]) -> None:
    """Before the hard deadline, a byte every 0.25 s kept a task with a 10 s budget for 119 s."""
    (task,) = bare_tasks(1)
    with FakeOpenAIServer(default=fault_response("trickle")) as server:
        model = ModelConfig(alias="slow", provider="openai-compatible", model_id="m", base_url=server.base_url)
        plan = make_plan(tmp_path, [task], model, systems[:1], NoTools(), budgets={"wall_time_s": 3})  # default policy
        execute(plan)

    (record,) = read_records(plan.run_dir)[0]
    assert record.status == "time_limit" and 3.0 <= record.latency_s < 3.5
    (step,) = traces(plan.run_dir)[0].model_calls
    assert not step.success and step.attempts == 1 == len(server.requests) and step.duration_s < 3.2
