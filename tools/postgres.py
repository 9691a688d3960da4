"""PostgreSQL for DAB tasks: a throw-away cluster on loopback, and pg_dump restores into it.

DAB ships its PostgreSQL databases as plain pg_dump files. `prepare_postgres` restores each
dump once per run, into the server the user names (`--postgres-url`) or into a
`PostgresCluster` started for the run, and rewrites the tasks' data sources to
`postgresql://` URLs that `tools/sql.py`'s `PostgresDatabase` opens read-only.

The throw-away cluster listens on 127.0.0.1 only, on a free port, with its data and unix
socket in a private temporary folder; every server process runs under RLIMIT_AS
(`backend_memory_mb`), so one query cannot take more than that. Two roles with generated
passwords: an admin (the superuser, used only to restore) and a reader whose URL goes into the
tasks. Passwords rather than trust auth, because an agent's Python tool runs on the same machine
and could otherwise connect to the loopback port as the superuser.

A dump runs no code (`restore_dump`): it is never given to psql (tools/pg_dump.py reads it and
refuses meta-commands and any COPY but `FROM stdin`), and its statements run as a fresh
unprivileged role that owns the new database, not as the admin.

The reader (`create_reader`) can only SELECT the restored databases' user tables: no
superuser, no predefined role, read-only transactions, statement_timeout, work_mem,
temp_file_limit and a connection limit. Every unit of a run shares it, so in each restored
database PUBLIC loses the functions and views that signal or watch other sessions
(`lock_down`: pg_terminate_backend, pg_stat_activity, ...). `reader_problems` checks the reader
in every restored database, following role membership by any path. The agent's URL names only
host, port, database, the reader and its password (`clean_url`): a role in the query string of
`--postgres-url`, a service file or PGUSER/PGPASSWORD serve the suite's admin connection only.
With `--postgres-url` the suite restores as the URL's role (which must be able to create roles)
and creates such a reader per run (`PostgresServer`), dropped at close, or the run names an
existing reader (`reader_url`, checked the same way). docs/postgres-security.md says it all.

Nothing outlives the run: the server runs under a small supervisor (SUPERVISOR) that stops it
and deletes its folder when the runner asks, or as soon as the runner is gone, however it died
(`kill -9` included); if the supervisor itself is killed, the server gets SIGQUIT
(PR_SET_PDEATHSIG). Each cluster folder and each per-run reader role names its owner (host,
pid, process start time); a later run reaps those whose owner is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import json
import logging
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..core.runlog import register_secret
from ..core.task import DataSource, DataSourceKind, Task
from .pg_dump import DumpReader, DumpRefused, Statement

log = logging.getLogger(__name__)

VERSION_DIRS = "/usr/lib/postgresql/*/bin"  # Debian/Ubuntu layout, one folder per major version
CLUSTER_PROGRAMS = ("initdb", "postgres")
INSTALL_HINT = (
    "install the PostgreSQL server binaries (Debian/Ubuntu: `apt-get install postgresql`) "
    "or pass --postgres-url postgresql://USER:PASSWORD@HOST:PORT/postgres naming a server to restore into"
)
ADMIN_ROLE = "dab_admin"
READER_ROLE = "dab_reader"
MARKER = "restored by data-agent-compare from a pg_dump with sha256 "  # COMMENT ON DATABASE
# C.UTF-8: present on every glibc system, Unicode-aware upper/lower and ILIKE; text sorts by
# code point (a server in en_US.UTF-8 may order text differently).
INITDB_OPTIONS = ("--auth=scram-sha-256", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
# Durability is pointless for a cluster deleted after the run; without it restores are faster.
CLUSTER_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
START_ATTEMPTS = 3  # another process may take the free port between choosing it and binding it
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
CLUSTER_PREFIX = "dab-pg-"  # the cluster folders in the temporary folder
OWNER_FILE = "owner"  # in a cluster folder: which process the cluster belongs to
# What the reader's queries may cost the server (per session; a tool's connection sets its own
# statement_timeout from ToolSettings). temp_file_limit can only be set by a superuser.
READER_SETTINGS = {
    "default_transaction_read_only": "on",
    "statement_timeout": "300s",
    "work_mem": "16MB",
    "temp_file_limit": "1GB",
}
READER_COMMENT = "data-agent-compare reader of the run "  # COMMENT ON ROLE, + the owner tag
# What makes a role unfit to run agent queries, checked in every database it reads
# (`reader_problems`): membership, by any path and INHERIT or not (it can SET ROLE), of a role
# with any of these attributes or of any predefined pg_* role (each reads or runs something
# beyond the restored tables, or signals or watches other sessions).
PRIVILEGED_ATTRIBUTES = ("rolsuper", "rolcreaterole", "rolcreatedb", "rolreplication", "rolbypassrls")
# Functions that read or list server files, import or export large objects, signal or watch other
# sessions, or administer the server. Some run for PUBLIC by default (pg_terminate_backend ends
# the backends of the caller's own role: every unit of a run shares the reader role);
# `lock_down` revokes those in each restored database, the check refuses any left.
ADMIN_FUNCTIONS = (
    "pg_read_file", "pg_read_binary_file", "pg_stat_file", "pg_ls_dir", "pg_ls_logdir", "pg_ls_waldir",
    "pg_ls_tmpdir", "pg_ls_archive_statusdir", "pg_ls_logicalsnapdir", "pg_ls_logicalmapdir",
    "pg_ls_replslotdir", "lo_import", "lo_export", "pg_file_write", "pg_file_rename", "pg_file_unlink",
    "pg_logdir_ls", "dblink_connect_u", "pg_reload_conf", "pg_rotate_logfile", "pg_promote", "pg_switch_wal",
    "pg_backup_start", "pg_backup_stop", "pg_create_restore_point", "pg_log_backend_memory_contexts",
    "pg_create_physical_replication_slot", "pg_create_logical_replication_slot", "pg_drop_replication_slot",
)  # fmt: skip
SESSION_FUNCTIONS = (
    "pg_terminate_backend", "pg_cancel_backend", "pg_stat_get_activity", "pg_stat_get_backend_activity",
    "pg_stat_get_backend_pid", "pg_stat_get_backend_idset", "pg_stat_get_backend_userid",
    "pg_stat_get_backend_dbid", "pg_blocking_pids", "pg_safe_snapshot_blocking_pids", "pg_lock_status",
)  # fmt: skip
SESSION_VIEWS = ("pg_stat_activity", "pg_locks")  # show other sessions' pids and queries
READER_CONNECTION_LIMIT = 32  # sessions of the reader role at once (each unit opens one per database)
BACKEND_MEMORY_MB = 1024  # address space of each server process of a cluster the suite starts

# Runs the server as its child (argv[1]: JSON config). Stops it with a fast shutdown and deletes
# the cluster folder on "stop", on EOF, on SIGTERM, or once the runner (config "parent") is gone.
# PR_SET_PDEATHSIG (SIGUSR1) only wakes it: the signal also fires when the thread that started
# it ends, so the parent is checked rather than trusted. The server itself gets SIGQUIT
# (immediate shutdown) should the supervisor die.
SUPERVISOR = r"""
import ctypes, json, os, resource, select, shutil, signal, subprocess, sys
config = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1
signal.signal(signal.SIGUSR1, lambda *_: None)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
libc.prctl(PR_SET_PDEATHSIG, signal.SIGUSR1)
user = config["user"]
with open(config["log"], "ab") as log:
    server = subprocess.Popen(
        config["command"], cwd=config["folder"], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
        user=user and user[0], group=user and user[1], extra_groups=[] if user else None,
        preexec_fn=lambda: (
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGQUIT),
            resource.setrlimit(resource.RLIMIT_AS, (config["memory_bytes"],) * 2),  # inherited by each backend
        ),
    )
