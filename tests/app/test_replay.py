"""`compare --replay RUN_DIR`: every system re-run against the recorded model responses, with no model,
gives identical answers and scores; a request the recording never saw ends its unit `replay_miss`."""

from __future__ import annotations

import json

import httpx
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core import (
    PROVIDERS,
    Answer,
    Budgets,
    CallContext,
    Message,
    ModelError,
    ModelRequest,
    RunContext,
    System,
    Task,
)
from data_agent_compare.core.runlog import RunLog, read_run
from data_agent_compare.core.system import SystemSetup
from data_agent_compare.engine.runner import execute, plan_replay
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.reports import summarize

from helpers import (
    FakeOpenAIServer,
    load_tasks,
    make_plan,
    registered_system,
    scripted_provider,
    steps_taken,
    tool_call_response,
    usage,
)

runner = CliRunner()


class HttpAsker(System):
    """A test system that asks the model through the gateway's OpenAI-compatible endpoint, as frameworks do."""

    name = "test_http_asker"
    kind = "test"
    prompt = "Answer with one letter."  # changed by a test between recording and replay

    def run(self, task: Task, ctx: RunContext) -> Answer:
        with ctx.openai_endpoint() as endpoint:
            body = {
                "model": endpoint.model,
                "messages": [{"role": "user", "content": f"{self.prompt}\n{task.question}"}],
            }
            headers = {"Authorization": f"Bearer {endpoint.api_key}"}
            reply = httpx.post(f"{endpoint.base_url}/chat/completions", json=body, headers=headers, timeout=30).json()
        return ctx.answer_from_text(reply["choices"][0]["message"]["content"])


def scripted(request: ModelRequest, context: CallContext) -> Message:
    """A scripted test model: SQL first, then an answer; the judge scores reports; HTTP askers get a letter."""
    if context.system == "judge":
        return Message(role="assistant", content=json.dumps({"score": 1, "justification": "covers it"}))
    if context.system == HttpAsker.name:
        return Message(role="assistant", content="C")
    if steps_taken(request) == 0:
        return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM `Sales Team`"})
    return tool_call_message("answer", {"answer": "B"})


def tasks_of_each_kind() -> list[Task]:
    tasks = load_tasks("bundled")
    return [next(t for t in tasks if t.question_type == kind) for kind in ("single_choice", "factoid", "report")]


def record(tmp_path) -> RunLog:
    """A run recorded with the scripted test model (and judge), which is unregistered afterwards."""
    tasks = tasks_of_each_kind()
    with scripted_provider() as install:
        model = install(scripted)
        plan = make_plan(tmp_path, tasks, model, ["tool_use", HttpAsker.name], task_ids=[t.id for t in tasks])
        plan.judge = model
        plan.config = plan.config.model_copy(update={"judge": model.alias})
        execute(plan)
    assert "scripted" not in PROVIDERS  # no model is reachable from here on
    return read_run(plan.run_dir)


def comparable(run: RunLog) -> dict:
    return {
        r.key: (r.status, r.answer, r.scores, r.usage.input_tokens, r.usage.output_tokens, r.model_calls)
        for r in run.records
    }


def test_a_run_recorded_with_a_scripted_model_replays_to_identical_answers_and_scores_with_no_model_reachable(tmp_path):
    with registered_system(HttpAsker):
        recorded = record(tmp_path)
        execute(plan_replay(str(recorded.run_dir), str(tmp_path / "replay")))
    replayed = read_run(tmp_path / "replay")

    assert len(recorded.records) == 6 and {r.status for r in recorded.records} == {"completed"}
    assert comparable(replayed) == comparable(recorded)
    report = next(r for r in replayed.records if r.question_type == "report" and r.system == "tool_use")
    assert report.scores["rs"] == 1.0 and report.judge_usage.cost_source == "cached"  # the judge replayed too
    http = [s for r in replayed.records if r.system == HttpAsker.name for s in replayed.trace(r).model_calls]
    assert http and all(s.via_http and s.cached.source == "replay" for s in http)
    assert replayed.manifest.replay_of == str(recorded.run_dir) and replayed.manifest.status == "completed"


def test_a_request_the_recording_never_saw_ends_its_unit_as_a_replay_miss_with_a_scripted_model(tmp_path, monkeypatch):
    with registered_system(HttpAsker):
        recorded = record(tmp_path)
        monkeypatch.setattr(HttpAsker, "prompt", "Answer with one letter, please.")  # a changed prompt
        execute(plan_replay(str(recorded.run_dir), str(tmp_path / "replay")))
    replayed = read_run(tmp_path / "replay")

    statuses = {(r.system, r.status) for r in replayed.records}
    assert statuses == {("tool_use", "completed"), (HttpAsker.name, "replay_miss")}
    miss = next(r for r in replayed.records if r.status == "replay_miss")
    assert "no recorded response for call 1 of this unit" in miss.error
    row = next(row for row in summarize(replayed.records) if row.system == HttpAsker.name)
    assert row.replay_misses == 3 and row.accuracy_n == 0 and row.errors == 0  # counted, and no verdict


