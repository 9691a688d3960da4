"""Issue 26's PostgreSQL probes, on a real server the test starts: hostile URLs, readers, agents
and dumps. Each test is one probe that got through before and asserts what happens now."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.tools.postgres import (
    PostgresCluster,
    PostgresError,
    PostgresServer,
    lock_down,
    prepare_postgres,
    restore_dump,
)
from data_agent_compare.tools.postgres.pg_dump import DumpReader, DumpRefused

from helpers import FIXTURES, postgres_bin_dir_or_skip

DUMP = FIXTURES / "dab" / "query_bookreview" / "query_dataset" / "books_info.sql"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresCluster]:
    """A server of the test's own; its superuser plays the user's --postgres-url role."""
    with PostgresCluster(postgres_bin_dir_or_skip()) as started:
        yield started


def dab_task(dbname: str, dump: Path = DUMP) -> Task:
    source = DataSource(name="books", kind=DataSourceKind.POSTGRES, location=str(dump))
    config = {"db_clients": {"books": {"db_type": "postgres", "db_name": dbname, "sql_file": dump.name}}}
    return Task(
        id="t", benchmark="dab", question="?", question_type=QuestionType.FACTOID, data=[source],
        metadata={"db_config": config},
    )  # fmt: skip


def agent_url(server: PostgresCluster, url: str, dbname: str = "hostile_books", **options: object) -> Iterator[str]:
    prepared, started = prepare_postgres([dab_task(dbname)], url=url, **options)  # type: ignore[arg-type]
    assert isinstance(started, PostgresServer)
    try:
        yield prepared[0].data[0].location or ""
    finally:
        started.stop()


def who(url: str) -> tuple[str, bool]:
    with psycopg.connect(url) as con:
        row = con.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    assert row is not None
    return row


# ---------------------------------------------------------------- the agent's role, in every form of URL


def test_a_role_in_the_url_query_string_serves_only_the_suite(server: PostgresCluster) -> None:
    admin = server.admin
    url = f"postgresql://127.0.0.1:{server.port}/postgres?user={admin.name}&password={admin.password}"
    for location in agent_url(server, url):
        assert "?" not in location and admin.password not in location
        name, superuser = who(location)
        assert name.startswith("dab_reader_") and not superuser
        with psycopg.connect(location) as con, pytest.raises(psycopg.errors.InsufficientPrivilege):
            con.execute(f"SELECT pg_read_file('{DUMP}')")


@pytest.mark.parametrize("source", ["environment", "service file"])
def test_a_role_from_the_environment_or_a_service_file_serves_only_the_suite(
    server: PostgresCluster, source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if source == "environment":
        monkeypatch.setenv("PGUSER", server.admin.name)
        monkeypatch.setenv("PGPASSWORD", server.admin.password)
        url = f"postgresql://127.0.0.1:{server.port}/postgres"
    else:
        services = tmp_path / "services"
        services.write_text(
            f"[dab]\nhost=127.0.0.1\nport={server.port}\nuser={server.admin.name}\npassword={server.admin.password}\n"
        )
        monkeypatch.setenv("PGSERVICEFILE", str(services))
        url = "postgresql:///postgres?service=dab"
    for location in agent_url(server, url, f"hostile_{source[:3]}"):
        assert who(location)[0].startswith("dab_reader_")
        assert f"127.0.0.1:{server.port}" in location


# ---------------------------------------------------------------- the --postgres-reader-url check


def make_roles(server: PostgresCluster, *statements: str) -> None:
    """Run `statements`; each LOGIN role they make may connect to `postgres`, where its URL points."""
    with psycopg.connect(server.admin_url(), autocommit=True) as con:
        for statement in statements:
            con.execute(statement)
            if " LOGIN " in statement:
                con.execute(f"GRANT CONNECT ON DATABASE postgres TO {statement.split()[2]}")


def reader(server: PostgresCluster, role: str) -> str:
    return f"postgresql://{role}:pw@127.0.0.1:{server.port}/postgres"


def readable_by_the_server(server: PostgresCluster, path: Path) -> Path:
    """`path` copied into the server's data directory, which its OS user can always read: a checkout in a
    private folder (`mktemp -d` makes one) is out of its reach, which would hide what a superuser can read."""
    with psycopg.connect(server.admin_url(), autocommit=True) as con:
        row = con.execute("SHOW data_directory").fetchone()
    assert row is not None
    copy = Path(row[0]) / path.name
    shutil.copyfile(path, copy)
    copy.chmod(0o644)
    return copy


def test_a_reader_that_is_a_member_of_a_superuser_role_is_refused(server: PostgresCluster) -> None:
    make_roles(
        server, "CREATE ROLE admin2 SUPERUSER NOLOGIN", "CREATE ROLE via_admin2 LOGIN PASSWORD 'pw' IN ROLE admin2"
    )
    dump = readable_by_the_server(server, DUMP)
    with psycopg.connect(reader(server, "via_admin2"), autocommit=True) as con:  # what the probe did with it
        con.execute("BEGIN")
        con.execute("SELECT set_config('role', 'admin2', true)")
        row = con.execute(f"SELECT query_to_xml('select pg_read_file(''{dump}'')', true, false, '')").fetchone()
        assert row is not None and "PostgreSQL database dump" in row[0]
    with pytest.raises(PostgresError, match=r"is a member of admin2 \(super\)"):
        prepare_postgres([dab_task("hostile_books")], url=server.admin_url(), reader_url=reader(server, "via_admin2"))


def test_a_noinherit_member_of_a_role_holding_pg_read_server_files_is_refused(server: PostgresCluster) -> None:
    make_roles(
        server,
        "CREATE ROLE file_holder NOLOGIN IN ROLE pg_read_server_files",
        "CREATE ROLE noinherit_reader LOGIN PASSWORD 'pw' NOINHERIT IN ROLE file_holder",
    )
    with pytest.raises(PostgresError, match="is a member of pg_read_server_files"):
        prepare_postgres(
            [dab_task("hostile_books")], url=server.admin_url(), reader_url=reader(server, "noinherit_reader")
        )


def test_execute_on_pg_read_file_granted_inside_the_restored_database_is_refused(server: PostgresCluster) -> None:
    make_roles(server, "CREATE ROLE granted_reader LOGIN PASSWORD 'pw'")
    restore_dump(server, "hostile_granted", DUMP)
    with psycopg.connect(server.admin_url("hostile_granted"), autocommit=True) as con:
        con.execute("GRANT EXECUTE ON FUNCTION pg_read_file(text) TO granted_reader")
    url = reader(server, "granted_reader")  # its own database, postgres, grants nothing: the old check passed
    with pytest.raises(PostgresError, match="may run pg_read_file in database 'hostile_granted'"):
        prepare_postgres([dab_task("hostile_granted")], url=server.admin_url(), reader_url=url)


def test_a_plain_reader_passes_and_the_agent_connects_as_it(server: PostgresCluster) -> None:
    make_roles(server, "CREATE ROLE plain_reader LOGIN PASSWORD 'pw'")
    for location in agent_url(server, server.admin_url(), "hostile_plain", reader_url=reader(server, "plain_reader")):
        assert who(location) == ("plain_reader", False)


# ---------------------------------------------------------------- one unit against another, and the server


def sleep_and_note(con: psycopg.Connection[object], outcome: list[str]) -> None:
    outcome.append(str(con.execute("SELECT pg_sleep(2)").fetchone()))


def test_one_unit_can_neither_see_nor_end_another_units_query(server: PostgresCluster) -> None:
    for location in agent_url(server, server.admin_url()):
        unit_a = psycopg.connect(location, autocommit=True)
        pid = (unit_a.execute("SELECT pg_backend_pid()").fetchone() or [0])[0]
        outcome: list[str] = []
        slow = threading.Thread(target=sleep_and_note, args=(unit_a, outcome))
        slow.start()
        time.sleep(0.3)
        with psycopg.connect(location, autocommit=True) as unit_b:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pg_terminate_backend"):
                unit_b.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="pg_stat_activity"):
                unit_b.execute("SELECT pid, query FROM pg_stat_activity")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                unit_b.execute("SELECT pg_cancel_backend(%s)", (pid,))
        slow.join()
        unit_a.close()
        assert outcome == ["('',)"]  # A's query ran to its end


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def test_a_gigabyte_value_fails_out_of_memory_and_the_backend_stays_small(server: PostgresCluster) -> None:
    for location in agent_url(server, server.admin_url()):
        with psycopg.connect(location, autocommit=True) as con:
            pid = (con.execute("SELECT pg_backend_pid()").fetchone() or [0])[0]
            started = time.monotonic()
            with pytest.raises(psycopg.errors.OutOfMemory):
                con.execute("SELECT length(repeat('a', 1000000000))")
            peak = peak_rss_mb(pid)
            print(f"repeat 1e9: out of memory after {time.monotonic() - started:.2f}s, backend peak RSS {peak:.0f} MB")
            assert peak < server.backend_memory_mb
            assert con.execute("SELECT length(repeat('a', 1000000))").fetchone() == (1_000_000,)  # still serves


def test_the_reader_role_has_its_limits(server: PostgresCluster) -> None:
    for location in agent_url(server, server.admin_url(), connection_limit=5):
        with psycopg.connect(location) as con:
            settings = [con.execute(f"SHOW {name}").fetchone() for name in ("work_mem", "temp_file_limit")]
            assert settings == [("16MB",), ("1GB",)]
            assert con.execute("SHOW statement_timeout").fetchone() == ("5min",)
            limit = con.execute("SELECT rolconnlimit FROM pg_roles WHERE rolname = current_user").fetchone()
            assert limit == (5,)


# ---------------------------------------------------------------- dumps that would run code


BANG = "/tmp/dab-hostile-dump-ran"
RUNS_CODE = {  # the dump, and the line the refusal names
    "shell meta-command": (f"CREATE TABLE t (a int);\n\\! id > {BANG}\n", 2),
    "meta-command after a statement": (f"CREATE TABLE t (a int); \\! id > {BANG}\n", 1),
    "output to a pipe": (f"\\o |id > {BANG}\nSELECT 1;\n", 1),
    "client-side copy from a program": (f"\\copy t from program 'id > {BANG}'\n", 1),
    "copy to a program": (f"CREATE TABLE t (a int);\nCOPY (SELECT 1) TO PROGRAM 'id > {BANG}';\n", 2),
    "copy from a server file": ("CREATE TABLE t (a text);\nCOPY t FROM '/etc/passwd';\n", 2),
    "a fake COPY inside a string": (f"SELECT 'x\nCOPY t FROM stdin;\n';\n\\! id > {BANG}\n", 4),
}


@pytest.mark.parametrize("case", RUNS_CODE)
def test_a_dump_that_would_run_code_is_refused_naming_its_line_and_runs_nothing(
    server: PostgresCluster, tmp_path: Path, case: str
) -> None:
    Path(BANG).unlink(missing_ok=True)
    dump = tmp_path / "hostile.sql"
    text, line = RUNS_CODE[case]
    dump.write_text(text)
    with pytest.raises(PostgresError, match=rf"{dump}:{line}: .*runs no commands or programs"):
        restore_dump(server, "hostile_dump", dump)
    assert not Path(BANG).exists()
    with psycopg.connect(server.admin_url()) as con:  # and the half-restored database is gone
        assert con.execute("SELECT 1 FROM pg_database WHERE datname = 'hostile_dump'").fetchone() is None


def test_sql_in_a_dump_runs_as_an_unprivileged_role(server: PostgresCluster, tmp_path: Path) -> None:
    Path(BANG).unlink(missing_ok=True)
    dump = tmp_path / "do.sql"
    dump.write_text(
        f"CREATE TABLE t (a int);\nDO $$BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''id > {BANG}'''; END$$;\n"
    )
    refusal = rf"{dump}:2: ERROR: must be superuser or have privileges of the pg_execute_server_program"
    with pytest.raises(PostgresError, match=refusal):
        restore_dump(server, "hostile_do", dump)
    assert not Path(BANG).exists()
    dump.write_text(f"CREATE TABLE t AS SELECT pg_read_file('{DUMP}') AS stolen;\n")
    with pytest.raises(PostgresError, match=rf"{dump}:1: ERROR: permission denied for function pg_read_file"):
        restore_dump(server, "hostile_do", dump)


def test_quoted_backslashes_and_dollar_quotes_are_data_not_commands() -> None:
    text = (
        "SET standard_conforming_strings = on;\n"
        "\\restrict abc123\n"
        "CREATE FUNCTION f() RETURNS text LANGUAGE sql AS $body$ SELECT '\\! not a command; still the body' $body$;\n"
        "SELECT E'it\\'s \\\\ fine', 'C:\\path', \"odd\\name\" FROM x; -- \\! a comment\n"
        "/* a \\! comment /* nested */ still */ SELECT 1;\n"
        "\\unrestrict abc123\n"
    )
    statements = list(DumpReader(Path("quoted.sql"), [line + b"\n" for line in text.encode().split(b"\n") if line]))
    assert [s.line for s in statements] == [1, 3, 4, 5]
    assert statements[1].body.endswith("$body$;")
    with pytest.raises(DumpRefused, match=r"quoted\.sql:2: a psql meta-command"):
        list(DumpReader(Path("quoted.sql"), [b"SELECT 1;\n", b"SELECT 'a' \\g\n"]))


def test_in_a_cluster_the_suite_starts_no_database_lets_the_reader_signal_another_session(
    server: PostgresCluster,
) -> None:
    refused = pytest.raises(psycopg.errors.InsufficientPrivilege, match="pg_terminate_backend")
    with psycopg.connect(server.url("postgres"), autocommit=True) as con, refused:
        con.execute("SELECT pg_terminate_backend(1)")


def test_a_url_role_that_is_no_superuser_cannot_isolate_the_units_and_the_run_is_refused(
    server: PostgresCluster,
) -> None:
    make_roles(server, "CREATE ROLE lesser_admin LOGIN PASSWORD 'pw' CREATEROLE CREATEDB")
    template = server.admin_url("template1")  # locked down in the suite's cluster; as usual elsewhere:
    with psycopg.connect(template, autocommit=True) as con:
        con.execute("GRANT EXECUTE ON FUNCTION pg_terminate_backend(integer, bigint) TO PUBLIC")
    try:
        with pytest.raises(PostgresError, match=r"may run .*pg_terminate_backend.* in database 'hostile_lesser'"):
            prepare_postgres([dab_task("hostile_lesser")], url=reader(server, "lesser_admin"))
    finally:
        with psycopg.connect(template, autocommit=True) as con:
            lock_down(con)