crashed = False
try:
    while os.getppid() == config["parent"]:
        if server.poll() is not None:
            crashed = True  # keep the folder: the runner reads the server's log
            break
        readable, _, _ = select.select([sys.stdin], [], [], 0.2)
        if readable and sys.stdin.readline() in ("stop\n", ""):
            break
finally:
    if server.poll() is None:
        server.send_signal(signal.SIGINT)  # fast shutdown
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    if not crashed:
        shutil.rmtree(config["folder"], ignore_errors=True)
sys.exit(server.returncode if crashed else 0)
"""


class PostgresError(RuntimeError):
    """The cluster or a restore failed; the message says what and where."""


class PostgresUnavailable(PostgresError):
    """No PostgreSQL binaries here and no server URL given."""


# ---------------------------------------------------------------- binaries


def find_bin_dir(
    programs: Sequence[str] = CLUSTER_PROGRAMS, *, path: str | None = None, version_dirs: str | None = None
) -> Path:
    """The first folder holding all `programs`: where PATH's hits (`path`, default $PATH) really
    live, then the newest `version_dirs` folder (default VERSION_DIRS). Raises PostgresUnavailable
    with install instructions."""
    for folder in _candidate_dirs(programs[0], path, version_dirs or VERSION_DIRS):
        if all((folder / program).is_file() for program in programs):
            return folder
    raise PostgresUnavailable(f"PostgreSQL binaries not found ({', '.join(programs)}); {INSTALL_HINT}")


def _candidate_dirs(program: str, path: str | None, version_dirs: str) -> Iterator[Path]:
    hit = shutil.which(program, path=os.environ.get("PATH", "") if path is None else path)
    if hit:
        # /usr/local/bin/initdb may be a symlink into a folder that also has psql
        yield Path(hit).parent
        yield Path(hit).resolve().parent
    versioned = [Path(p) for p in glob.glob(version_dirs)]
    yield from sorted(versioned, key=lambda folder: _version_key(folder.parent.name), reverse=True)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", name)) or (0,)


# ---------------------------------------------------------------- the cluster


@dataclass(frozen=True)
class _Role:
    name: str
    password: str


class PostgresCluster:
    """A throw-away PostgreSQL cluster on 127.0.0.1; `stop()` (or leaving the `with` block)
    shuts it down and deletes its folder. Also stopped at interpreter exit, and by its
    supervisor when this process dies (module docstring)."""

    def __init__(
        self,
        bin_dir: Path | None = None,
        *,
        connection_limit: int = READER_CONNECTION_LIMIT,
        backend_memory_mb: int = BACKEND_MEMORY_MB,
    ) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.connection_limit = connection_limit
        self.backend_memory_mb = backend_memory_mb  # RLIMIT_AS of the server and each backend
        self.port = 0
        self.admin = _Role(ADMIN_ROLE, secrets.token_urlsafe(24))
        self.reader = _Role(READER_ROLE, secrets.token_urlsafe(24))
        register_secret(self.admin.password)
        register_secret(self.reader.password)
        self._dir: Path | None = None
        self._supervisor: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._dir is not None

    def url(self, dbname: str = "postgres") -> str:
        """The reader's URL: what tasks and tools get."""
        return self._url(self.reader, dbname)

    def admin_url(self, dbname: str = "postgres") -> str:
        return self._url(self.admin, dbname)

    def _url(self, role: _Role, dbname: str) -> str:
        if not self.running:
            raise PostgresError("the PostgreSQL cluster is not running")
        return (
            f"postgresql://{role.name}:{quote(role.password, safe='')}@127.0.0.1:{self.port}/{quote(dbname, safe='')}"
        )

    def start(self) -> PostgresCluster:
        if self.running:
            return self
        started = time.perf_counter()
        reap_orphaned_clusters()
        self._dir = Path(tempfile.mkdtemp(prefix=CLUSTER_PREFIX))
        (self._dir / OWNER_FILE).write_text(owner_tag())
        try:
            self._init()
            self._start_server()
            create_reader(self.admin_url(), self.reader, connection_limit=self.connection_limit)
            self._lock_down_default_databases()
        except BaseException:
            self.stop()
            raise
        atexit.register(self.stop)
        log.info("PostgreSQL cluster on 127.0.0.1:%d started in %.1fs", self.port, time.perf_counter() - started)
        return self

    def stop(self) -> None:
        if self._dir is None:
            return
        atexit.unregister(self.stop)
        self._stop_supervisor()
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

    def _stop_supervisor(self) -> None:
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is None:
            return
        assert supervisor.stdin is not None
        with contextlib.suppress(OSError):  # it may be gone already
            supervisor.stdin.write(b"stop\n")
            supervisor.stdin.close()
        try:
            supervisor.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            supervisor.kill()
            supervisor.wait()

    def _init(self) -> None:
        assert self._dir is not None
        user = _server_user()
        if user:  # the server processes run as `user`: they must own the folder
            os.chown(self._dir, user.pw_uid, user.pw_gid)
        password_file = self._dir / "admin-password"
        password_file.write_text(self.admin.password)
        if user:
            os.chown(password_file, user.pw_uid, user.pw_gid)
        try:
            self._run("initdb", "-D", "data", "-U", self.admin.name, f"--pwfile={password_file.name}", *INITDB_OPTIONS)
        finally:
            password_file.unlink()
        settings = {
            **CLUSTER_SETTINGS,
            "listen_addresses": "'127.0.0.1'",
            "unix_socket_directories": f"'{self._dir}'",  # private folder, not the shared /var/run/postgresql
        }
        with (self._dir / "data" / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())

    def _start_server(self) -> None:
        assert self._dir is not None
        for attempt in range(1, START_ATTEMPTS + 1):
            self.port = _free_port()
            self._supervisor = self._supervise()
            if self._wait_ready(self._supervisor):
                return
            self._stop_supervisor()
            server_log = (self._dir / "server.log").read_text(errors="replace") if self._dir.exists() else ""
            if "Address already in use" not in server_log or attempt == START_ATTEMPTS:
                raise PostgresError(f"the PostgreSQL server did not start:\n{_tail(server_log)}")

    def _supervise(self) -> subprocess.Popen[bytes]:
        assert self._dir is not None
        user = _server_user()
        config = {
            "command": [str(self.bin_dir / "postgres"), "-D", str(self._dir / "data"), "-p", str(self.port)],
            "folder": str(self._dir),
            "log": str(self._dir / "server.log"),
            "parent": os.getpid(),
            "user": [user.pw_uid, user.pw_gid] if user else None,
            "memory_bytes": self.backend_memory_mb * 2**20,
        }
        with (self._dir / "server.log").open("ab") as server_log:  # the supervisor's errors go there too
            return subprocess.Popen(
                [sys.executable, "-I", "-c", SUPERVISOR, json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=server_log,
                cwd=self._dir,
                env={**os.environ, "LC_ALL": "C.UTF-8"},
                start_new_session=True,  # Ctrl-C reaches the runner, which stops the server in order
            )

    def _wait_ready(self, supervisor: subprocess.Popen[bytes]) -> bool:
        """Whether the server accepts connections (postmaster.pid says "ready"); False when it exited."""
        assert self._dir is not None
        pid_file = self._dir / "data" / "postmaster.pid"
        deadline = time.monotonic() + START_TIMEOUT_S
        while supervisor.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                if [line.strip() for line in pid_file.read_text().splitlines()[7:8]] == ["ready"]:
                    return True
            time.sleep(0.05)
        return False

    def _lock_down_default_databases(self) -> None:
        """`lock_down` in `postgres` and `template1` too (new databases copy template1): a reader
        that connects there cannot signal or watch other sessions either."""
        for dbname in ("postgres", "template1"):
            with psycopg.connect(self.admin_url(dbname), autocommit=True) as con:
                lock_down(con)

    def allow_reader(self, dbname: str) -> None:
        """Let the reader SELECT `dbname`'s tables, and nobody else connect there."""
        grant_reader(self.admin_url(dbname), self.reader.name)

    def check_reader(self, dbnames: Iterable[str]) -> None:
        refuse_unfit_reader([self.url(dbname) for dbname in dbnames], "the run")

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self._dir is not None
        result = subprocess.run(
            [str(self.bin_dir / program), *args],
            cwd=self._dir,  # relative paths above; and root's cwd may be unreadable for the server user
            env={**os.environ, "LC_ALL": "C.UTF-8"},
            capture_output=True,
            text=True,
            **_drop_root_kwargs(),
        )
        if check and result.returncode != 0:
            raise PostgresError(f"{program} failed:\n{_tail(result.stdout + result.stderr)}")
        return result


# ---------------------------------------------------------------- owners, and what outlived theirs


def owner_tag(pid: int | None = None) -> str:
    """Who owns a cluster or reader: host, pid and the process's start time (pids are reused)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()} {pid} {_process_start(pid)}"


def owner_alive(tag: str) -> bool:
    """False only when the tag names a process of this host that is gone."""
    host, _, rest = tag.strip().partition(" ")
    pid, _, start = rest.partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's (or unreadable): not ours to judge
    return _process_start(int(pid)) == start


def _process_start(pid: int) -> str:
    try:  # field 22 of /proc/PID/stat, counted after the command name's closing parenthesis
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return "gone"


def reap_orphaned_clusters(folder: Path | None = None) -> list[Path]:
    """Stop the servers of cluster folders whose owner is gone and delete the folders; returns them."""
    reaped = []
    for owner in Path(folder or tempfile.gettempdir()).glob(f"{CLUSTER_PREFIX}*/{OWNER_FILE}"):
        with contextlib.suppress(OSError):
            if owner_alive(owner.read_text()):
                continue
            _kill_postmaster(owner.parent)
            shutil.rmtree(owner.parent, ignore_errors=True)
            log.warning("removed the PostgreSQL cluster %s left by a run that ended without stopping it", owner.parent)
            reaped.append(owner.parent)
    return reaped


def _kill_postmaster(cluster_dir: Path) -> None:
    try:
        pid = int((cluster_dir / "data" / "postmaster.pid").read_text().split()[0])
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return  # no server, or not running
    if str(cluster_dir).encode() not in command:
        return  # the pid was reused by something else
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGQUIT)  # immediate shutdown; its backends follow
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------- the reader role


def create_reader(
    admin_url: str, role: _Role, comment: str | None = None, *, connection_limit: int = READER_CONNECTION_LIMIT
) -> None:
    """A login role without any privilege yet (`grant_reader` adds SELECT per database), bound by
    READER_SETTINGS and `connection_limit` sessions. temp_file_limit needs a superuser to set;
    without one it is left out."""
    name = sql.Identifier(role.name)
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as con:
        con.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                "NOINHERIT CONNECTION LIMIT {}"
            ).format(name, sql.Literal(role.password), sql.Literal(connection_limit))
        )
        if comment:
            con.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(name, sql.Literal(comment)))
        for setting, value in READER_SETTINGS.items():
            try:
                con.execute(sql.SQL("ALTER ROLE {} SET {} = {}").format(name, sql.Identifier(setting), value))
            except psycopg.errors.InsufficientPrivilege:
                log.warning("the role of --postgres-url cannot set %s for the reader role; left unset", setting)


def grant_reader(admin_db_url: str, reader: str) -> None:
    """Let `reader` connect to the URL's database and SELECT its user tables; PUBLIC loses its
    default CONNECT and TEMP there, and the functions and views that signal or watch other
    sessions (`lock_down`)."""
    role = sql.Identifier(reader)
    with psycopg.connect(admin_db_url, autocommit=True, connect_timeout=10, options=ADMIN_OPTIONS) as con:
        database = sql.Identifier(con.info.dbname)
        con.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(database))
        con.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role))
        lock_down(con)
        schemas = con.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\\_%'"
        ).fetchall()
        for (schema,) in schemas:
            con.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(sql.Identifier(schema), role))
            con.execute(sql.SQL("GRANT SELECT ON ALL TABLES IN SCHEMA {} TO {}").format(sql.Identifier(schema), role))


def lock_down(con: psycopg.Connection[Any]) -> None:
    """In the connected database, PUBLIC may no longer signal or watch other sessions (nor run the
    file and admin functions). Only the functions' owner, a superuser, can revoke: with a lesser
    role PostgreSQL only warns, and `reader_problems` then refuses the reader."""
    functions = con.execute(
        "SELECT oid::regprocedure::text FROM pg_proc WHERE proname = ANY(%s)",
        ([*SESSION_FUNCTIONS, *ADMIN_FUNCTIONS],),
    ).fetchall()
    revokes = [sql.SQL("REVOKE EXECUTE ON FUNCTION {} FROM PUBLIC").format(sql.SQL(f)) for (f,) in functions]
    views = [sql.Identifier("pg_catalog", view) for view in SESSION_VIEWS]
    revokes += [sql.SQL("REVOKE SELECT ON {} FROM PUBLIC").format(view) for view in views]
    for revoke in revokes:
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):  # a role without any privilege there
            con.execute(revoke)


def drop_reader(admin_url: str, reader: str) -> None:
    """End the reader's sessions, revoke what it was granted in every database, drop it."""
    role = sql.Identifier(reader)
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as con:
        con.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (reader,))
        databases = [row[0] for row in con.execute("SELECT datname FROM pg_database WHERE datallowconn")]
    for dbname in databases:
        url = _with_dbname(admin_url, dbname)
        # a database we may not connect to holds no grants of ours
        with (
            contextlib.suppress(psycopg.OperationalError),
            psycopg.connect(url, autocommit=True, options=ADMIN_OPTIONS) as con,
        ):
            con.execute(sql.SQL("DROP OWNED BY {}").format(role))
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as con:
        con.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))


