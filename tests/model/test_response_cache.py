"""The response cache (providers/cache.py): content-addressed by request, shared across runs, each
epoch its own samples; a cached call costs nothing, says so, and keeps what the model cost."""

from __future__ import annotations

import json
from collections import Counter

from data_agent_compare.core import CallContext, Message, ModelConfig, ModelRequest
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.cache import request_key
from data_agent_compare.providers.scripted import tool_call_message

from helpers import QUESTION, SQL_TOOL, load_tasks, make_plan, steps_taken

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def priced(model: ModelConfig) -> ModelConfig:
    return ModelConfig.model_validate({**model.model_dump(), "price": PRICE})


def choice_tasks(count: int = 2):
    return [t for t in load_tasks("bundled") if t.question_type == "single_choice"][:count]


class CountingModel:
    """A scripted test model: one SQL step, then the letter of this call's epoch-sample ("A" on a task's
    first answer, "B" on its second, ...), counting every call it answers."""

    def __init__(self) -> None:
        self.calls = 0
        self.answers: Counter[str] = Counter()

    def __call__(self, request: ModelRequest, context: CallContext) -> Message:
        self.calls += 1
        if steps_taken(request) == 0:
            return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM `Sales Team`"})
        letter = "ABCD"[self.answers[context.task_id] % 4]
        self.answers[context.task_id] += 1
        return tool_call_message("answer", {"answer": letter})


def run(tmp_path, name, model, tasks, cache_dir, **config):
    plan = make_plan(
        tmp_path / name, tasks, model, ["tool_use"], cache={"enabled": True, "dir": str(cache_dir)}, **config
    )
    execute(plan)
    return read_run(plan.run_dir)


def test_a_cached_rerun_calls_no_model_costs_nothing_and_marks_every_call_with_the_scripted_model(
    tmp_path, scripted_model
):
    counting = CountingModel()
    model = priced(scripted_model(counting))
    tasks = choice_tasks()
    first = run(tmp_path, "first", model, tasks, tmp_path / "cache")
    paid = counting.calls
    again = run(tmp_path, "again", model, tasks, tmp_path / "cache")

    assert paid == 4 and counting.calls == paid  # the second run asked the model nothing
    assert (again.cached_calls, again.journaled_calls, first.cached_calls) == (4, 4, 0)
    before, after = {r.key: r for r in first.records}, {r.key: r for r in again.records}
    for key, original in before.items():
        cached = after[key]
        assert (cached.answer, cached.scores, cached.status) == (original.answer, original.scores, original.status)
        assert cached.usage.input_tokens == original.usage.input_tokens > 0  # tokens kept: budgets stop alike
        assert original.usage.cost_usd > 0 and cached.usage.cost_usd == 0 and cached.usage.cost_source == "cached"
        steps = again.trace(cached).model_calls
        assert all(s.cached is not None and s.cached.source == "cache" for s in steps)
        assert sum(s.cached.original_cost_usd for s in steps) == original.usage.cost_usd
    assert all(s.cached is None and s.request_key for r in first.records for s in first.trace(r).model_calls)


def test_each_epoch_keeps_its_own_cached_samples_with_the_scripted_model(tmp_path, scripted_model):
    counting = CountingModel()
    model = scripted_model(counting)
    tasks = choice_tasks(1)
    first = run(tmp_path, "first", model, tasks, tmp_path / "cache", epochs=2)
    again = run(tmp_path, "again", model, tasks, tmp_path / "cache", epochs=2)
    answers = {r.epoch: r.answer["choices"] for r in first.records}
    assert answers == {1: ["A"], 2: ["B"]}  # the model sampled differently in each epoch
    assert {r.epoch: r.answer["choices"] for r in again.records} == answers and counting.calls == 4


def test_the_cache_is_off_by_default_and_a_different_model_id_is_a_different_entry_with_a_scripted_model(
    tmp_path, scripted_model
):
    counting = CountingModel()
    model = scripted_model(counting)
    plan = make_plan(tmp_path / "plain", choice_tasks(1), model, ["tool_use"])
    assert plan.cache is None
    execute(plan)
    assert counting.calls == 2
    other = model.model_copy(update={"model_id": "another-model"})
    request = ModelRequest(messages=QUESTION, tools=[SQL_TOOL])
    assert request_key(request, model) != request_key(request, other)
    assert request_key(request, model) == request_key(
        ModelRequest.model_validate(json.loads(request.model_dump_json())), model
    )
    with_password = model.model_copy(update={"base_url": "http://user:secret@127.0.0.1:1/v1"})
    assert request_key(request, with_password) == request_key(
        request, model.model_copy(update={"base_url": "http://user:other@127.0.0.1:1/v1"})
    )  # a key never depends on (or reveals) a password
