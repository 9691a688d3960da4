"""A plain pg_dump restored into a new database, as a fresh unprivileged role that owns it; the
dump runs no code (tools/postgres/pg_dump.py reads it)."""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from .cluster import PostgresCluster
from .errors import PostgresError, PostgresUnavailable
from .pg_dump import DumpReader, DumpRefused, Statement
from .roles import ADMIN_OPTIONS
from .server import PostgresServer
from .urls import Role, clean_url, server_address, with_dbname

log = logging.getLogger(__name__)

MARKER = "restored by data-agent-compare from a pg_dump with sha256 "  # COMMENT ON DATABASE

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


Target = str | PostgresCluster | PostgresServer


def restore_dump(target: Target, dbname: str, sql_file: Path) -> str:
    """Create database `dbname` on `target` (an admin URL, or a running cluster or server) and load
    the plain pg_dump `sql_file` into it; returns the URL to query it with.

    The dump runs no code: it is read by `pg_dump.py` (no psql, so no meta-command; only
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
    owner = Role(f"{OWNER_ROLE}_{secrets.token_hex(6)}", secrets.token_urlsafe(24))
    _create_owner(con, owner, dbname)
    try:
        started = time.perf_counter()
        _load_dump(clean_url(server_address(con), owner, dbname), sql_file, known_settings)
        con.execute(sql.SQL("ALTER ROLE {} NOLOGIN PASSWORD NULL").format(sql.Identifier(owner.name)))
        _finish(with_dbname(admin, dbname), digest)
        log.info("restored %s into %s in %.1fs", sql_file, dbname, time.perf_counter() - started)
    except BaseException:
        con.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        con.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(owner.name)))
        raise


def _create_owner(con: psycopg.Connection[Any], owner: Role, dbname: str) -> None:
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


def _query_url(target: Target, dbname: str) -> str:
    if isinstance(target, str):
        return with_dbname(target, dbname)
    return target.url(dbname)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
