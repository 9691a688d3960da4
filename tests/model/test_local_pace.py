"""The embedded model's deadline follows its own pace: a call on a slow (busy) machine goes on, a call whose
pace collapses against what the model reaches here is stopped as stalled, and the task's time still ends it."""

from __future__ import annotations

import pytest

from data_agent_compare.providers import local
from data_agent_compare.providers.local import Pace, PaceWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(local.time, "monotonic", fake)
    return fake


def decode(watch: PaceWatch, clock: Clock, tokens: int, seconds_each: float) -> bool:
    """Feed `tokens` tokens `seconds_each` apart; True when the watch stopped the call."""
    for _ in range(tokens):
        clock.now += seconds_each
        if watch.should_stop():
            return True
    return False


def known_pace(tokens_per_s: float) -> Pace:
    pace = Pace()
    pace.learn(100, 100 / tokens_per_s)
    return pace


def test_a_call_four_times_slower_than_usual_runs_on_past_any_fixed_timeout(clock: Clock):
    watch = PaceWatch(known_pace(20.0), deadline=clock.now + 3600)
    assert not decode(watch, clock, 256, 1 / 5)  # 5 tokens/s for 51 s: a busy machine
    assert watch.stopped is None


def test_a_call_whose_pace_collapses_is_stopped_as_stalled(clock: Clock):
    watch = PaceWatch(known_pace(20.0), deadline=clock.now + 3600)
    assert decode(watch, clock, 40, 1.0)  # 1 token/s: a twentieth of its pace here
    assert watch.stopped is not None and watch.stopped.startswith("the local model stalled")
    assert "under a tenth of its 20.0 tokens/s" in watch.stopped


def test_the_tasks_time_ends_a_call_whatever_its_pace(clock: Clock):
    watch = PaceWatch(Pace(), deadline=clock.now + 2.0)
    assert decode(watch, clock, 100, 0.1)
    assert watch.stopped is not None and "ran past the call's deadline" in watch.stopped


def test_the_pace_is_learned_from_finished_calls_only(clock: Clock):
    pace = Pace()
    watch = PaceWatch(pace, deadline=clock.now + 3600)
    decode(watch, clock, 11, 0.1)
    watch.finished(generated=11)
    assert pace.tokens_per_s == pytest.approx(10.0)
    stopped = PaceWatch(pace, deadline=clock.now + 0.05)
    decode(stopped, clock, 5, 0.1)
    stopped.finished(generated=5)
    assert pace.tokens_per_s == pytest.approx(10.0)  # a call cut short says nothing of the model


class StubLlama:
    """A scripted test stand-in for llama.cpp that generated 99 tokens before the watch stopped it."""

    def create_completion(self, prompt: str, **limits: object) -> dict:
        return {
            "choices": [{"text": "{", "finish_reason": "length"}],
            "usage": {"prompt_tokens": 412, "completion_tokens": 99},
        }


def test_scripted_call_stopped_by_the_watch_keeps_the_tokens_it_spent(clock: Clock):
    watch = PaceWatch(known_pace(20.0), deadline=clock.now + 1.0)
    watch.stopped = "the task's time ran out during generation"
    with pytest.raises(local.ModelError) as stopped:
        local._complete(StubLlama(), "prompt", None, 320, 0.0, 0, watch)
    spent = stopped.value.usage
    assert spent is not None and (spent.input_tokens, spent.output_tokens) == (412, 99)  # shown, never 0 in / 0 out
