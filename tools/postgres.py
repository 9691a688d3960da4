"""PostgreSQL for DAB tasks: a throw-away cluster on loopback, and pg_dump restores into it.

DAB ships its PostgreSQL databases as plain pg_dump files. `prepare_postgres` restores each
dump once per run, into the server the user names (`--postgres-url`) or into a
`PostgresCluster` started for the run, and rewrites the tasks' data sources to
`postgresql://` URLs that `tools/sql.py`'s `PostgresDatabase` opens read-only.

The throw-away cluster listens on 127.0.0.1 only, on a free port, with its data and unix
socket in a private temporary folder. Two roles with generated passwords: an admin (the
superuser, used only to restore) and a reader (`pg_read_all_data`, read-only by default,
no CREATE anywhere) whose URL goes into the tasks. Passwords rather than trust auth,
because an agent's Python tool runs on the same machine and could otherwise connect to
the loopback port as the superuser.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import hashlib
import logging
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..compare.task import DataSource, DataSourceKind, Task

log = logging.getLogger(__name__)

VERSION_DIRS = "/usr/lib/postgresql/*/bin"  # Debian/Ubuntu layout, one folder per major version
CLUSTER_PROGRAMS = ("initdb", "pg_ctl", "psql")
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
    shuts it down and deletes its folder. Also stopped at interpreter exit."""

    def __init__(self, bin_dir: Path | None = None) -> None:
        self.bin_dir = bin_dir or find_bin_dir()
        self.port = 0
        self.admin = _Role(ADMIN_ROLE, secrets.token_urlsafe(24))
        self.reader = _Role(READER_ROLE, secrets.token_urlsafe(24))
        self._dir: Path | None = None

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
        self._dir = Path(tempfile.mkdtemp(prefix="dab-pg-"))
        try:
            self._init()
            self._start_server()
            self._create_reader()
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
        if (self._dir / "data" / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", "data", "-m", "fast", "-w", "stop", check=False)
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None

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
            result = self._run(
                "pg_ctl", "-D", "data", "-l", "server.log", "-w", "-o", f"-p {self.port}", "start", check=False
            )
            if result.returncode == 0:
                return
            server_log = (self._dir / "server.log").read_text(errors="replace")
            if "Address already in use" not in server_log or attempt == START_ATTEMPTS:
                raise PostgresError(f"pg_ctl start failed:\n{_tail(result.stdout + server_log)}")

    def _create_reader(self) -> None:
        # pg_read_all_data (PostgreSQL >= 14) reads every table, present and future; the role
        # has no other privilege, so a write or pg_read_file fails even outside our tools.
        statements = [
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {} IN ROLE pg_read_all_data").format(
                sql.Identifier(self.reader.name), sql.Literal(self.reader.password)
            ),
            sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(sql.Identifier(self.reader.name)),
        ]
        with psycopg.connect(self.admin_url(), autocommit=True) as con:
            for statement in statements:
                con.execute(statement)

    def allow_reader(self, dbname: str) -> None:
        """Let the reader connect to `dbname`, and nobody else create (temporary) objects there.
        (PostgreSQL >= 15 already gives PUBLIC no CREATE on schema public.)"""
        database = sql.Identifier(dbname)
        with psycopg.connect(self.admin_url(), autocommit=True) as con:
            con.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(database))
            con.execute(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, sql.Identifier(self.reader.name))
            )

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

_COPY_FROM_STDIN = re.compile(rb"COPY .* FROM stdin;\s*$")
_END_OF_COPY = re.compile(rb"\\\.\s*$")
# Ownership and privileges name roles of the server the dump came from, which need not exist
# here; they are dropped as `pg_restore --no-owner --no-privileges` would.
_OWNER_OR_PRIVILEGES = re.compile(rb"(ALTER .* OWNER TO |GRANT |REVOKE |ALTER DEFAULT PRIVILEGES ).*;\s*$")
_SET = re.compile(rb"SET (\w+) = .*;\s*$")


def restore_dump(target: str | PostgresCluster, dbname: str, sql_file: Path) -> str:
    """Create database `dbname` on `target` (a server URL or a running cluster) and load the
    plain pg_dump `sql_file` into it with psql; returns the URL to query it with.

    A database that this function already restored from the same dump (same sha256) is kept
    as is, so a persistent server is restored once, not once per run. A failed restore drops
    the new database and raises PostgresError naming the dump file and psql's error line;
    PostgresUnavailable when there is no psql or the server cannot be reached."""
    sql_file = Path(sql_file).resolve()
    psql = _psql_program(target)
    admin = target.admin_url() if isinstance(target, PostgresCluster) else target
    try:
        con = psycopg.connect(admin, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as error:
        raise PostgresUnavailable(f"cannot connect to the PostgreSQL server to restore {sql_file}: {error}") from error
    try:
        with con:
            _restore(con, psql, admin, dbname, sql_file)
        if isinstance(target, PostgresCluster):
            target.allow_reader(dbname)
    except psycopg.Error as error:
        raise PostgresError(f"restoring {sql_file} into database {dbname!r} failed: {error}") from error
    return _query_url(target, dbname)


def _restore(con: psycopg.Connection[Any], psql: Path, admin: str, dbname: str, sql_file: Path) -> None:
    digest = _sha256(sql_file)
    if _already_restored(con, dbname, digest, sql_file):
        return
    known_settings = {row[0] for row in con.execute("SELECT name FROM pg_settings")}
    con.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
    try:
        started = time.perf_counter()
        _run_psql(psql, _with_dbname(admin, dbname), sql_file, known_settings)
        _finish(_with_dbname(admin, dbname), digest)
        log.info("restored %s into %s in %.1fs", sql_file, dbname, time.perf_counter() - started)
    except BaseException:
        con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        raise


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
    # ANALYZE: a fresh restore has no planner statistics until autovacuum gets to it.
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("ANALYZE")
        con.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(con.info.dbname), sql.Literal(MARKER + digest)
            )
        )


