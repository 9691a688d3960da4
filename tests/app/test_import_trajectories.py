"""`compare import dab-trajectories`: DAB's published trials (tests/fixtures/dab_trajectories, three gemini-2.5-flash
trials on bookreview copied from ../shared/data/dab-trajectories) become a run directory of ours."""

import json
import shutil
import sqlite3
from collections import Counter

from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.tasks.dab import DataAgentBench

from helpers import FIXTURES, make_plan, read_records, steps_taken

TRAJECTORIES = FIXTURES / "dab_trajectories"
BOOKREVIEW = FIXTURES / "dab_final/query_bookreview"


def import_run(tmp_path, *flags):
    out = tmp_path / "imported"
    result = CliRunner().invoke(app, ["import", "dab-trajectories", str(TRAJECTORIES), "--out", str(out), *flags])
    return result, out


def raw_trials():
    """What the published files hold, counted directly: run folder -> (model calls, tools by name, tokens, answer)."""
    counted = {}
    for final_file in sorted(TRAJECTORIES.rglob("final_agent.json")):
        final = json.loads(final_file.read_text())
        assistant = [m for m in final["messages"] if m["role"] == "assistant"]
        tools = Counter(c["function"]["name"] for m in assistant for c in m.get("tool_calls") or [])
        tokens = None
        llm = final_file.parent / "llm_calls.jsonl"
        if llm.exists():
            usages = [json.loads(line)["response"]["usage"] for line in llm.read_text().splitlines()]
            tokens = (
                sum(u["prompt_tokens"] for u in usages),
                sum(u["total_tokens"] - u["prompt_tokens"] for u in usages),
            )
        parts = final_file.parent.parts
        key = (f"{parts[-4].removeprefix('query_')}/{parts[-3]}", int(parts[-1].removeprefix("run_")) + 1)
        counted[key] = (len(assistant), tools, tokens, final["final_result"], final["terminate_reason"])
    return counted


def test_each_trial_imports_with_the_calls_tools_tokens_and_answer_of_its_files(tmp_path):
    result, out = import_run(tmp_path)
    assert result.exit_code == 0, result.output
    records = read_records(out)
    raw = raw_trials()
    assert len(records) == len(raw) == 3
    for record in records:
        calls, tools, tokens, answer, reason = raw[(record.task_id, record.epoch)]
        trace = json.loads((out / record.trace_file).read_text())
        assert record.system == "dab-react" and record.model == "gemini-2.5-flash"
        assert record.model_calls == calls
        assert Counter(c.tool for c in record.tool_calls) == tools
        if tokens is not None:
            assert (record.usage.input_tokens, record.usage.output_tokens) == tokens
            assert all(step["duration_s"] > 0 for step in trace["steps"] if step["kind"] == "model_call")
        else:
            assert record.usage.input_tokens is None and record.usage.output_tokens is None  # unknown, not 0
        assert record.usage.cost_usd is None  # no published file records cost
        assert record.answer.get("text", "") == answer
        assert record.status == {"return_answer": "completed", "no_tool_call": "no_tool_call"}[reason]
    manifest = json.loads((out / "manifest.json").read_text())
    missing = manifest["systems"]["dab-react"]["imported"]["missing"]
    assert missing["model calls' latency and tokens (no llm_calls.jsonl)"] == 2
    assert missing["cost (no published file records it)"] == 3


def test_answers_are_scored_by_the_query_ground_truth_when_the_tasks_are_given(tmp_path):
    result, out = import_run(tmp_path, "--tasks-path", str(BOOKREVIEW), "--system", "published-react")
    assert result.exit_code == 0, result.output
    records = {(r.task_id, r.epoch): r for r in read_records(out)}
    assert {r.system for r in records.values()} == {"published-react"}
    assert records[("bookreview/query1", 2)].scores["correct"] == 0.0  # no_tool_call: a failure
    assert records[("bookreview/query2", 1)].scores["correct"] in (0.0, 1.0)