def reap_readers(admin_url: str) -> list[str]:
    """Drop the per-run readers on this server whose run is gone; returns their names."""
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=10) as con:
        rows = con.execute(
            "SELECT rolname, shobj_description(oid, 'pg_authid') FROM pg_roles "
            "WHERE starts_with(coalesce(shobj_description(oid, 'pg_authid'), ''), %s)",
            (READER_COMMENT,),
        ).fetchall()
    orphans = [name for name, comment in rows if not owner_alive(comment.removeprefix(READER_COMMENT))]
    for name in orphans:
        drop_reader(admin_url, name)
        log.warning("dropped the PostgreSQL role %s left by a run that ended without dropping it", name)
    return orphans


_MEMBERSHIPS = (
    "SELECT rolname = current_user, rolname, " + ", ".join(PRIVILEGED_ATTRIBUTES) + " FROM pg_roles "
    "WHERE pg_has_role(current_user, oid, 'MEMBER') ORDER BY rolname <> current_user, rolname"
)
_FUNCTIONS = (
    "SELECT DISTINCT proname FROM pg_proc WHERE proname = ANY(%s) AND has_function_privilege(oid, 'EXECUTE') "
    "ORDER BY proname"
)


def reader_problems(url: str, *, memberships_only: bool = False) -> list[str]:
    """What makes the role `url` names unfit to run agent queries in the URL's database (empty: fit):
    membership, by any path, of a superuser or otherwise privileged role or of a predefined pg_*
    role; EXECUTE on file, admin or session functions, SELECT on other sessions' views (those are
    per database: `memberships_only` leaves them out)."""
    with psycopg.connect(url, autocommit=True, connect_timeout=10, options=ADMIN_OPTIONS) as con:
        problems = [_membership_problem(row) for row in con.execute(_MEMBERSHIPS).fetchall()]
        if memberships_only:
            return [problem for problem in problems if problem]
        functions = [row[0] for row in con.execute(_FUNCTIONS, ([*ADMIN_FUNCTIONS, *SESSION_FUNCTIONS],))]
        views = [v for v in SESSION_VIEWS if _can_select(con, v)]
        where = f"in database {con.info.dbname!r}"
    problems = [problem for problem in problems if problem]
    if functions:
        problems.append(f"may run {', '.join(functions)} {where}")
    if views:
        problems.append(f"may read {', '.join(views)} (other sessions' queries) {where}")
    return problems


