"""The reader role locked down: it may only SELECT the restored databases' user tables, and
cannot signal or watch other sessions; `reader_problems` checks a role is fit, by any path of
membership."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

import psycopg
from psycopg import sql

from .errors import PostgresError
from .owners import owner_alive
from .urls import Role, with_dbname

log = logging.getLogger(__name__)

# What the reader's queries may cost the server (per session; a tool's connection sets its own
# statement_timeout from ToolSettings). temp_file_limit can only be set by a superuser.
READER_ROLE = "dab_reader"  # + a random suffix for a per-run reader on a server the user names
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
# Admin sessions in a restored database resolve names in pg_catalog only: the dump's owner may
# have set the database's search_path to a schema of its own functions and operators.
ADMIN_OPTIONS = "-c search_path=pg_catalog,pg_temp"


def create_reader(
    admin_url: str, role: Role, comment: str | None = None, *, connection_limit: int = READER_CONNECTION_LIMIT
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
        url = with_dbname(admin_url, dbname)
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
