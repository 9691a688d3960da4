"""The unstructured text of a task's databases as passages (tools/text_columns.py): which columns count
as text, what a passage is headed with, every row read or the cut said, over SQLite, DuckDB and a
mongodump."""

import sqlite3
from pathlib import Path

import bson
import duckdb
import pytest

from data_agent_compare.core import ToolSettings
from data_agent_compare.core.task import DataSource, Task
from data_agent_compare.core.tool import ToolError
from data_agent_compare.tools import text_columns
from data_agent_compare.tools.text_columns import text_column_chunks

REVIEW = (
    "I bought this kettle for the office and it boiled water in under two minutes every morning. "
    "The handle stays cool, the lid is easy to open, and after six months it still works well. {n}"
)
LONG_REVIEW = " ".join(f"Sentence number {i} of a very long review about the same kettle." for i in range(40))


def reviews_sqlite(path: Path, rows: int = 30) -> Path:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE reviews (review_id TEXT, title TEXT, rating REAL, label TEXT, body TEXT)")
    con.executemany(
        "INSERT INTO reviews VALUES (?, ?, ?, ?, ?)",
        [(f"r{n}", f"Review {n}", 4.0, "kitchen", REVIEW.format(n=n)) for n in range(rows)],
    )
    con.execute("INSERT INTO reviews VALUES ('r-long', 'Long one', 5.0, 'kitchen', ?)", (LONG_REVIEW,))
    con.execute("INSERT INTO reviews VALUES ('r-null', 'No text', 3.0, 'kitchen', NULL)")
    con.execute("CREATE TABLE codes (code TEXT, amount INTEGER)")
    con.execute("INSERT INTO codes VALUES ('A-1', 3)")
    con.commit()
    con.close()
    return path


def task(tmp_path: Path, *sources: DataSource) -> Task:
    return Task(id="T1", benchmark="dab", question="?", question_type="factoid", data=list(sources), data_dir=tmp_path)


def test_a_long_text_column_becomes_passages_headed_by_its_rows_identifying_columns(tmp_path):
    reviews_sqlite(tmp_path / "shop.db")
    chunks, columns = text_column_chunks(
        task(tmp_path, DataSource(name="shop", kind="sqlite", location="shop.db")), ToolSettings()
    )
    assert [c.source for c in columns] == ["shop.reviews.body"]  # labels, titles, codes and numbers are no text
    assert columns[0].rows == 31 and not columns[0].cut  # every non-null row
    assert {c.source for c in chunks} == {"shop.reviews.body"}
    assert chunks[0].heading == "review_id=r0; title=Review 0" and chunks[0].text == REVIEW.format(n=0)
    long = [c for c in chunks if c.heading.startswith("review_id=r-long")]
    assert len(long) > 1 and all(len(c.text) <= 500 for c in long)  # chunked like the documents
    assert columns[0].passages == len(chunks) == 30 + len(long)


def test_duckdb_and_mongodump_text_is_read_too(tmp_path):
    con = duckdb.connect(str(tmp_path / "notes.duckdb"))
    con.execute("CREATE TABLE notes (note_id INTEGER, note VARCHAR)")
    con.executemany("INSERT INTO notes VALUES (?, ?)", [(n, REVIEW.format(n=n)) for n in range(5)])
    con.close()
    dump = tmp_path / "dump" / "library"
    dump.mkdir(parents=True)
    books = [{"_id": n, "name": f"Book {n}", "summary": REVIEW.format(n=n), "year": 2000 + n} for n in range(4)]
    (dump / "books.bson").write_bytes(b"".join(bson.encode(b) for b in books))
    chunks, columns = text_column_chunks(
        task(
            tmp_path,
            DataSource(name="notes_db", kind="duckdb", location="notes.duckdb"),
            DataSource(name="library", kind="mongo", location="dump"),
        ),
        ToolSettings(),
    )
    assert [(c.source, c.rows) for c in columns] == [("notes_db.notes.note", 5), ("library.books.summary", 4)]
    assert chunks[0].heading == "note_id=0" and chunks[-1].heading == "_id=3; name=Book 3"


def test_a_column_over_the_row_cap_says_it_was_cut(tmp_path, monkeypatch):
    reviews_sqlite(tmp_path / "shop.db")
    monkeypatch.setattr(text_columns, "MAX_ROWS", 10)
    chunks, columns = text_column_chunks(
        task(tmp_path, DataSource(name="shop", kind="sqlite", location="shop.db")), ToolSettings()
    )
    assert columns[0].rows == 10 and columns[0].cut and columns[0].report()["cut"] is True
    assert len(chunks) == 10


def test_an_unreadable_database_is_named(tmp_path):
    missing = DataSource(name="shop", kind="sqlite", location="missing.db")
    with pytest.raises(ToolError, match="'shop'"):
        text_column_chunks(task(tmp_path, missing), ToolSettings())
    nowhere = DataSource(name="library", kind="mongo", location="nowhere")
    with pytest.raises(ToolError, match=r"'library'.*mongodump"):
        text_column_chunks(task(tmp_path, nowhere), ToolSettings())
