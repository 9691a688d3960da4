"""PostgreSQL for DAB on a real throw-away cluster: the bookreview pg_dump restored, read through the tools."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.tasks.dab import load_dab
from data_agent_compare.tools import SchemaTool, SqlTool, ToolError, ToolSettings
from data_agent_compare.tools.postgres import (
    PostgresCluster,
    PostgresError,
    PostgresUnavailable,
    binaries,
    prepare_postgres,
    restore,
    restore_dump,
)
from data_agent_compare.tools.postgres.pg_dump import DumpReader
from data_agent_compare.tools.sql import Databases, PostgresDatabase

from helpers import FIXTURES, postgres_bin_dir_or_skip

DAB = FIXTURES / "dab" / "query_bookreview"
DUMP = DAB / "query_dataset" / "books_info.sql"
BOOK_COLUMNS = [
    ("title", "text"),
    ("subtitle", "text"),
    ("author", "text"),
    ("rating_number", "bigint"),
    ("features", "text"),
    ("description", "text"),
    ("price", "double precision"),
    ("store", "text"),
    ("categories", "text"),
    ("details", "text"),
    ("book_id", "text"),
]
# A small dump in pg_dump's shape: a setting PostgreSQL 15 does not know, a role that does not
# exist here, grants, quoted names, a second schema, jsonb, and COPY data that looks like SQL.
SMALL_DUMP = """SET statement_timeout = 0;
SET transaction_timeout = 0;
SELECT pg_catalog.set_config('search_path', '', false);
CREATE SCHEMA extra;
ALTER SCHEMA extra OWNER TO someone_elsewhere;
CREATE TABLE public."Sales Orders" ("Amount" integer, "user" text);
ALTER TABLE public."Sales Orders" OWNER TO someone_elsewhere;
CREATE TABLE extra.items (id integer, tags jsonb);
COPY public."Sales Orders" ("Amount", "user") FROM stdin;
5\tGRANT ALL ON everything TO me;
7\tbob
\\.
COPY extra.items (id, tags) FROM stdin;
1\t{"a": [1, 2]}
\\.
REVOKE ALL ON SCHEMA extra FROM PUBLIC;
GRANT USAGE ON SCHEMA extra TO someone_elsewhere;
"""


def dump_rows(path: Path) -> list[list[str]]:
    """The COPY data lines of a plain pg_dump, read without PostgreSQL."""
    lines = path.read_text(encoding="utf-8").split("\n")  # not splitlines(): the text holds U+2028
    start = next(i for i, line in enumerate(lines) if line.startswith("COPY "))
    end = lines.index("\\.", start)
    return [line.split("\t") for line in lines[start + 1 : end]]


@pytest.fixture(scope="session")
def cluster() -> Iterator[PostgresCluster]:
    with PostgresCluster(postgres_bin_dir_or_skip()) as started:
        yield started


@pytest.fixture(scope="session")
def books_url(cluster: PostgresCluster) -> str:
    return restore_dump(cluster, "bookreview_db", DUMP)


def books_source(url: str) -> DataSource:
    return DataSource(name="books_dataset", kind=DataSourceKind.POSTGRES, location=url)


@pytest.fixture
def tools(books_url: str) -> Iterator[tuple[SchemaTool, SqlTool]]:
    settings = ToolSettings(sql_timeout_s=1.0)
    databases = Databases([books_source(books_url)], settings)
    yield SchemaTool(databases, settings), SqlTool(databases, settings)
    databases.close()


def count_and_checksum(url: str) -> tuple[int, str]:
    with psycopg.connect(url) as con:
        row = con.execute("SELECT COUNT(*), md5(string_agg(books_info::text, '|' ORDER BY book_id)) FROM books_info")
        count, checksum = row.fetchone() or (0, "")
    return count, checksum


# ---------------------------------------------------------------- reading through the tools


def test_schema_lists_the_books_table_with_columns_counts_and_samples(tools: tuple[SchemaTool, SqlTool]) -> None:
    schema, _ = tools
    result = schema.run({})
    (table,) = result.data["books_dataset"]["tables"]
    assert result.data["books_dataset"]["kind"] == "postgres"
    assert table["name"] == "books_info"
    assert [(c["name"], c["type"]) for c in table["columns"]] == BOOK_COLUMNS
    assert table["row_count"] == len(dump_rows(DUMP)) == 200
    assert table["sample_columns"] == [name for name, _ in BOOK_COLUMNS]
    assert len(table["sample_rows"]) == 2
    assert "table books_info — 200 rows" in result.content
    assert "price double precision" in result.content


def test_select_returns_the_dump_values(tools: tuple[SchemaTool, SqlTool]) -> None:
    _, sql = tools
    assert sql.run({"sql": "SELECT COUNT(*) FROM books_info"}).data["rows"] == [[200]]
    result = sql.run({"sql": "SELECT book_id, price, rating_number, store FROM books_info WHERE title = 'Chaucer'"})
    assert result.data == {
        "columns": ["book_id", "price", "rating_number", "store"],
        "rows": [["bookid_1", 8.23, 29, "Peter Ackroyd (Author)"]],
    }
    assert result.content == "book_id,price,rating_number,store\nbookid_1,8.23,29,Peter Ackroyd (Author)\n"
    chaucer = next(row for row in dump_rows(DUMP) if row[0] == "Chaucer")
    assert (chaucer[6], chaucer[3], chaucer[10]) == ("8.23", "29", "bookid_1")
    total = sql.run({"sql": "SELECT ROUND(SUM(price)::numeric, 2), MAX(rating_number) FROM books_info"})
    assert total.data["rows"] == [[5342.77, 6631]]


def test_row_cap_zero_rows_and_explain(books_url: str) -> None:
    settings = ToolSettings(sql_max_rows=5)
    databases = Databases([books_source(books_url)], settings)
    sql = SqlTool(databases, settings)
    try:
        capped = sql.run({"sql": "SELECT book_id FROM books_info ORDER BY book_id"})
        assert capped.truncated and len(capped.data["rows"]) == 5
        assert "[truncated: showing 5 of at least 6 rows" in capped.content
        empty = sql.run({"sql": "SELECT title FROM books_info WHERE price < 0"})
        assert empty.data == {"columns": ["title"], "rows": []} and empty.content.endswith("(0 rows)\n")
        assert "Seq Scan on books_info" in sql.run({"sql": "EXPLAIN SELECT * FROM books_info"}).content
        like = sql.run({"sql": "SELECT COUNT(*) FROM books_info WHERE title LIKE 'The %'"})  # `%` is not a parameter
        assert like.data["rows"][0][0] > 0
    finally:
        databases.close()


# ---------------------------------------------------------------- writes and timeouts

WRITES = [
    "INSERT INTO books_info (title) VALUES ('x')",
    "UPDATE books_info SET price = 0",
    "DELETE FROM books_info",
    "CREATE TABLE t (a int)",
    "CREATE TEMP TABLE t (a int)",
    "DROP TABLE books_info",
    "ALTER TABLE books_info ADD COLUMN y int",
    "TRUNCATE books_info",
    "SET default_transaction_read_only = off; DELETE FROM books_info",
    "SET default_transaction_read_only = off",
    "COMMIT",
    "WITH gone AS (DELETE FROM books_info RETURNING 1) SELECT COUNT(*) FROM gone",
    "SELECT * INTO stolen FROM books_info",
    "SELECT pg_read_file('/etc/hostname')",
    "GRANT ALL ON books_info TO PUBLIC",
]


@pytest.mark.parametrize("statement", WRITES)
def test_writes_are_refused_and_the_data_is_unchanged(
    books_url: str, cluster: PostgresCluster, tools: tuple[SchemaTool, SqlTool], statement: str
) -> None:
    _, sql = tools
    before = count_and_checksum(cluster.admin_url("bookreview_db"))
    with pytest.raises(ToolError, match=r"refused|SQL error"):
        sql.run({"sql": statement})
    assert count_and_checksum(cluster.admin_url("bookreview_db")) == before == (200, before[1])
    assert sql.run({"sql": "SELECT COUNT(*) FROM books_info"}).data["rows"] == [[200]]  # the session still works


def test_copy_to_program_runs_nothing(tools: tuple[SchemaTool, SqlTool], tmp_path: Path) -> None:
    _, sql = tools
    marker = tmp_path / "pwned"
    with pytest.raises(ToolError, match="refused"):
        sql.run({"sql": f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'"})
    assert not marker.exists()


@pytest.mark.parametrize(
    "statement",
    [
        "INSERT INTO books_info (title) VALUES ('x')",
        "SET default_transaction_read_only = off; DELETE FROM books_info",
        "COPY (SELECT 1) TO PROGRAM 'true'",
        "SELECT pg_read_file('/etc/hostname')",
    ],
)
def test_server_layers_refuse_writes_without_the_statement_check(books_url: str, statement: str) -> None:
    """The reader role and read-only transactions hold even when a query gets past sqlglot."""
    database = PostgresDatabase(books_source(books_url), None, 1.0)
    try:
        with pytest.raises(ToolError, match=r"refused|SQL error"):
            database._run(statement, None, 10)  # no check_read_statement
    finally:
        database.close()
    with psycopg.connect(books_url, autocommit=True) as con, pytest.raises(psycopg.Error):  # no tool at all
        con.execute(statement)
    assert count_and_checksum(books_url)[0] == 200


def test_settings_do_not_outlive_a_query(tools: tuple[SchemaTool, SqlTool]) -> None:
    _, sql = tools
    sql.run({"sql": "SELECT set_config('default_transaction_read_only', 'off', false)"})
    sql.run({"sql": "SELECT set_config('statement_timeout', '0', false)"})
    assert sql.run({"sql": "SHOW default_transaction_read_only"}).data["rows"] == [["on"]]
    assert sql.run({"sql": "SHOW statement_timeout"}).data["rows"] == [["1s"]]


def test_a_slow_query_times_out_and_the_connection_recovers(tools: tuple[SchemaTool, SqlTool]) -> None:
    _, sql = tools
    started = time.monotonic()
    with pytest.raises(ToolError, match="timeout"):
        sql.run({"sql": "SELECT pg_sleep(100)"})
    with pytest.raises(ToolError, match="timeout"):
        sql.run({"sql": "SELECT set_config('statement_timeout', '0', true), pg_sleep(100)"})
    assert time.monotonic() - started < 10
    assert sql.run({"sql": "SELECT COUNT(*) FROM books_info"}).data["rows"] == [[200]]


# ---------------------------------------------------------------- restoring


def test_restore_filters_the_dump_and_quotes_names(cluster: PostgresCluster, tmp_path: Path) -> None:
    dump = tmp_path / "small.sql"
    dump.write_text(SMALL_DUMP)
    settings = ToolSettings()
    source = DataSource(name="small", kind=DataSourceKind.POSTGRES, location=restore_dump(cluster, "small", dump))
    databases = Databases([source], settings)
    try:
        tables = SchemaTool(databases, settings).run({}).data["small"]["tables"]
        sql = SqlTool(databases, settings)
        assert [t["name"] for t in tables] == ['"Sales Orders"', "extra.items"]
        assert [c["name"] for c in tables[0]["columns"]] == ['"Amount"', '"user"']
        rows = sql.run({"sql": 'SELECT "Amount", "user" FROM "Sales Orders" ORDER BY 1'}).data["rows"]
        assert rows == [[5, "GRANT ALL ON everything TO me;"], [7, "bob"]]  # COPY data is never filtered
        assert sql.run({"sql": "SELECT tags FROM extra.items"}).data["rows"] == [['{"a": [1, 2]}']]
    finally:
        databases.close()


def test_the_dump_reader_gives_statements_with_their_lines_and_copy_data() -> None:
    lines = [line + b"\n" for line in SMALL_DUMP.encode().split(b"\n")]
    statements = [(s.line, s.body, list(s.copy_data or [])) for s in DumpReader(Path("small.sql"), lines)]
    assert [line for line, _, _ in statements] == [1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17]
    assert statements[8][2] == [b"5\tGRANT ALL ON everything TO me;\n", b"7\tbob\n"]  # COPY data untouched
    assert statements[9][2] == [b'1\t{"a": [1, 2]}\n']


# Objects pg_dump writes in ways a statement splitter can get wrong: dollar quotes with semicolons,
# strings with backslashes and doubled quotes, enums, sequences, defaults, a trigger, a view, a comment.
RICH_DATABASE = r"""
CREATE SCHEMA shop;
CREATE TYPE shop.mood AS ENUM ('sad', 'ok; fine');
CREATE SEQUENCE shop.ids START 5;
CREATE TABLE shop.orders (id int PRIMARY KEY DEFAULT nextval('shop.ids'), who text, amount numeric(10,2)
    CHECK (amount >= 0), mood shop.mood, note text, doc jsonb, tags text[]);
