"""Phase accounting against known truth: a fake model server with a fixed latency and a tool
with a known duration. Phase sums must match the truth within tolerance and never exceed wall time."""

import time
from typing import ClassVar

from data_agent_compare.core.context import RunContext
from data_agent_compare.core.model import MeteredModel, ModelConfig, get_provider
from data_agent_compare.core.task import Gold, QuestionType, Task
from data_agent_compare.core.tool import Tool, ToolEnvironment, ToolResult
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder
from data_agent_compare.tools.answer import AnswerTool
from data_agent_compare.workflows.tool_use import ToolUseWorkflow

from helpers import FakeOpenAIServer, tool_call_response

MODEL_LATENCY_S = 0.25
TOOL_DURATION_S = 0.15
TOLERANCE_S = 0.1  # per call: HTTP round trip, JSON parsing, thread scheduling


class SleepTool(Tool):
    """A test tool whose real work takes a known time."""

    name = "wait_for_data"
    description = "Waits."
    parameters: ClassVar[dict] = {"type": "object", "properties": {}, "additionalProperties": False}

    def run(self, arguments):
        time.sleep(TOOL_DURATION_S)
        return ToolResult(success=True, content="done")


def test_phase_sums_match_known_latencies_and_stay_within_wall_time():
    task = Task(
        id="T1",
        benchmark="test",
        question="q",
        question_type=QuestionType.SINGLE_CHOICE,
        options={"A": "a", "B": "b"},
        gold=Gold(answer="B"),
    )
    with FakeOpenAIServer(latency_s=MODEL_LATENCY_S) as fake:
        fake.enqueue(
            tool_call_response([("c1", "wait_for_data", "{}")]),
            tool_call_response([("c2", "wait_for_data", "{}")]),
            tool_call_response([("c3", "answer", '{"answer": "B"}')]),
        )
        config = ModelConfig(alias="fake", provider="openai-compatible", model_id="fake", base_url=fake.base_url)
        recorder = TraceRecorder(Trace(task_id="T1", system="tool_use", model="fake"), Budgets())
        env = ToolEnvironment([SleepTool(), AnswerTool(task)], recorder)
        model = MeteredModel(config, get_provider("openai-compatible"), recorder, system="tool_use")
        recorder.start()
        answer = ToolUseWorkflow().run(task, RunContext(task, env, model))
        trace = recorder.finish(answer.status)

    assert answer.choices == ["B"]
    phases = trace.by_phase()
    truth = {"decision": 2 * MODEL_LATENCY_S, "execute": 2 * TOOL_DURATION_S, "generate": MODEL_LATENCY_S}
    calls = {"decision": 2, "execute": 2, "generate": 2}  # generate: the answer-writing call and the answer tool
    for phase, seconds in truth.items():
        measured = phases[phase].latency_s
        assert seconds <= measured <= seconds + calls[phase] * TOLERANCE_S, (phase, measured)
    assert phases["decision"].model_calls == 2 and phases["generate"].model_calls == 1
    assert phases["execute"].tool_calls == 2
    measured_total = sum(p.latency_s for name, p in phases.items() if name != "other")
    assert measured_total <= trace.wall_time_s
    assert abs(measured_total + phases["other"].latency_s - trace.wall_time_s) < 1e-9
    # a sequential workflow's steps never overlap: each starts after the previous one ended
    for step, following in zip(trace.steps, trace.steps[1:], strict=False):
        assert step.start_s >= 0 and step.start_s + step.duration_s <= following.start_s
