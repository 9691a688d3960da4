"""A PostgreSQL server the user names (`--postgres-url`): a reader role made for the run and
dropped after it, or an existing reader the run names."""

from __future__ import annotations

import atexit
import logging
import secrets
from collections.abc import Iterable

import psycopg

from ...core.runlog import register_secret
from .errors import PostgresError, PostgresUnavailable
from .owners import owner_tag
from .roles import (
    READER_COMMENT,
    READER_CONNECTION_LIMIT,
    READER_ROLE,
    create_reader,
    drop_reader,
    grant_reader,
    reap_readers,
    refuse_unfit_reader,
)
from .urls import Role, clean_url, register_url_secrets, server_address, with_dbname

log = logging.getLogger(__name__)


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
        self.reader = Role(f"{READER_ROLE}_{secrets.token_hex(4)}", secrets.token_urlsafe(24))
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
        create_reader(self.url_given, self.reader, READER_COMMENT + owner_tag(), connection_limit=self.connection_limit)
        self._created = True
        atexit.register(self.stop)

    def _named_reader(self, reader_url: str) -> tuple[Role, str]:
        """The role `reader_url` connects as (its query string, service file and environment
        honoured once, here), with the password it used; and the database it names."""
        try:
            with psycopg.connect(reader_url, autocommit=True, connect_timeout=10) as con:
                row = con.execute("SELECT session_user").fetchone()
                password, dbname = con.info.password or "", con.info.dbname
        except psycopg.OperationalError as error:
            raise PostgresError(f"cannot connect with --postgres-reader-url: {error}") from error
        assert row is not None
        return Role(str(row[0]), password), dbname

    def admin_url(self, dbname: str = "postgres") -> str:
        return with_dbname(self.url_given, dbname)

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
