"""The run log: typed and versioned, written by one writer, read by one reader that refuses what a
newer suite wrote and still reads what an older one wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from data_agent_compare.core import Budgets, ModelConfig, Trace, Usage
from data_agent_compare.core.runlog import (
    RUN_LOG_SCHEMA_VERSION,
    Manifest,
    ResultRecord,
    RunDirBusy,
    RunDirLock,
    RunLogError,
    RunLogWriter,
    SpentCall,
    read_run,
)


def manifest() -> Manifest:
    model = ModelConfig(alias="m", provider="scripted", model_id="m")
    return Manifest(
        suite_version="0.1.0",
        started_at="2026-11-23T00:00:00.000+00:00",
        config={"epochs": 1},
        models=[model],
        budgets=Budgets(),
        systems={"tool_use": {"name": "tool_use"}},
        benchmark="bundled",
        task_ids=["T1"],
        units=1,
    )


def record(**fields) -> ResultRecord:
    data = {
        "task_id": "T1",
        "benchmark": "bundled",
        "system": "tool_use",
        "model": "m",
        "epoch": 1,
        "question_type": "factoid",
        "status": "completed",
        "answer": {"text": "42"},
        "scores": {"exact_match": 1.0},
        "usage": {"input_tokens": 3, "output_tokens": 1},
        "latency_s": 0.5,
        "latency_by_phase": {"decision": {"latency_s": 0.4, "model_calls": 1}, "other": {"latency_s": 0.1}},
        "model_calls": 1,
        "tool_calls": [{"tool": "answer", "success": True, "duration_s": 0.0}],
        "trace_file": "traces/tool_use/m/T1.json",
        **fields,
    }
    return ResultRecord.model_validate(data)


def write_run(run_dir: Path) -> None:
    writer = RunLogWriter(run_dir)
    writer.write_manifest(manifest())
    writer.append(record(), Trace(task_id="T1", system="tool_use", model="m"))
    writer.close()


def test_written_and_read_back_unchanged(tmp_path):
    write_run(tmp_path)
    run = read_run(tmp_path)
    assert run.manifest == manifest() and run.records == [record()] and run.warnings == []
    assert run.records[0].schema_version == RUN_LOG_SCHEMA_VERSION
    assert json.loads((tmp_path / "manifest.json").read_text())["schema_version"] == RUN_LOG_SCHEMA_VERSION
    assert run.trace(run.records[0]).task_id == "T1"


@pytest.mark.parametrize("where", ["manifest.json", "results.jsonl"])
def test_a_newer_schema_is_refused_naming_both_versions(tmp_path, where):
    write_run(tmp_path)
    path = tmp_path / where
    data = json.loads(path.read_text())
    data["schema_version"] = RUN_LOG_SCHEMA_VERSION + 1
    path.write_text(json.dumps(data) + ("\n" if where.endswith("jsonl") else ""))
    with pytest.raises(RunLogError) as refused:
        read_run(tmp_path)
    message = str(refused.value)
    assert f"schema version {RUN_LOG_SCHEMA_VERSION + 1}" in message
    assert f"up to {RUN_LOG_SCHEMA_VERSION}" in message and where in message


def test_a_run_directory_written_before_versioning_reads_as_version_1(tmp_path):
    write_run(tmp_path)
    for name in ("manifest.json", "results.jsonl"):
        data = json.loads((tmp_path / name).read_text())
        del data["schema_version"]
        (tmp_path / name).write_text(json.dumps(data) + "\n")
    run = read_run(tmp_path)
    assert run.manifest.schema_version == 1 and run.records[0].schema_version == 1


def test_a_record_with_a_bad_field_names_its_line_and_field(tmp_path):
    write_run(tmp_path)
    with (tmp_path / "results.jsonl").open("a") as results:
        results.write(json.dumps({**record().model_dump(mode="json"), "latency_s": "slow"}) + "\n")
    with pytest.raises(RunLogError, match=r"results.jsonl:2: field 'latency_s'"):
        read_run(tmp_path)


def test_a_line_cut_by_a_crash_is_a_warning_and_the_writer_drops_it(tmp_path):
    write_run(tmp_path)
    results = tmp_path / "results.jsonl"
    results.write_text(results.read_text() + '{"task_id": "T2", "benc')
    run = read_run(tmp_path)
    assert len(run.records) == 1 and "results.jsonl:2" in run.warnings[0]
    RunLogWriter(tmp_path).close()  # resuming: the fragment goes, the finished record stays
    assert read_run(tmp_path).warnings == [] and len(read_run(tmp_path).records) == 1


def test_a_folder_without_a_manifest_is_not_a_run(tmp_path):
    with pytest.raises(RunLogError, match="is not a run directory"):
        read_run(tmp_path)


def test_a_last_record_that_lost_only_its_newline_is_kept(tmp_path):
    write_run(tmp_path)
    results = tmp_path / "results.jsonl"
    second = record(task_id="T2", trace_file="traces/tool_use/m/T2.json").model_dump_json()
    results.write_text(results.read_text() + second)  # a crash after the record, before its newline
    RunLogWriter(tmp_path).close()  # resuming
    assert results.read_text().endswith("}\n")
    run = read_run(tmp_path)
    assert [r.task_id for r in run.records] == ["T1", "T2"] and run.warnings == []


def test_a_second_lock_on_a_run_directory_is_refused_until_the_first_is_released(tmp_path):
    run_dir = tmp_path / "run"
    write_run(run_dir)
    busy = rf"{run_dir} is in use by another compare process \(pid \d+"
    with RunDirLock(run_dir), pytest.raises(RunDirBusy, match=busy):
        RunDirLock(run_dir).acquire()
    with RunDirLock(run_dir):  # released: the next process gets it
        pass
    assert (run_dir / "manifest.json").exists()


def test_a_lock_leaves_no_empty_run_directory_behind(tmp_path):
    with RunDirLock(tmp_path / "never-written"):
        assert (tmp_path / "never-written" / ".lock").exists()
    assert not (tmp_path / "never-written").exists()


def spent(attempt: str, task_id: str = "T2", **fields) -> SpentCall:
    usage = Usage(input_tokens=100, output_tokens=10, cost_usd=0.5, cost_source="provider")
    return SpentCall(attempt=attempt, task_id=task_id, system="tool_use", model="m", epoch=1, usage=usage, **fields)


def test_calls_of_attempts_without_a_record_are_the_interrupted_spend(tmp_path):
    writer = RunLogWriter(tmp_path)
    writer.write_manifest(manifest())
    writer.spent(spent("finished", task_id="T1"))
    writer.append(record(attempt="finished"), Trace(task_id="T1", system="tool_use", model="m"))
    writer.spent(spent("cut-short"))
    writer.spent(spent("cut-short"))
    writer.spent(SpentCall(attempt="cut-short", task_id="T2", system="tool_use", model="m", epoch=1, in_flight=1))
    writer.close()
    with (tmp_path / "calls.jsonl").open("a") as journal:
        journal.write('{"attempt": "cut-sh')  # kill -9 in the middle of a line
    run = read_run(tmp_path)
    (interrupted,) = run.interrupted
    assert (interrupted.attempt, interrupted.task_id, interrupted.model_calls) == ("cut-short", "T2", 2)
    assert interrupted.in_flight_calls == 1
    total = run.interrupted_usage()
    assert (total.input_tokens, total.output_tokens, total.cost_usd) == (200, 20, 1.0)
    assert any("calls.jsonl:5" in warning for warning in run.warnings)
    RunLogWriter(tmp_path).close()  # resuming drops the cut line
    assert read_run(tmp_path).warnings == []


def test_requests_journaled_as_sent_and_never_answered_count_as_in_flight_once(tmp_path):
    writer = RunLogWriter(tmp_path)
    writer.write_manifest(manifest())
    sent = SpentCall(attempt="killed", task_id="T2", system="tool_use", model="m", epoch=1, sent=1)
    for line in [sent, spent("killed", attempts=2), sent, sent, sent]:  # a call answered on its retry, then one cut
        writer.spent(line)
    writer.spent(sent.model_copy(update={"sent": -1}))  # refused before it left: not sent after all
    writer.close()
    (interrupted,) = read_run(tmp_path).interrupted
    assert (interrupted.model_calls, interrupted.in_flight_calls) == (1, 1)
    assert interrupted.usage.cost_source == "provider"  # sent lines add no usage of their own
    note = SpentCall(attempt="killed", task_id="T2", system="tool_use", model="m", epoch=1, in_flight=1)
    with (tmp_path / "calls.jsonl").open("a") as journal:  # a graceful stop's note of the same call
        journal.write(note.model_dump_json(exclude_defaults=True) + "\n")
    assert read_run(tmp_path).interrupted[0].in_flight_calls == 1  # counted once


def test_a_call_that_ends_after_the_run_closed_is_still_journaled_not_an_error(tmp_path):
    writer = RunLogWriter(tmp_path)
    writer.write_manifest(manifest())
    writer.spent(spent("late", task_id="T2"))
    writer.close_with(manifest())
    writer.spent(spent("late", task_id="T2"))  # a gateway thread finishing after the run stopped
    (interrupted,) = read_run(tmp_path).interrupted
    assert (interrupted.attempt, interrupted.model_calls) == ("late", 2)