def _membership_problem(row: tuple[Any, ...]) -> str | None:
    itself, name, *flags = row
    held = zip(PRIVILEGED_ATTRIBUTES, flags, strict=True)
    attributes = [attribute.removeprefix("rol") for attribute, on in held if on]
    if name.startswith("pg_"):
        attributes.append("a predefined role")
    if not attributes:
        return None
    return f"has {', '.join(attributes)}" if itself else f"is a member of {name} ({', '.join(attributes)})"


def _can_select(con: psycopg.Connection[Any], view: str) -> bool:
    row = con.execute("SELECT has_table_privilege(%s, 'SELECT')", (f"pg_catalog.{view}",)).fetchone()
    return row == (True,)


def refuse_unfit_reader(urls: Iterable[str], flag: str, *, memberships_only: bool = False) -> None:
    """PostgresError saying why, when the role is unfit in any of the databases `urls` name."""
    found = (problem for url in urls for problem in reader_problems(url, memberships_only=memberships_only))
    problems = list(dict.fromkeys(found))
    if problems:
        raise PostgresError(
            f"the reader role of {flag} {'; '.join(problems)}: agent queries need a role that only reads "
            "the restored tables and cannot see or signal other sessions (a superuser --postgres-url can "
            "revoke what PUBLIC may run in the restored databases)"
        )


