"""The errors of the PostgreSQL tools: the message says what failed and where."""

from __future__ import annotations


class PostgresError(RuntimeError):
    """The cluster or a restore failed; the message says what and where."""


class PostgresUnavailable(PostgresError):
    """No PostgreSQL binaries here and no server URL given."""