def own_dab_run(tmp_path, scripted_model):
    """A run of ours on bookreview (its database replaced by a small SQLite one, so the data is here)."""
    dataset = tmp_path / "query_bookreview"
    shutil.copytree(BOOKREVIEW, dataset)
    (dataset / "query_dataset").mkdir()
    with sqlite3.connect(dataset / "query_dataset/review_query.db") as con:
        con.execute("CREATE TABLE review (decade TEXT, rating REAL)")
        con.execute("INSERT INTO review VALUES ('2020s', 4.9)")
    (dataset / "db_config.yaml").write_text(
        "db_clients:\n  review_database:\n    db_type: sqlite\n    db_path: query_dataset/review_query.db\n"
    )

    def respond(request, context):
        script = [
            ("list_db", {"db_name": "review_database"}),
            ("query_db", {"db_name": "review_database", "query": "SELECT decade FROM review"}),
            ("return_answer", {"answer": "2020s"}),
        ]
        return tool_call_message(*script[min(steps_taken(request), 2)])

    model = scripted_model(respond)
    benchmark = DataAgentBench(dataset)
    tasks = [t for t in benchmark.load() if t.id in ("bookreview/query1", "bookreview/query2")]
    plan = make_plan(tmp_path / "ours", tasks, model, ["tool_use"], benchmark=benchmark)
    plan.config = plan.config.model_copy(update={"benchmark": "dab"})
    execute(plan)
    return plan.run_dir


def test_the_imported_run_renders_beside_a_run_of_our_own_with_the_trajectory_statistics(tmp_path, scripted_model):
    result, imported = import_run(tmp_path, "--tasks-path", str(BOOKREVIEW))
    assert result.exit_code == 0, result.output
    ours = own_dab_run(tmp_path, scripted_model)
    report = tmp_path / "report"
    shown = CliRunner().invoke(app, ["report", str(imported), str(ours), "--out", str(report)])
    assert shown.exit_code == 0, shown.output
    text = (report / "report.md").read_text()
    assert "dab-react" in text and "tool_use" in text
    assert "Trajectory statistics (DAB paper, Tables 5 and 6)" in text
    table = text[text.index("Trajectory statistics") :].split("\n\n")[1]
    rows = {line.split(" | ")[0].strip("| "): line.split(" | ") for line in table.splitlines()[2:]}
    assert rows["dab-react"][1] == "gemini-2.5-flash" and rows["tool_use"][1] == "scripted"
    assert rows["tool_use"][6] == "2.0"  # our run: list_db and query_db per trajectory


def test_an_imported_run_is_rescored_like_one_of_ours(tmp_path):
    result, imported = import_run(tmp_path, "--tasks-path", str(BOOKREVIEW))
    assert result.exit_code == 0, result.output
    rescored = CliRunner().invoke(app, ["rescore", str(imported), "--out", str(tmp_path / "rescored")])
    assert rescored.exit_code == 0, rescored.output
    before = {(r.task_id, r.epoch): r.scores for r in read_records(imported)}
    assert {(r.task_id, r.epoch): r.scores for r in read_records(tmp_path / "rescored")} == before


def test_imported_steps_follow_the_one_set_of_phase_rules(tmp_path):
    result, out = import_run(tmp_path)
    assert result.exit_code == 0, result.output
    record = next(r for r in read_records(out) if r.status == "completed")  # query2 run_0 ends with return_answer
    steps = json.loads((out / record.trace_file).read_text())["steps"]
    phases = [(s["kind"], s.get("tool"), s["phase"]) for s in steps]
    assert phases[-2:] == [("model_call", None, "generate"), ("tool_call", "return_answer", "generate")]
    assert {p for kind, _, p in phases[:-2] if kind == "model_call"} == {"decision"}
    assert {p for kind, _, p in phases[:-2] if kind == "tool_call"} == {"execute"}


def test_an_imported_trials_conversation_fills_the_request_store_as_published(tmp_path):
    from data_agent_compare.core.conversations import read_requests
    from data_agent_compare.core.runlog import read_run
    from data_agent_compare.reports.transcript import unit_transcript

    result, out = import_run(tmp_path)
    assert result.exit_code == 0, result.output
    run = read_run(out)
    for record in run.records:
        dataset, query = record.task_id.split("/")
        folder = f"query_{dataset}/{query}/data_agent/run_{record.epoch - 1}"
        (final_file,) = TRAJECTORIES.glob(f"*/{folder}/final_agent.json")
        published = json.loads(final_file.read_text())["messages"]
        turns = [at for at, message in enumerate(published) if message["role"] == "assistant"]
        stored = read_requests(out, record.key, None) or []
        assert len(stored) == record.model_calls == len(turns)
        for request, at in zip(stored, turns, strict=True):  # each call sent the conversation before its turn
            assert [m["role"] for m in request.messages] == [m["role"] for m in published[:at]]
            assert [m.get("content") for m in request.messages] == [m.get("content") for m in published[:at]]
            assert request.tools is None  # the published files do not say which tools were offered
        told = unit_transcript(run, record)
        assert told.stored and told.entries[0].messages[0]["role"] == "system"