class PostgresServer:
    """A server the user names (`--postgres-url`): dumps are restored as the URL's role (and run
    as an unprivileged owner role), agent queries run as a reader role: one created for this run
    and dropped by `stop()` (a later run reaps it if this one dies first), or the existing role
    `reader_url` names. Either way the agent's URL names only host, port, database, the reader
    and its password (`clean_url`): whatever else the given URLs, a service file or PG*
    environment variables say serves the suite's own connections only."""

    def __init__(
        self, url: str, reader_url: str | None = None, *, connection_limit: int = READER_CONNECTION_LIMIT
    ) -> None:
        self.url_given = url
        self.reader_url = reader_url
        self.connection_limit = connection_limit
        self.reader = _Role(f"{READER_ROLE}_{secrets.token_hex(4)}", secrets.token_urlsafe(24))
        register_secret(self.reader.password)
        register_url_secrets(url)
        register_url_secrets(reader_url)
        self._address: tuple[str, int] | None = None
        self._created = False

    def start(self) -> PostgresServer:
        try:
            self._start()
        except psycopg.OperationalError as error:
            raise PostgresUnavailable(f"cannot connect to the PostgreSQL server of --postgres-url: {error}") from error
        except psycopg.Error as error:
            raise PostgresError(f"preparing the reader role on the --postgres-url server failed: {error}") from error
        return self

    def _start(self) -> None:
        with psycopg.connect(self.url_given, autocommit=True, connect_timeout=10) as con:
            self._address = server_address(con)
            row = con.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user").fetchone()
        if row != (True,):
            raise PostgresError(
                "the role of --postgres-url cannot create roles (it must, to restore as an unprivileged role "
                "and to make the agent's reader): grant it CREATEROLE, or use a superuser"
            )
        if self.reader_url is not None:
            self.reader, dbname = self._named_reader(self.reader_url)
            refuse_unfit_reader([self.url(dbname)], "--postgres-reader-url", memberships_only=True)
            return
        reap_readers(self.url_given)
        create_reader(
            self.url_given, self.reader, READER_COMMENT + owner_tag(), connection_limit=self.connection_limit
        )
        self._created = True
        atexit.register(self.stop)

    def _named_reader(self, reader_url: str) -> tuple[_Role, str]:
        """The role `reader_url` connects as (its query string, service file and environment
        honoured once, here), with the password it used; and the database it names."""
        try:
            with psycopg.connect(reader_url, autocommit=True, connect_timeout=10) as con:
                row = con.execute("SELECT session_user").fetchone()
                password, dbname = con.info.password or "", con.info.dbname
        except psycopg.OperationalError as error:
            raise PostgresError(f"cannot connect with --postgres-reader-url: {error}") from error
        assert row is not None
        return _Role(str(row[0]), password), dbname

    def admin_url(self, dbname: str = "postgres") -> str:
        return _with_dbname(self.url_given, dbname)

    def url(self, dbname: str = "postgres") -> str:
        assert self._address is not None, "start() first"
        return clean_url(self._address, self.reader, dbname)

    def allow_reader(self, dbname: str) -> None:
        grant_reader(self.admin_url(dbname), self.reader.name)

    def check_reader(self, dbnames: Iterable[str]) -> None:
        """Refuse (PostgresError) a reader unfit in any restored database (a grant made there, or a
        PUBLIC privilege the URL's role could not revoke)."""
        flag = "--postgres-reader-url" if self.reader_url is not None else "the run (made from --postgres-url)"
        refuse_unfit_reader([self.url(dbname) for dbname in dbnames], flag)

    def stop(self) -> None:
        if not self._created:
            return
        atexit.unregister(self.stop)
        self._created = False
        try:
            drop_reader(self.url_given, self.reader.name)
        except psycopg.Error as error:  # the next run reaps it
            log.warning("could not drop the reader role %s: %s", self.reader.name, error)