def _run_psql(psql: Path, url: str, sql_file: Path, known_settings: set[str]) -> None:
    params = conninfo_to_dict(url)
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    password = params.pop("password", None)
    if password is not None:  # in the environment, not on a command line others can read
        env["PGPASSWORD"] = str(password)
    args = [str(psql), "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", "-d", make_conninfo(**params)]
    with tempfile.TemporaryFile() as errors:
        # The dump goes through stdin ("-f -") so that lines can be filtered on the way.
        process = subprocess.Popen(
            [*args, "-f", "-"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors, env=env
        )
        assert process.stdin is not None
        try:
            with sql_file.open("rb") as dump:
                process.stdin.writelines(filter_dump(dump, known_settings))
            process.stdin.close()
        except BrokenPipeError:
            pass  # psql stopped at an error; its message says where
        code = process.wait()
        errors.seek(0)
        message = errors.read().decode(errors="replace")
    if code != 0:
        where = message.replace("psql:<stdin>:", f"{sql_file}:").strip() or f"psql exited with code {code}"
        raise PostgresError(f"restoring {sql_file} failed:\n{_tail(where)}")


def filter_dump(lines: Iterable[bytes], known_settings: set[str]) -> Iterator[bytes]:
    """The dump's lines, with ownership, privileges and `SET`s of settings this server does not
    know (e.g. `transaction_timeout` in a PostgreSQL 17 dump) blanked out; blank rather than
    dropped, so psql's line numbers are the dump file's. COPY data passes untouched."""
    in_copy = False
    for line in lines:
        if in_copy:
            in_copy = not _END_OF_COPY.match(line)
        elif _COPY_FROM_STDIN.match(line):
            in_copy = True
        elif _OWNER_OR_PRIVILEGES.match(line) or _unknown_setting(line, known_settings):
            line = b"\n"
        yield line


def _unknown_setting(line: bytes, known_settings: set[str]) -> bool:
    match = _SET.match(line)
    return match is not None and match.group(1).decode().lower() not in known_settings


def _psql_program(target: str | PostgresCluster) -> Path:
    folder = target.bin_dir if isinstance(target, PostgresCluster) else find_bin_dir(("psql",))
    return folder / "psql"


def _with_dbname(url: str, dbname: str) -> str:
    return make_conninfo(url, dbname=dbname)


def _query_url(target: str | PostgresCluster, dbname: str) -> str:
    if isinstance(target, PostgresCluster):
        return target.url(dbname)
    return _url_with_dbname(target, dbname)


def _url_with_dbname(url: str, dbname: str) -> str:
    """`url` pointing at database `dbname`, still a postgresql:// URL (the tools expect one)."""
    base, _, query = url.partition("?")
    scheme, _, rest = base.partition("://")
    authority = rest.split("/", 1)[0]
    return f"{scheme}://{authority}/{quote(dbname, safe='')}" + (f"?{query}" if query else "")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---------------------------------------------------------------- tasks


def prepare_postgres(
    tasks: list[Task], *, url: str | None = None, cluster: PostgresCluster | None = None
) -> tuple[list[Task], PostgresCluster | None]:
    """Restore every pg_dump the tasks' postgres data sources name, once per (dump, database
    name), and return copies of the tasks whose locations are `postgresql://` URLs.

    Restores go to the server `url`, else into `cluster`, else into a cluster started here,
    which is returned (the caller stops it); None otherwise, also when no task needs one.
    Tasks already unavailable are left alone; a dump that fails to restore makes its tasks
    unavailable with the reason. Raises PostgresUnavailable when there is nowhere to restore."""
    wanted = [(task, source) for task in tasks if not task.unavailable for source in task.data if _is_dump(source)]
    if not wanted:
        return list(tasks), None
    started = PostgresCluster().start() if url is None and cluster is None else None
    target = url if url is not None else cluster or started
    assert target is not None
    try:
        restored = _restore_all(target, [_key(task, source) for task, source in wanted])
    except BaseException:
        if started:
            started.stop()
        raise
    return [_rewrite(task, restored) for task in tasks], started


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


def _restore_all(target: str | PostgresCluster, wanted: list[_Key]) -> dict[_Key, str | PostgresError]:
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
