"""The DABstep loader on the published samples (tests/fixtures/dabstep)."""

from __future__ import annotations

import shutil

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.core.task import DataSourceKind, QuestionType, Task
from data_agent_compare.tasks.dabstep import dabstep_missing_files, load_dabstep

from helpers import FIXTURES, by_id, environment, write_jsonl

DABSTEP = FIXTURES / "dabstep"


# ---------------------------------------------------------------- DABstep


@pytest.fixture(scope="module")
def dabstep() -> dict[str, Task]:
    return by_id(load_dabstep(DABSTEP))


def test_dabstep_dev_tasks(dabstep):
    assert list(dabstep) == ["5", "49", "70", "1273", "1305", "1464", "1681", "1753", "1871", "2697"]
    task = dabstep["5"]
    assert task.benchmark == "dabstep"
    assert task.question == "Which issuing country has the highest number of transactions?"
    assert task.question_type == QuestionType.FACTOID
    assert task.level == "easy"
    assert task.guidelines == (
        "Answer must be just the country code. If a question does not have a relevant or applicable answer "
        "for the task, please respond with 'Not Applicable'"
    )
    assert task.gold.answer == "NL"
    assert dabstep["1273"].gold.answer == "0.120132"
    assert dabstep["1273"].level == "hard"
    assert dabstep["2697"].gold.answer == "E:13.57"


def test_dabstep_data_dir_and_file_tools(dabstep):
    task = dabstep["1273"]
    assert task.data_dir == DABSTEP.absolute()
    assert [(s.kind, s.location) for s in task.data] == [(DataSourceKind.FILES, str(DABSTEP.absolute()))]
    env = environment(task)
    try:
        assert {"list_files", "read_file", "execute_python", "answer"} <= set(env.tools)
    finally:
        env.close()


def test_dabstep_needs_payments_heuristic(dabstep):
    needs = {task_id for task_id, task in dabstep.items() if task.metadata["needs_payments"]}
    assert needs == {"5", "49", "70", "1681", "1753", "1871", "2697"}
    # answerable from fees.json / merchant files without payments.csv: loaded and available
    assert all(dabstep[i].unavailable is None for i in ("1273", "1305", "1464"))


def test_dabstep_missing_files(tmp_path):
    assert dabstep_missing_files(DABSTEP) == [f"payments.csv is missing from {DABSTEP}"]
    shutil.copytree(DABSTEP, tmp_path / "ctx")
    (tmp_path / "ctx" / "payments.csv").write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\n")
    (tmp_path / "ctx" / "manual.md").unlink()
    assert dabstep_missing_files(tmp_path / "ctx" / "dev.jsonl") == [
        f"payments.csv in {tmp_path / 'ctx'} is a Git LFS pointer, not the data (run git lfs pull)",
        f"manual.md is missing from {tmp_path / 'ctx'}",
    ]
    (tmp_path / "ctx" / "payments.csv").write_text("psp_reference,merchant\n1,Crossfit_Hanna\n")
    (tmp_path / "ctx" / "manual.md").write_text("# manual\n")
    assert dabstep_missing_files(tmp_path / "ctx") == []


def test_dabstep_tasks_file_path_and_naming_convention(tmp_path, dabstep):
    from_file = load_dabstep(DABSTEP / "dev.jsonl")
    assert [t.model_dump() for t in from_file] == [t.model_dump() for t in dabstep.values()]
    shutil.copytree(DABSTEP, tmp_path / "ctx")
    write_jsonl(tmp_path / "ctx" / "all.jsonl", [{"task_id": "1", "question": "Q?", "guidelines": "", "level": "easy"}])
    assert len(load_dabstep(tmp_path / "ctx")) == 10  # dev.jsonl comes before all.jsonl
    (tmp_path / "ctx" / "dev.jsonl").unlink()
    [task] = load_dabstep(tmp_path / "ctx")
    assert (task.id, task.gold.answer) == ("1", None)  # the held-out split has no answers


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ('{"task_id": "9", "question": "Q', None, "invalid JSON"),
        ('{"task_id": "9", "guidelines": "g", "level": "easy"}', "question", "missing"),
        ('{"task_id": "9", "question": "Q?", "guidelines": ["g"]}', "guidelines", "string"),
        ('{"task_id": "5", "question": "Q?"}', "task_id", "duplicate"),
    ],
)
def test_dabstep_malformed_line(tmp_path, line, field, message):
    first = (DABSTEP / "dev.jsonl").read_text(encoding="utf-8").splitlines()[0]
    file = write_jsonl(tmp_path / "tasks.jsonl", [first, line])
    with pytest.raises(TaskLoadError) as raised:
        load_dabstep(tmp_path)
    assert (raised.value.file, raised.value.line, raised.value.field) == (str(file), 2, field)
    assert message in raised.value.message


def test_dabstep_folder_without_tasks_file(tmp_path):
    with pytest.raises(TaskLoadError, match="no DABstep tasks file"):
        load_dabstep(tmp_path)