def _server_user() -> pwd.struct_passwd | None:
    """Who runs initdb and the server when we are root (both refuse to run as root): the
    `postgres` account that the Debian package creates, else `nobody`. None when not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresError("running as root, and neither a `postgres` nor a `nobody` account exists to run the server")


def _drop_root_kwargs() -> dict[str, Any]:
    user = _server_user()
    if user is None:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# ---------------------------------------------------------------- restoring a dump

# Ownership and privileges name roles of the server the dump came from, which need not exist
# here; they are skipped as `pg_restore --no-owner --no-privileges` would. So is a comment on an
# extension (old dumps comment on plpgsql, which only its owner, a superuser, may).
_OWNER_OR_PRIVILEGES = re.compile(
    r"(ALTER\s.*\sOWNER\s+TO\s|GRANT\s|REVOKE\s|ALTER\s+DEFAULT\s+PRIVILEGES\s|COMMENT\s+ON\s+EXTENSION\s)",
    re.IGNORECASE | re.DOTALL,
)
_SET = re.compile(r"SET\s+(\w+)\s*(=|TO\s)", re.IGNORECASE)
OWNER_ROLE = "dab_owner"  # + a random suffix: the unprivileged role a dump is restored as
OWNER_COMMENT = "data-agent-compare owner of a restored dump"
COPY_CHUNK_BYTES = 1 << 20
# Admin sessions in a restored database resolve names in pg_catalog only: the dump's owner may
# have set the database's search_path to a schema of its own functions and operators.
ADMIN_OPTIONS = "-c search_path=pg_catalog,pg_temp"


Target = str | PostgresCluster | PostgresServer


def restore_dump(target: Target, dbname: str, sql_file: Path) -> str:
    """Create database `dbname` on `target` (an admin URL, or a running cluster or server) and load
    the plain pg_dump `sql_file` into it; returns the URL to query it with.

    The dump runs no code: it is read by `tools/pg_dump.py` (no psql, so no meta-command; only
    `COPY … FROM stdin`) and executed as a new unprivileged role that owns the database (so no
    server file, program or superuser function either). A database that this function already
    restored from the same dump (same sha256) is kept as is, so a persistent server is restored
    once, not once per run. A refused or failed restore drops the new database and raises
    PostgresError naming the dump file and line; PostgresUnavailable when the server cannot be
    reached."""
    sql_file = Path(sql_file).resolve()
    admin = target if isinstance(target, str) else target.admin_url()
    try:
        con = psycopg.connect(admin, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        raise PostgresUnavailable(f"cannot connect to the PostgreSQL server to restore {sql_file}: {error}") from error
    try:
        with con:
            _restore(con, admin, dbname, sql_file)
        if not isinstance(target, str):
            target.allow_reader(dbname)
    except psycopg.Error as error:
        raise PostgresError(f"restoring {sql_file} into database {dbname!r} failed: {error}") from error
    return _query_url(target, dbname)


def _restore(con: psycopg.Connection[Any], admin: str, dbname: str, sql_file: Path) -> None:
    digest = _sha256(sql_file)
    if _already_restored(con, dbname, digest, sql_file):
        return
    known_settings = {row[0] for row in con.execute("SELECT name FROM pg_settings")}
    owner = _Role(f"{OWNER_ROLE}_{secrets.token_hex(6)}", secrets.token_urlsafe(24))
    _create_owner(con, owner, dbname)
    try:
        started = time.perf_counter()
        _load_dump(clean_url(server_address(con), owner, dbname), sql_file, known_settings)
        con.execute(sql.SQL("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(sql.Identifier(owner.name)))
        _finish(_with_dbname(admin, dbname), digest)
        log.info("restored %s into %s in %.1fs", sql_file, dbname, time.perf_counter() - started)
    except BaseException:
        con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        con.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(owner.name)))
        raise


def _create_owner(con: psycopg.Connection[Any], owner: _Role, dbname: str) -> None:
    """The role the dump runs as: it may log in (until the restore is over) and owns the database,
    and nothing else."""
    name = sql.Identifier(owner.name)
    con.execute(
        sql.SQL(
            "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
        ).format(name, sql.Literal(owner.password))
    )
    con.execute(sql.SQL("COMMENT ON ROLE {} IS {}").format(name, sql.Literal(f"{OWNER_COMMENT} ({dbname})")))
    if con.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() != (True,):
        con.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(name))  # CREATE DATABASE … OWNER needs it
    try:
        con.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(dbname), name))
    except BaseException:
        con.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(name))
        raise


def _load_dump(url: str, sql_file: Path, known_settings: set[str]) -> None:
    """Run the dump's statements, one transaction, as the role `url` names."""
    with psycopg.connect(url, connect_timeout=10) as con:
        try:
            for statement in DumpReader(sql_file):
                if _skipped(statement.body, known_settings):
                    continue
                try:
                    _run_statement(con, statement)
                except psycopg.Error as error:
                    where = f"{sql_file}:{_failed_line(statement, error)}"
                    raise PostgresError(f"restoring {sql_file} failed:\n{where}: ERROR: {_message(error)}") from None
        except DumpRefused as refused:
            raise PostgresError(f"restoring {sql_file} refused: {refused}") from None
        con.commit()


