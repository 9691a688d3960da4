"""The agent's PostgreSQL role and the server's lifetime, on a real server the test starts:
a superuser --postgres-url gives the agent only a reader, and nothing outlives a killed run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
from data_agent_compare.tools import ToolError, ToolSettings
from data_agent_compare.tools.dab import dab_tools
from data_agent_compare.tools.postgres import (
    PostgresCluster,
    PostgresError,
    PostgresServer,
    prepare_postgres,
    reap_orphaned_clusters,
)

from helpers import FIXTURES, postgres_bin_dir_or_skip

DUMP = FIXTURES / "dab" / "query_bookreview" / "query_dataset" / "books_info.sql"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresCluster]:
    """A server of the test's own; its admin URL plays a user's superuser --postgres-url."""
    with PostgresCluster(postgres_bin_dir_or_skip()) as started:
        yield started


def dab_task(dbname: str) -> Task:
    source = DataSource(name="books", kind=DataSourceKind.POSTGRES, location=str(DUMP))
    config = {"db_clients": {"books": {"db_type": "postgres", "db_name": dbname, "sql_file": DUMP.name}}}
    return Task(
        id="t", benchmark="dab", question="?", question_type=QuestionType.FACTOID, data=[source],
        metadata={"db_config": config},
    )  # fmt: skip


def run_readers(admin_url: str) -> set[str]:
    with psycopg.connect(admin_url) as con:
        rows = con.execute("SELECT rolname FROM pg_roles WHERE rolname LIKE 'dab\\_reader\\_%'").fetchall()
    return {name for (name,) in rows}


PROBES = {
    "pg_read_file": f"SELECT pg_read_file('{DUMP}')",
    "lo_import": "SELECT lo_import('/etc/passwd')",
    "COPY PROGRAM": "COPY (SELECT 1) TO PROGRAM 'touch /tmp/dab-probe-ran'",
    "pg_authid": "SELECT rolname, rolpassword FROM pg_authid",
    "pg_shadow": "SELECT usename, passwd FROM pg_shadow",
}


def test_a_superuser_url_gives_the_agent_a_reader_that_reads_no_files_programs_or_hashes(
    server: PostgresCluster,
) -> None:
    prepared, started = prepare_postgres([dab_task("iso_books")], url=server.admin_url())
    assert isinstance(started, PostgresServer)
    tools = dab_tools(prepared[0], ToolSettings())
    query_db = next(tool for tool in tools if tool.name == "query_db")
    try:
        rows = query_db.run({"db_name": "books", "query": "SELECT count(*) AS n FROM books_info"}).data["rows"]
        assert rows == [{"n": 200}]
        for name, probe in PROBES.items():
            with pytest.raises(ToolError, match=r"permission denied|must be superuser|refused") as refused:
                query_db.run({"db_name": "books", "query": probe})
            print(f"{name}: {refused.value}")
        reader_url = prepared[0].data[0].location or ""
        with psycopg.connect(reader_url, autocommit=True) as con:  # the server refuses, not only our checks
            assert con.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute("COPY (SELECT 1) TO PROGRAM 'touch /tmp/dab-probe-ran'")
            assert con.execute("SHOW temp_file_limit").fetchone() == ("1GB",)
            assert con.execute("SHOW work_mem").fetchone() == ("16MB",)
        assert not Path("/tmp/dab-probe-ran").exists()
    finally:
        query_db.close()
        assert started is not None
        started.stop()
    assert started.reader.name not in run_readers(server.admin_url())  # dropped at close


def test_a_reader_left_by_a_killed_run_is_dropped_by_the_next_run(server: PostgresCluster, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import json, os, signal
        from pathlib import Path
        from data_agent_compare.tools.postgres import prepare_postgres
        from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
        source = DataSource(name="books", kind=DataSourceKind.POSTGRES, location={str(DUMP)!r})
        task = Task(id="t", benchmark="dab", question="?", question_type=QuestionType.FACTOID, data=[source])
        _, started = prepare_postgres([task], url={server.admin_url()!r})
        print(json.dumps(started.reader.name), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    killed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    left = json.loads(killed.stdout)
    assert left in run_readers(server.admin_url())  # kill -9: nobody dropped it
    _, started = prepare_postgres([dab_task("books_info")], url=server.admin_url())  # the next run
    assert started is not None
    started.stop()
    assert left not in run_readers(server.admin_url())


def test_a_url_role_that_cannot_create_roles_is_refused_and_so_is_a_privileged_reader(server: PostgresCluster) -> None:
    with psycopg.connect(server.admin_url(), autocommit=True) as con:
        con.execute("CREATE ROLE plain_owner LOGIN PASSWORD 'pw' CREATEDB")
        con.execute("CREATE ROLE file_reader LOGIN PASSWORD 'pw' IN ROLE pg_read_server_files")
        con.execute("GRANT CONNECT ON DATABASE postgres TO plain_owner, file_reader")  # PUBLIC may not
    host_and_database = server.admin_url().split("@", 1)[1]
    plain = f"postgresql://plain_owner:pw@{host_and_database}"
    with pytest.raises(PostgresError, match=r"cannot create roles.*grant it CREATEROLE"):
        prepare_postgres([dab_task("iso_plain")], url=plain)
    reader = f"postgresql://file_reader:pw@{host_and_database}"
    with pytest.raises(PostgresError, match="is a member of pg_read_server_files"):
        prepare_postgres([dab_task("iso_plain")], url=server.admin_url(), reader_url=reader)


# ---------------------------------------------------------------- nothing outlives a run


def postmasters_of(folder: str) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if folder.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def start_cluster_and_kill(kill_supervisor_too: bool) -> tuple[str, float]:
    """A process that starts a cluster (through DAB's benchmark) and is killed with SIGKILL:
    the cluster folder and when it was killed."""
    postgres_bin_dir_or_skip()
    script = textwrap.dedent("""
        import json, os, sys, time
        from data_agent_compare.tasks.dab import DataAgentBench
        from data_agent_compare.core.task import DataSource, DataSourceKind, QuestionType, Task
        source = DataSource(name="books", kind=DataSourceKind.POSTGRES, location=sys.argv[1])
        task = Task(id="t", benchmark="dab", question="?", question_type=QuestionType.FACTOID, data=[source])
        benchmark = DataAgentBench(os.path.dirname(sys.argv[1]))
        benchmark.prepare([task])
        cluster = benchmark._cluster
        print(json.dumps([str(cluster._dir), cluster._supervisor.pid]), flush=True)
        time.sleep(600)
    """)
    process = subprocess.Popen([sys.executable, "-c", script, str(DUMP)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    folder, supervisor = json.loads(process.stdout.readline())
    assert postmasters_of(folder)
    if kill_supervisor_too:
        os.kill(supervisor, signal.SIGKILL)
    process.kill()
    killed_at = time.monotonic()
    process.wait()
    return folder, killed_at


@pytest.mark.slow
def test_kill_9_of_a_dab_run_leaves_no_postmaster_and_no_cluster_folder() -> None:
    folder, killed_at = start_cluster_and_kill(kill_supervisor_too=False)
    while (postmasters_of(folder) or Path(folder).exists()) and time.monotonic() - killed_at < 10:
        time.sleep(0.05)
    print(f"cluster gone {time.monotonic() - killed_at:.2f}s after kill -9")
    assert not postmasters_of(folder) and not Path(folder).exists()


@pytest.mark.slow
def test_a_cluster_whose_supervisor_was_killed_too_stops_and_the_next_run_removes_it() -> None:
    folder, killed_at = start_cluster_and_kill(kill_supervisor_too=True)
    while postmasters_of(folder) and time.monotonic() - killed_at < 10:  # PR_SET_PDEATHSIG: SIGQUIT
        time.sleep(0.05)
    assert not postmasters_of(folder)
    assert Path(folder).exists()  # nobody left to delete it, until a next run looks
    assert Path(folder) in reap_orphaned_clusters()
    assert not Path(folder).exists()


@pytest.mark.slow
def test_the_cli_refuses_a_postgres_url_role_that_cannot_create_roles_with_exit_2(
    server: PostgresCluster, tmp_path: Path
) -> None:
    with psycopg.connect(server.admin_url(), autocommit=True) as con:
        con.execute("CREATE ROLE cli_owner LOGIN PASSWORD 'pw'")
        con.execute("GRANT CONNECT ON DATABASE postgres TO cli_owner")  # the test's cluster: PUBLIC may not
    url = f"postgresql://cli_owner:pw@{server.admin_url().split('@', 1)[1]}"
    tasks = tmp_path / "dab"
    shutil.copytree(DUMP.parents[2], tasks)  # loading builds a missing SQLite database beside the fixture
    flags = ["--benchmark", "dab", "--tasks-path", str(tasks), "--workflows", "tool_use"]
    flags += ["--models", "local", "--limit", "1", "--out", str(tmp_path / "run"), "--postgres-url", url]
    done = subprocess.run(
        [sys.executable, "-m", "data_agent_compare.cli", *flags], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2
    assert "error: the role of --postgres-url cannot create roles" in done.stderr
    assert "Traceback" not in done.stderr and "pw@" not in done.stderr
