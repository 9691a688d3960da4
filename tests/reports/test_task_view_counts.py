"""The task view shows the tokens a call spent that the embedded model counted (issue 36 item 7): a call the
watch stopped mid-generation read 412 tokens and generated 99; its step says so, never "0 in / 0 out"."""

from __future__ import annotations

import pytest

from data_agent_compare.core.model import MeteredModel, ModelConfig, ModelError, ModelProvider, RetrySettings
from data_agent_compare.core.trace import Budgets, Trace, TraceRecorder, Usage
from data_agent_compare.reports.drilldown import _step

from helpers import QUESTION


class StoppedMidGeneration(ModelProvider):
    """A scripted test provider failing as the embedded model does when the task's time runs out mid-call."""

    name = "stopped"
    bills_nothing = True

    def complete(self, request, config, *, timeout_s, context):
        raise ModelError("the task's time ran out", usage=Usage(input_tokens=412, output_tokens=99))


def test_scripted_stopped_call_of_the_embedded_model_shows_its_tokens_in_the_task_view() -> None:
    config = ModelConfig(alias="local", provider="stopped", model_id="gemma")
    recorder = TraceRecorder(Trace(task_id="t", system="s", model="local"), Budgets())
    model = MeteredModel(config, StoppedMidGeneration(), recorder, system="s", retries=RetrySettings(max_attempts=1))
    with pytest.raises(ModelError):
        model.generate(QUESTION)
    shown = _step(recorder.trace.model_calls[0])
    assert (shown["in"], shown["out"]) == (412, 99)
    assert recorder.trace.budget_tokens() == 511  # and the token budget counts them
