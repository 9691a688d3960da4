"""The DAB loader on the published sample (tests/fixtures/dab)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from data_agent_compare.core import TaskLoadError
from data_agent_compare.core.task import DataSourceKind, QuestionType
from data_agent_compare.tasks.dab import build_sqlite_from_jsonl, load_dab

from helpers import FIXTURES

DAB = FIXTURES / "dab"
BOOKREVIEW = DAB / "query_bookreview"
REVIEW_DB = "query_dataset/review_query.db"
REVIEW_JSONL = "origin_dataset/review_query_remapped.json"
REVIEW_COLUMNS = ["rating", "title", "text", "review_time", "helpful_vote", "verified_purchase", "purchase_id"]
LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a\nsize 123456\n"


@pytest.fixture
def bookreview(tmp_path: Path) -> Path:
    """A writable copy of the bookreview dataset, without the big data files unless a test adds them."""
    folder = tmp_path / "query_bookreview"
    shutil.copytree(BOOKREVIEW, folder, ignore=shutil.ignore_patterns("books_info.sql", "*.json"))
    (folder / "query_dataset" / "books_info.sql").write_text("-- stand-in dump\n", encoding="utf-8")
    for query in ("query1", "query2", "query3"):
        shutil.copy(BOOKREVIEW / query / "query.json", folder / query / "query.json")
    return folder


def test_dab_bookreview_tasks():
    tasks = load_dab(BOOKREVIEW)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    first, second, third = tasks
    assert first.question == (
        "Which decade of publication (e.g., 1980s) has the highest average rating among decades with at least 10 "
        "distinct books that have been rated? Return the decade with the highest average rating."
    )
    assert third.question == (
        "Which books categorized as 'Children's Books' have received an average rating of at least 4.5 "
        "based on reviews from 2020 onwards?"
    )
    assert all(task.question_type == QuestionType.FACTOID and task.benchmark == "dab" for task in tasks)
    root = BOOKREVIEW.resolve()
    assert first.gold.ground_truth_file == str(root / "query1" / "ground_truth.csv")
    assert Path(first.gold.ground_truth_file).read_text(encoding="utf-8").strip() == "2020"
    assert Path(second.gold.ground_truth_file).read_text(encoding="utf-8").splitlines()[0] == "The Sludge"
    assert first.gold.validator is None  # the sample ships no validate.py
    books, reviews = first.data
    assert (books.name, books.kind, books.location) == (
        "books_dataset",
        DataSourceKind.POSTGRES,
        str(root / "query_dataset" / "books_info.sql"),
    )
    assert "bookreview_db" in books.description
    assert (reviews.name, reviews.kind, reviews.location) == (
        "review_dataset",
        DataSourceKind.SQLITE,
        str(root / REVIEW_DB),
    )
    assert first.metadata["dataset"] == "bookreview"
    assert first.metadata["db_description"] == (BOOKREVIEW / "db_description.txt").read_text(encoding="utf-8").strip()
    assert first.metadata["db_config"]["db_clients"]["books_dataset"]["db_name"] == "bookreview_db"


def test_dab_sample_without_review_db_is_unavailable_not_an_error():
    # The published sample has no review_query.db: every query loads, marked unavailable.
    for task in load_dab(BOOKREVIEW):
        assert task.unavailable == f"review_dataset: {BOOKREVIEW.resolve() / REVIEW_DB} is missing"


def test_dab_parent_folder_and_hints():
    tasks = load_dab(DAB, hints=True)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    description = tasks[0].metadata["db_description"]
    assert description == (BOOKREVIEW / "db_description_withhint.txt").read_text(encoding="utf-8").strip()
    assert "### Hint:" in description


def test_dab_only_query_digit_folders_are_queries_and_validator_is_found(bookreview):
    abandoned = bookreview / "query2_abandon"
    abandoned.mkdir()
    (abandoned / "query.json").write_text('"an abandoned question"', encoding="utf-8")
    (abandoned / "ground_truth.csv").write_text("x\n", encoding="utf-8")
    (bookreview / "query1" / "validate.py").write_text("def validate(llm_output):\n    return True, ''\n")
    tasks = load_dab(bookreview)
    assert [task.id for task in tasks] == ["bookreview/query1", "bookreview/query2", "bookreview/query3"]
    assert tasks[0].gold.validator == str(bookreview.resolve() / "query1" / "validate.py")


def test_dab_build_missing_makes_the_queries_available(bookreview):
    shutil.copy(BOOKREVIEW / REVIEW_JSONL, bookreview / REVIEW_JSONL)
    assert all(task.unavailable for task in load_dab(bookreview))  # the loader never writes unasked
    assert not (bookreview / REVIEW_DB).exists()
    tasks = load_dab(bookreview, build_missing=True)
    assert (bookreview / REVIEW_DB).is_file()
    assert [task.unavailable for task in tasks] == [None, None, None]


def test_dab_lfs_pointer_makes_the_queries_unavailable(bookreview):
    (bookreview / REVIEW_DB).write_text(LFS_POINTER, encoding="utf-8")
    for task in load_dab(bookreview):
        assert task.unavailable is not None
        assert task.unavailable.startswith("review_dataset:") and "Git LFS pointer" in task.unavailable


def test_sqlite_built_from_json_lines(tmp_path):
    out = tmp_path / "review_query.db"
    build_sqlite_from_jsonl(BOOKREVIEW / REVIEW_JSONL, out, "review")
    con = sqlite3.connect(out)
    try:
        columns = {row[1]: row[2] for row in con.execute("PRAGMA table_info(review)")}
        count = con.execute("SELECT COUNT(*) FROM review").fetchone()[0]
        first = con.execute("SELECT rating, review_time, verified_purchase, purchase_id FROM review LIMIT 1").fetchone()
        stored = con.execute("SELECT DISTINCT typeof(review_time) FROM review").fetchall()
    finally:
        con.close()
    assert list(columns) == REVIEW_COLUMNS
    assert columns["review_time"] == "TEXT"
    assert columns["rating"] == "INTEGER" and columns["verified_purchase"] == "INTEGER"
    assert count == 1833
    assert first == (4, "November 24, 2012 at 06:52 PM", 0, "purchaseid_186")
    assert stored == [("text",)]


def test_dab_unknown_db_type_names_the_config_field(bookreview):
    config = bookreview / "db_config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("db_type: sqlite", "db_type: oracle"))
    with pytest.raises(TaskLoadError, match="oracle") as caught:
        load_dab(bookreview)
    assert (caught.value.file, caught.value.field) == (str(config.resolve()), "db_clients.review_dataset.db_type")


def test_dab_malformed_query_json_names_the_file(bookreview):
    query = bookreview / "query2" / "query.json"
    query.write_text('"Which books have', encoding="utf-8")
    with pytest.raises(TaskLoadError, match="invalid JSON") as caught:
        load_dab(bookreview)
    assert caught.value.file == str(query.resolve())


def test_dab_missing_db_config_is_an_error(bookreview):
    (bookreview / "db_config.yaml").unlink()
    with pytest.raises(TaskLoadError, match="file not found") as caught:
        load_dab(bookreview)
    assert caught.value.file == str((bookreview / "db_config.yaml").resolve())
