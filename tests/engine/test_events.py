"""The engine's events as a listener receives them, for a run with a scripted test model."""

from __future__ import annotations

from data_agent_compare.core import Answer, Message, RunContext, System, Task
from data_agent_compare.engine.events import RunFinished, StageStarted, UnitFinished, UnitStarted
from data_agent_compare.engine.progress import RunProgress
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message

from helpers import load_tasks, make_plan, registered_system


class OneCall(System):
    """A test system: one model call, then its answer."""

    name = "test_events_one_call"
    kind = "test"

    def run(self, task: Task, ctx: RunContext) -> Answer:
        ctx.generate([Message(role="user", content=task.question)])
        return Answer(text="A")


def test_a_listener_receives_stages_then_each_unit_started_before_it_finished_then_the_end_scripted(
    tmp_path, scripted_model
) -> None:
    tasks = load_tasks("bundled")[:3]
    events = []
    counts = RunProgress(total=3)
    with registered_system(OneCall):
        model = scripted_model(lambda request, context: tool_call_message("answer", {"answer": "A"}))
        plan = make_plan(tmp_path, tasks, model, ["test_events_one_call"], concurrency=2, executor="thread")
        manifest = execute(plan, listeners=[events.append, counts])
    kinds = [type(e).__name__ for e in events]
    first_unit = kinds.index("UnitStarted")
    assert set(kinds[:first_unit]) == {"StageStarted"} and events[first_unit - 1] == StageStarted("")
    assert "loading models" in [e.stage for e in events[:first_unit]]
    started = [(e.task_id, e.epoch) for e in events if isinstance(e, UnitStarted)]
    finished = [(e.record.task_id, e.record.epoch) for e in events if isinstance(e, UnitFinished)]
    assert sorted(started) == sorted(finished) == sorted((t.id, 1) for t in tasks)
    for unit in finished:  # each unit's start came before its finish
        start_at = next(i for i, e in enumerate(events) if isinstance(e, UnitStarted) and (e.task_id, e.epoch) == unit)
        end_at = next(
            i
            for i, e in enumerate(events)
            if isinstance(e, UnitFinished) and (e.record.task_id, e.record.epoch) == unit
        )
        assert start_at < end_at
    assert max(e.in_flight for e in events if isinstance(e, UnitStarted)) == 2  # two at a time, as asked
    assert events[-1] == RunFinished(plan.run_dir, "completed") and manifest.status == "completed"
    assert counts.done == 3 and counts.in_flight == 0 and counts.stage == ""