_COPY_CONTEXT = re.compile(r"COPY \S+, line (\d+)")


def _failed_line(statement: Statement, error: psycopg.Error) -> int:
    """The dump's line: the statement's, or for COPY data the failing data line's."""
    copied = _COPY_CONTEXT.search(error.diag.context or "")
    return statement.line + int(copied.group(1)) if copied and statement.copy_data is not None else statement.line


def _message(error: psycopg.Error) -> str:
    return "; ".join(p for p in (error.diag.message_primary or str(error), error.diag.message_hint) if p)


def _run_statement(con: psycopg.Connection[Any], statement: Statement) -> None:
    if statement.copy_data is None:
        con.execute(statement.text.encode())  # bytes: no placeholders, and psycopg leaves it as is
        return
    with con.cursor() as cursor, cursor.copy(statement.body.rstrip().rstrip(";")) as copy:
        chunk: list[bytes] = []
        size = 0
        for line in statement.copy_data:
            chunk.append(line)
            size += len(line)
            if size >= COPY_CHUNK_BYTES:
                copy.write(b"".join(chunk))
                chunk, size = [], 0
        if chunk:
            copy.write(b"".join(chunk))


def _skipped(body: str, known_settings: set[str]) -> bool:
    """Ownership and privileges, and `SET`s of settings this server does not know (e.g.
    `transaction_timeout` in a PostgreSQL 17 dump)."""
    if _OWNER_OR_PRIVILEGES.match(body):
        return True
    setting = _SET.match(body)
    return setting is not None and setting.group(1).lower() not in known_settings


def _already_restored(con: psycopg.Connection[Any], dbname: str, digest: str, sql_file: Path) -> bool:
    row = con.execute(
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s", (dbname,)
    ).fetchone()
    if row is None:
        return False
    if row[0] == MARKER + digest:
        return True
    raise PostgresError(
        f"database {dbname!r} already exists on the server and was not restored from {sql_file}; "
        "drop it or name another server"
    )


def _finish(url: str, digest: str) -> None:
    # ANALYZE: a fresh restore has no planner statistics until autovacuum gets to it. It runs
    # each table's index expressions as the table's owner (the unprivileged restore role).
    with psycopg.connect(url, autocommit=True, options=ADMIN_OPTIONS) as con:
        con.execute("ANALYZE")
        con.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(con.info.dbname), sql.Literal(MARKER + digest)
            )
        )


def _with_dbname(url: str, dbname: str) -> str:
    return make_conninfo(url, dbname=dbname)


def _query_url(target: Target, dbname: str) -> str:
    if isinstance(target, str):
        return _url_with_dbname(target, dbname)
    return target.url(dbname)