CREATE TABLE shop.items (order_id int REFERENCES shop.orders(id), "Item Name" text, qty int);
CREATE INDEX ON shop.orders (lower(who));
CREATE FUNCTION shop.total(o int) RETURNS numeric LANGUAGE sql STABLE
    AS $$ SELECT sum(qty)::numeric FROM shop.items WHERE order_id = o; $$;
CREATE FUNCTION shop.touch() RETURNS trigger LANGUAGE plpgsql
    AS $body$ BEGIN NEW.note := coalesce(NEW.note, 'it''s; \n $x$'); RETURN NEW; END $body$;
CREATE TRIGGER t BEFORE INSERT ON shop.orders FOR EACH ROW EXECUTE FUNCTION shop.touch();
CREATE VIEW shop.big AS SELECT * FROM shop.orders WHERE amount > 10;
COMMENT ON TABLE shop.orders IS 'orders; with a semicolon and a \ backslash';
INSERT INTO shop.orders (who, amount, mood, note, doc, tags)
    VALUES ('a''b', 12.5, 'ok; fine', E'line1\nline2\t\\', '{"k": "v; \\ x"}', '{x,"y z"}'),
           ('c', 3, 'sad', NULL, NULL, NULL);
INSERT INTO shop.items VALUES (5, 'pen', 2), (6, 'ink', 1);
"""


def test_a_real_pg_dump_of_functions_triggers_and_quoted_text_restores_as_it_was(
    cluster: PostgresCluster, tmp_path: Path
) -> None:
    with psycopg.connect(cluster.admin_url(), autocommit=True) as con:
        con.execute("CREATE DATABASE rich_source")
    with psycopg.connect(cluster.admin_url("rich_source"), autocommit=True) as con:
        con.execute(RICH_DATABASE.encode())
    dump = tmp_path / "rich.sql"
    pg_dump = binaries.find_bin_dir(("pg_dump",)) / "pg_dump"
    arguments = ["-h", "127.0.0.1", "-p", str(cluster.port), "-U", cluster.admin.name, "-d", "rich_source"]
    environment = {**os.environ, "PGPASSWORD": cluster.admin.password}
    subprocess.run([str(pg_dump), *arguments, "-f", str(dump)], env=environment, check=True, timeout=60)
    query = "SELECT who, amount, mood, note, doc::text, tags, shop.total(id) FROM shop.orders ORDER BY id"
    with psycopg.connect(cluster.admin_url("rich_source")) as original:
        expected = original.execute(query).fetchall()
        comment = original.execute("SELECT obj_description('shop.orders'::regclass)").fetchone()
    with psycopg.connect(restore_dump(cluster, "rich_copy", dump)) as copy:
        assert copy.execute(query).fetchall() == expected
        assert copy.execute("SELECT obj_description('shop.orders'::regclass)").fetchone() == comment
        assert copy.execute('SELECT "Item Name" FROM shop.items ORDER BY 1').fetchall() == [("ink",), ("pen",)]


def test_a_failed_restore_names_the_dump_line_and_drops_the_database(cluster: PostgresCluster, tmp_path: Path) -> None:
    dump = tmp_path / "broken.sql"
    dump.write_text("CREATE TABLE public.t (a integer);\nCOPY public.t (a) FROM stdin;\n1\nnot a number\n\\.\n")
    with pytest.raises(PostgresError) as failure:
        restore_dump(cluster, "broken", dump)
    message = str(failure.value)
    assert f"{dump}:4: ERROR:" in message and 'invalid input syntax for type integer: "not a number"' in message
    with psycopg.connect(cluster.admin_url()) as con:
        assert con.execute("SELECT 1 FROM pg_database WHERE datname = 'broken'").fetchone() is None


def test_restore_into_a_server_named_by_url(cluster: PostgresCluster) -> None:
    url = restore_dump(cluster.admin_url(), "by_url", DUMP)
    assert url.startswith("postgresql://") and url.endswith("/by_url")
    assert count_and_checksum(url)[0] == 200
    assert restore_dump(cluster.admin_url(), "by_url", DUMP) == url  # same dump: kept, not restored again


def test_an_existing_database_from_elsewhere_is_not_overwritten(cluster: PostgresCluster, tmp_path: Path) -> None:
    with psycopg.connect(cluster.admin_url(), autocommit=True) as con:
        con.execute("CREATE DATABASE theirs")
    with pytest.raises(PostgresError, match="'theirs' already exists"):
        restore_dump(cluster, "theirs", DUMP)


# ---------------------------------------------------------------- tasks


def dab_copy(tmp_path: Path, db_name: str) -> list[Task]:
    folder = tmp_path / "query_bookreview"
    shutil.copytree(DAB, folder)
    config = folder / "db_config.yaml"
    config.write_text(config.read_text().replace("db_name: bookreview_db", f"db_name: {db_name}"))
    return load_dab(folder, build_missing=True)  # builds the review SQLite database from its JSON Lines


def test_prepare_postgres_restores_each_dump_once_and_rewrites_locations(
    cluster: PostgresCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tasks = dab_copy(tmp_path, "prepared_books")
    loads: list[Path] = []
    load_dump = restore._load_dump
    monkeypatch.setattr(restore, "_load_dump", lambda *args: loads.append(args[1]) or load_dump(*args))
    prepared, started = prepare_postgres(tasks, cluster=cluster)
    assert started is None  # the caller's cluster: the caller stops it
    assert len(tasks) == len(prepared) == 3 and len(loads) == 1
    for before, after in zip(tasks, prepared, strict=True):
        assert after.unavailable is None
        books, review = after.data
        assert books.location == cluster.url("prepared_books")
        assert before.data[0].location == str(tmp_path / "query_bookreview" / "query_dataset" / "books_info.sql")
        assert review == before.data[1]
    assert count_and_checksum(prepared[0].data[0].location or "")[0] == 200
    again, _ = prepare_postgres(tasks, cluster=cluster)  # a later run on the same server
    assert len(loads) == 1 and again == prepared


def test_prepare_postgres_names_apart_different_dumps_and_reports_failures(
    cluster: PostgresCluster, tmp_path: Path
) -> None:
    other = tmp_path / "other.sql"
    other.write_text("CREATE TABLE public.t (a integer);\n")
    broken = tmp_path / "broken.sql"
    broken.write_text("CREATE TABLE nonsense;\n")
    tasks = [task_with_dump(f"t{i}", dump) for i, dump in enumerate([DUMP, other, DUMP, broken])]
    prepared, _ = prepare_postgres(tasks, cluster=cluster)
    locations = [task.data[0].location for task in prepared]
    assert locations[:3] == [cluster.url("shared"), cluster.url("shared_2"), cluster.url("shared")]
    assert prepared[3].unavailable is not None and f"{broken}:1: ERROR:" in prepared[3].unavailable


def task_with_dump(task_id: str, dump: Path) -> Task:
    source = DataSource(name="db", kind=DataSourceKind.POSTGRES, location=str(dump))
    config = {"db_clients": {"db": {"db_type": "postgres", "db_name": "shared", "sql_file": dump.name}}}
    return Task(
        id=task_id,
        benchmark="dab",
        question="?",
        question_type=QuestionType.FACTOID,
        data=[source],
        metadata={"db_config": config},
    )


def test_prepare_postgres_leaves_tasks_without_dumps_alone() -> None:
    task = task_with_dump("t", DUMP).model_copy(update={"unavailable": "review database missing"})
    assert prepare_postgres([task]) == ([task], None)  # no cluster started


# ---------------------------------------------------------------- without a server


def test_a_dump_location_is_refused_by_the_tool() -> None:
    with pytest.raises(ToolError, match=r"pg_dump file .*--postgres-url"):
        Databases([books_source(str(DUMP))], ToolSettings())


def test_missing_binaries_say_how_to_get_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", "")
    monkeypatch.setattr(binaries, "VERSION_DIRS", str(tmp_path / "*" / "bin"))
    with pytest.raises(PostgresUnavailable) as missing:
        prepare_postgres([task_with_dump("t", DUMP)])
    assert "apt-get install postgresql" in str(missing.value) and "--postgres-url" in str(missing.value)


def test_the_cluster_runs_unprivileged_and_stop_removes_everything() -> None:
    cluster = PostgresCluster(postgres_bin_dir_or_skip()).start()
    folder, port = cluster._dir, cluster.port
    assert folder is not None and (folder / "data").is_dir()
    if os.geteuid() == 0:  # the server refuses root: it runs as another account
        assert (folder / "data").stat().st_uid != 0
    cluster.stop()
    assert not folder.exists()
    with socket.socket() as probe, pytest.raises(OSError):
        probe.connect(("127.0.0.1", port))


def test_an_unreachable_server_url_stops_the_preparation() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(PostgresUnavailable, match="cannot connect"):
        prepare_postgres([task_with_dump("t", DUMP)], url=f"postgresql://someone:secret@127.0.0.1:{port}/postgres")
