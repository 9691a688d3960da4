"""The phase rules every system shares (core.trace.PhaseRules), checked without any workflow."""

from __future__ import annotations

import pytest

from data_agent_compare.core import Phase
from data_agent_compare.core.trace import ModelCallStep, PhaseRules, ToolCallStep, Usage, phase_seconds


@pytest.fixture
def rules() -> PhaseRules:
    rules = PhaseRules()
    rules.answer_tools = {"answer", "return_answer"}
    return rules


def test_a_call_offered_only_answer_tools_or_calling_one_is_generate(rules):
    assert rules.before_model_call(None, ["answer"]) is Phase.GENERATE
    phase = rules.before_model_call(None, ["execute_sql", "answer"])
    assert phase is Phase.DECISION
    assert rules.after_model_call(None, phase, ["answer"]) is Phase.GENERATE
    assert rules.tool_call(None, "return_answer") is Phase.GENERATE


def test_after_a_failure_or_a_rejection_the_same_agents_next_call_and_its_tools_are_retries(rules):
    rules.redo("actor")  # a failed tool call of the actor, or a critic's "revise"
    assert rules.before_model_call("critic", []) is Phase.DECISION  # another agent is not affected
    retry = rules.before_model_call("actor", ["execute_sql"])
    assert retry is Phase.RETRY
    assert rules.after_model_call("actor", retry, ["execute_sql"]) is Phase.RETRY
    assert rules.tool_call("actor", "execute_sql") is Phase.RETRY
    assert rules.tool_call("critic", "execute_sql") is Phase.EXECUTE
    # the redo is used up by that call
    assert rules.before_model_call("actor", ["execute_sql"]) is Phase.DECISION


def step(kind: str, phase: Phase, start: float, duration: float, queue: float = 0.0) -> ModelCallStep | ToolCallStep:
    common = {"index": 0, "phase": phase, "started_at": "", "duration_s": duration, "start_s": start, "success": True}
    if kind == "tool":
        return ToolCallStep(tool="t", arguments={}, **common)
    return ModelCallStep(model="m", provider="p", provider_model="p/m", usage=Usage(), queue_s=queue, **common)


def test_overlapping_steps_count_each_instant_once_and_add_up_to_the_wall_time():
    steps = [
        step("model", Phase.DECISION, 0.0, 1.0),
        step("model", Phase.DECISION, 0.5, 1.0),  # overlaps the first: same phase, counted once
        step("tool", Phase.EXECUTE, 1.0, 1.0),  # overlaps the second: that half second is shared
    ]
    seconds = phase_seconds(steps, wall_time_s=2.5)
    assert seconds == pytest.approx({"decision": 1.25, "execute": 0.75, "other": 0.5})
    assert sum(seconds.values()) == pytest.approx(2.5)


def test_a_model_calls_queueing_is_its_own_bucket():
    seconds = phase_seconds([step("model", Phase.GENERATE, 0.0, 1.0, queue=0.25)], wall_time_s=1.0)
    assert seconds == pytest.approx({"queue": 0.25, "generate": 0.75, "other": 0.0})


def test_traces_written_before_steps_had_a_start_are_laid_end_to_end():
    old = [step("model", Phase.DECISION, 0.0, 1.0), step("tool", Phase.EXECUTE, 0.0, 0.5)]
    for s in old:
        s.start_s = None
    assert phase_seconds(old, wall_time_s=2.0) == pytest.approx({"decision": 1.0, "execute": 0.5, "other": 0.5})


def test_a_model_call_inside_a_tool_step_is_the_model_calls_time_and_the_tool_keeps_only_its_own():
    # a semantic operator's tool step 0–10 s whose model call runs 1–9 s
    nested = [step("tool", Phase.EXECUTE, 0.0, 10.0), step("model", Phase.DECISION, 1.0, 8.0)]
    seconds = phase_seconds(nested, wall_time_s=10.0)
    assert seconds == pytest.approx({"execute": 2.0, "decision": 8.0, "other": 0.0})


def test_batched_model_calls_inside_a_tool_step_overlap_as_siblings_and_phases_add_up_to_wall_time():
    steps = [
        step("tool", Phase.EXECUTE, 0.0, 10.0),
        step("model", Phase.DECISION, 1.0, 4.0, queue=0.5),  # 1–5, queued 1–1.5
        step("model", Phase.GENERATE, 3.0, 4.0),  # 3–7: overlaps its sibling 3–5, shared
    ]
    seconds = phase_seconds(steps, wall_time_s=12.0)
    # 0–1 execute; 1–1.5 queue; 1.5–3 decision; 3–5 shared decision/generate; 5–7 generate; 7–10 execute;
    # 10–12 other
    expected = {"execute": 4.0, "decision": 2.5, "queue": 0.5, "generate": 3.0, "other": 2.0}
    assert seconds == pytest.approx(expected)
    assert sum(seconds.values()) == pytest.approx(12.0)