def test_compare_replay_through_the_cli_with_the_model_server_gone(tmp_path):
    out, again = tmp_path / "run", tmp_path / "replayed"
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10, cost=0.002))
    with FakeOpenAIServer(default=answer) as fake:
        flags = ["--models", "openai-compatible:m", "--base-url", fake.base_url, "--limit", "2", "--out", str(out)]
        recorded = runner.invoke(app, flags)
    assert recorded.exit_code == 0, recorded.output
    refused = runner.invoke(app, ["--replay", str(out), "--out", str(again), "--workflows", "planning"])
    assert refused.exit_code == 2 and "--replay" in refused.output and "--workflows" in refused.output

    replayed = runner.invoke(app, ["--replay", str(out), "--out", str(again)])  # the server is gone
    assert replayed.exit_code == 0, replayed.output
    assert comparable(read_run(again)) == comparable(read_run(out))
    assert all(r.usage.cost_usd == 0 for r in read_run(again).records)
    results = again / "results.jsonl"
    results.write_text(results.read_text().splitlines(keepends=True)[0])  # as if the replay had been stopped
    resumed = runner.invoke(app, ["--resume", "--out", str(again)])  # goes on replaying, with no model
    assert resumed.exit_code == 0, resumed.output
    assert comparable(read_run(again)) == comparable(read_run(out))
    replayed = read_run(again)  # the journal also has the calls of the replayed units whose records were dropped
    assert replayed.cached_calls == replayed.journaled_calls > sum(r.model_calls for r in replayed.records)
    calls = replayed.cached_calls
    summary = (again / "summary.md").read_text()
    assert f"{calls} of {calls} model call(s) were answered by the response cache or a replay" in summary


def test_a_run_without_request_keys_cannot_be_replayed(tmp_path):
    result = runner.invoke(app, ["--replay", str(tmp_path / "nothing-here")])
    assert result.exit_code == 2 and "cannot replay" in result.output and "not a run directory" in result.output


def test_compare_cache_asks_the_model_server_once_for_two_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the default cache folder, here
    answer = tool_call_response([("c1", "answer", '{"answer": "A"}')], usage_body=usage(100, 10, cost=0.002))
    with FakeOpenAIServer(default=answer) as fake:
        flags = ["--models", "openai-compatible:m", "--base-url", fake.base_url, "--task-ids", "BND001", "--cache"]
        first = runner.invoke(app, [*flags, "--out", str(tmp_path / "first")])
        asked = len(fake.requests)
        second = runner.invoke(app, [*flags, "--out", str(tmp_path / "second")])
    assert first.exit_code == 0 and second.exit_code == 0, first.output + second.output
    assert asked >= 1 and len(fake.requests) == asked  # the second run asked the server nothing
    assert list((tmp_path / "xdg" / "data-agent-compare" / "responses").rglob("*.json"))
    assert comparable(read_run(tmp_path / "second")) == comparable(read_run(tmp_path / "first"))
    (record,) = read_run(tmp_path / "second").records
    assert record.usage.cost_usd == 0 and read_run(tmp_path / "first").records[0].usage.cost_usd > 0


class IndexingSystem(System):
    """A test system that builds its "index" with a model call in `prepare`, then answers in one call."""

    name = "test_indexing"
    kind = "test"

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict]:
        model = setup.metered("_index/test", f"index:{self.name}", Budgets())
        try:
            summary = model.generate([Message(role="user", content="Summarize the corpus.")]).message.content
        except ModelError as refused:
            return [{"index": "test", "refused": str(refused)}]
        return [{"index": "test", "summary": summary}]

    def run(self, task: Task, ctx: RunContext) -> Answer:
        reply = ctx.generate([Message(role="user", content=ctx.task_prompt())], ctx.tool_specs(["answer"]))
        return ctx.answer_from_tool(reply.message.tool_calls[0].arguments)


def test_a_replay_never_reaches_a_model_for_a_systems_index_with_a_scripted_model(tmp_path):
    calls = []

    def counting(request: ModelRequest, context: CallContext) -> Message:
        calls.append(context.system)
        if not request.tools:  # the index's call
            return Message(role="assistant", content="a summary")
        return tool_call_message("answer", {"answer": "B"})

    task = tasks_of_each_kind()[0]
    with registered_system(IndexingSystem), scripted_provider() as install:
        plan = make_plan(tmp_path, [task], install(counting), [IndexingSystem.name], task_ids=[task.id])
        execute(plan)
        recorded = len(calls)
        execute(plan_replay(str(plan.run_dir), str(tmp_path / "replay")))  # the model is still there
    assert recorded == 2 and len(calls) == recorded  # the replay called it for nothing, the index included
    replayed = read_run(tmp_path / "replay")
    assert comparable(replayed) == comparable(read_run(plan.run_dir))
    (index,) = replayed.manifest.systems[IndexingSystem.name]["indexing"]
    assert "indexing calls are not replayed" in index["refused"]
