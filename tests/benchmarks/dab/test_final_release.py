"""DAB's final release (tests/fixtures/dab_final: 4 of its 12 datasets, no databases) loads as the official
runner presents it: lower-case task ids, the description and hints as `run_agent.py` joins them, the
runner's user turn, every database declared with why it is unavailable, MongoDB datasets flagged."""

import shutil

import yaml

from data_agent_compare.core.runlog import ResultRecord
from data_agent_compare.tasks.dab import DataAgentBench, load_dab

from helpers import FIXTURES

FINAL = FIXTURES / "dab_final"


def test_the_sample_loads_its_23_queries_with_lower_case_ids(tmp_path):
    shutil.copytree(FINAL / "query_stockindex", tmp_path / "query_STOCKINDEX")  # upstream spells some upper case
    shutil.copytree(FINAL / "query_agnews", tmp_path / "query_agnews")
    ids = [task.id for task in load_dab(tmp_path)]
    expected = [*(f"agnews/query{n}" for n in (1, 2, 3, 4)), *(f"stockindex/query{n}" for n in (1, 2, 3))]
    assert sorted(ids) == expected
    assert len(load_dab(FINAL)) == 23


def test_with_hints_the_description_is_the_plain_one_then_the_hints_as_the_official_runner_joins_them():
    plain = (FINAL / "query_agnews/db_description.txt").read_text().strip()
    hints = (FINAL / "query_agnews/db_description_withhint.txt").read_text().strip()
    task = next(t for t in load_dab(FINAL / "query_agnews", hints=True) if t.id == "agnews/query1")
    assert task.context == plain + "\n\n" + hints
    assert task.metadata["official_user_message"] == (
        f"QUERY:\n{task.question.strip()}\n\nDATABASE DESCRIPTION:\n{plain}\n\n{hints}"
    )
    without = next(t for t in load_dab(FINAL / "query_agnews") if t.id == "agnews/query1")
    assert without.context == plain and "HINTS:" not in without.context


def test_the_pre_release_hint_file_which_repeats_the_description_is_shown_alone():
    hinted = (FIXTURES / "dab/query_bookreview/db_description_withhint.txt").read_text().strip()
    task = load_dab(FIXTURES / "dab/query_bookreview", hints=True)[0]
    assert task.context == hinted


def test_every_database_is_declared_unavailable_with_its_reason():
    for task in load_dab(FINAL):
        folder = FINAL / f"query_{task.metadata['dataset']}"
        clients = yaml.safe_load((folder / "db_config.yaml").read_text())["db_clients"]
        assert set(task.metadata["databases"]) == set(clients)
        assert {s.name for s in task.data} == set(clients)
        for name, declared in task.metadata["databases"].items():
            assert declared["available"] is False and "missing" in declared["reason"], (task.id, name)
        assert task.unavailable


def test_mongodb_datasets_say_they_run_on_the_stand_in():
    tasks = load_dab(FINAL)
    flagged = {t.metadata["dataset"] for t in tasks if t.metadata.get("mongo")}
    assert flagged == {"agnews"}
    warnings = DataAgentBench(FINAL).warnings(tasks)
    assert any("agnews" in w and "stand-in" in w and "not a MongoDB server" in w for w in warnings)


def dab_record(task_id, sources):
    return ResultRecord.model_validate(
        {
            "task_id": task_id,
            "benchmark": "dab",
            "system": "tool_use",
            "model": "m",
            "epoch": 1,
            "question_type": "factoid",
            "status": "completed",
            "answer": {"text": "x"},
            "scores": {"correct": 1.0},
            "usage": {},
            "latency_s": 1.0,
            "latency_by_phase": {},
            "model_calls": 1,
            "tool_calls": [],
            "trace_file": "traces/t.json",
            "data_sources": sources,
        }
    )


def test_the_report_says_which_datasets_ran_on_the_mongodb_stand_in():
    records = [
        dab_record("agnews/query1", ["articles_database (mongo)", "metadata_database (sqlite)"]),
        dab_record("stockindex/query1", ["indexinfo_database (sqlite)"]),
    ]
    lines = "\n".join(DataAgentBench.report_lines(records))
    assert "Datasets agnews:" in lines and "stand-in" in lines and "stockindex:" not in lines.split("Datasets")[1]