def _url_with_dbname(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname`, still a postgresql:// URL (the tools expect one)."""
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")


def server_address(con: psycopg.Connection[Any]) -> tuple[str, int]:
    """Where `con` is connected (host or socket folder, and port), whatever URL, service file or
    environment variable said so."""
    return con.info.host, con.info.port


def clean_url(address: tuple[str, int], role: _Role, dbname: str) -> str:
    """A URL naming only `address`, `role` (user and password) and `dbname`: no query string, so no
    `?user=` or `?options=` of another URL can change who connects or how."""
    host, port = address
    shown_host = quote(host, safe="") if host.startswith("/") else (f"[{host}]" if ":" in host else host)
    user = f"{quote(role.name, safe='')}:{quote(role.password, safe='')}@"
    return f"postgresql://{user}{shown_host}:{port}/{quote(dbname, safe='')}"


MASK = "***"
_PASSWORD_KEYS = {"password", "passfile", "sslpassword"}


def url_without_password(url: str) -> str:
    """`url` (a postgresql:// URL or a key=value conninfo) with every password replaced by MASK,
    parsed rather than pattern-matched, so that no character of a password (a quote, an `@`)
    leaves a part of it behind. What cannot be parsed is replaced whole."""
    if "://" not in url:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError:
            return MASK
        return make_conninfo(**{k: MASK if k in _PASSWORD_KEYS else v for k, v in params.items()})
    scheme, _, rest = url.partition("://")
    authority, slash, path_and_query = rest.partition("/")
    userinfo, at, hosts = authority.rpartition("@")
    if ":" in userinfo:
        userinfo = userinfo.partition(":")[0] + ":" + MASK
    path, question, query = path_and_query.partition("?")
    if question:
        pairs = [pair.partition("=") for pair in query.split("&")]
        query = "&".join(f"{k}={MASK}" if unquote(k) in _PASSWORD_KEYS else k + eq + v for k, eq, v in pairs)
    return f"{scheme}://{userinfo}{at}{hosts}{slash}{path}{question}{query}"


def password_masked(url: str | None) -> bool:
    """Whether `url` carries a password the manifest masked (a resumed run's recorded URL)."""
    try:
        return bool(url) and MASK in str(conninfo_to_dict(url or "").get("password", ""))
    except psycopg.ProgrammingError:
        return False


def register_url_secrets(url: str | None) -> None:
    """Mask the passwords `url` carries in everything the run log writes from now on."""
    if not url:
        return
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return
    for key in _PASSWORD_KEYS & params.keys():
        register_secret(str(params[key]))
        register_secret(quote(str(params[key]), safe=""))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- tasks


def prepare_postgres(
    tasks: list[Task],
    *,
    url: str | None = None,
    cluster: PostgresCluster | None = None,
    reader_url: str | None = None,
    connection_limit: int = READER_CONNECTION_LIMIT,
    backend_memory_mb: int = BACKEND_MEMORY_MB,
) -> tuple[list[Task], PostgresCluster | PostgresServer | None]:
    """Restore every pg_dump the tasks' postgres data sources name, once per (dump, database
    name), and return copies of the tasks whose locations are `postgresql://` URLs of a reader.

    Restores go to the server `url` (as a `PostgresServer`, with `reader_url` if given), else
    into `cluster`, else into a cluster started here; what was started is returned (the caller
    stops it: that also drops the run's reader role); None otherwise, also when no task needs
    one. Tasks already unavailable are left alone; a dump that fails to restore makes its tasks
    unavailable with the reason. The reader is checked in every restored database afterwards
    (`reader_problems`). `connection_limit`: the reader's sessions at once; `backend_memory_mb`:
    each server process's address space, in a cluster started here. Raises PostgresUnavailable
    when there is nowhere to restore, PostgresError when the reader role cannot be made safe."""
    wanted = [(task, source) for task in tasks if not task.unavailable for source in task.data if _is_dump(source)]
    if not wanted:
        return list(tasks), None
    started: PostgresCluster | PostgresServer | None = None
    if url is not None:
        started = PostgresServer(url, reader_url, connection_limit=connection_limit).start()
    elif cluster is None:
        started = PostgresCluster(connection_limit=connection_limit, backend_memory_mb=backend_memory_mb).start()
    target = cluster if started is None else started
    assert target is not None
    try:
        restored = _restore_all(target, [_key(task, source) for task, source in wanted])
        target.check_reader(_restored_databases(restored))
    except BaseException:
        if started:
            started.stop()
        raise
    return [_rewrite(task, restored) for task in tasks], started


def _restored_databases(restored: dict[_Key, str | PostgresError]) -> list[str]:
    urls = [url for url in restored.values() if isinstance(url, str)]
    return sorted({unquote(urlsplit(url).path.lstrip("/")) for url in urls})


def _is_dump(source: DataSource) -> bool:
    return source.kind == DataSourceKind.POSTGRES and (source.location or "").endswith(".sql")


def _database_name(task: Task, source: DataSource) -> str:
    """db_config's db_name of the source (DAB), else the dump file's name."""
    clients = task.metadata.get("db_config", {}).get("db_clients", {})
    client = clients.get(source.name) if isinstance(clients, dict) else None
    name = client.get("db_name") if isinstance(client, dict) else None
    return str(name) if name else Path(source.location or "").stem


_Key = tuple[str, Path]  # (database name, dump file)


def _key(task: Task, source: DataSource) -> _Key:
    return _database_name(task, source), Path(source.location or "")


def _restore_all(target: Target, wanted: list[_Key]) -> dict[_Key, str | PostgresError]:
    """Each distinct (name, dump) restored once: its URL, or the error. Two different dumps
    asking for one database name get distinct names."""
    results: dict[_Key, str | PostgresError] = {}
    dumps_by_name: dict[str, Path] = {}
    for name, dump in wanted:
        if (name, dump) in results:
            continue
        server_name, number = name, 1
        while dumps_by_name.get(server_name, dump) != dump:
            number += 1
            server_name = f"{name}_{number}"
        dumps_by_name[server_name] = dump
        try:
            results[name, dump] = restore_dump(target, server_name, dump)
        except PostgresUnavailable:
            raise  # nothing else can be restored either
        except PostgresError as error:
            log.warning("%s", error)
            results[name, dump] = error
    return results


def _rewrite(task: Task, restored: dict[_Key, str | PostgresError]) -> Task:
    if task.unavailable:
        return task
    data, problems = [], []
    for source in task.data:
        result = restored.get(_key(task, source)) if _is_dump(source) else None
        if isinstance(result, str):
            source = source.model_copy(update={"location": result})
        elif result is not None:
            problems.append(f"{source.name}: {result}")
        data.append(source)
    return task.model_copy(update={"data": data, "unavailable": "; ".join(problems) or None})
