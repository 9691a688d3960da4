"""Statement checks shared by the backends: one read statement as sqlglot parses it, the leading
keyword of a refused one, and identifiers quoted as an agent must write them.

sqlglot is one layer of several (each backend has its own authoritative guard); it is the one
that sees a write hidden inside a read (Postgres' `WITH x AS (DELETE ...)`)."""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect

from ...core.tool import ToolError

READ_ONLY_HINT = "the database is read-only; only single SELECT/WITH queries are allowed"

_SAFE_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# DuckDB's reserved words are a superset of what SQLite needs quoting for; quoting a
# non-reserved word is harmless in every dialect we serve.
_RESERVED = Dialect.get_or_raise("duckdb").generator_class.RESERVED_KEYWORDS


def quote_identifier(name: str) -> str:
    """The identifier as an agent must write it, e.g. `"Sales Orders"`."""
    if _SAFE_IDENTIFIER.fullmatch(name) and name.lower() not in _RESERVED:
        return name
    return '"' + name.replace('"', '""') + '"'


_READ_NODES = (exp.Select, exp.SetOperation, exp.Subquery, exp.Values, exp.Describe, exp.Show, exp.Summarize, exp.Pivot)
_WRITE_NODES = (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Create, exp.Drop, exp.Alter, exp.Copy)
_READ_COMMANDS = {"DESCRIBE", "SHOW", "SUMMARIZE"}  # forms sqlglot only knows as opaque commands
EXPLAIN_PREFIX = re.compile(r"\s*EXPLAIN(\s+ANALY[SZ]E)?\s+", re.IGNORECASE)


def leading_keyword(sql: str) -> str:
    match = re.search(r"[A-Za-z]+", re.sub(r"--[^\n]*|/\*.*?\*/", " ", sql, flags=re.S))
    return match.group(0).upper() if match else "empty"


def check_read_statement(sql: str, dialect: str) -> None:
    """Refuse anything but one read statement, as sqlglot parses it.

    A ParseError passes: sqlglot does not know every dialect's syntax, and each backend
    has its own authoritative guard (DuckDB's parser, SQLite's authorizer).
    """
    explain = EXPLAIN_PREFIX.match(sql)
    if explain:  # sqlglot has no EXPLAIN; check the statement explained
        sql = sql[explain.end() :]
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except sqlglot.errors.SqlglotError:
        return
    if len(statements) > 1:
        raise ToolError(f"refused: {len(statements)} statements in one call; send one query per call")
    if not statements:
        raise ToolError("empty query")
    statement = statements[0]
    if isinstance(statement, exp.Command):
        allowed = str(statement.this).upper() in _READ_COMMANDS
    else:
        allowed = isinstance(statement, _READ_NODES)
    # A read at the top can still hide a write, e.g. Postgres' `WITH x AS (DELETE ...)`.
    if not allowed or statement.find(*_WRITE_NODES):
        raise ToolError(f"refused {leading_keyword(sql)}: {READ_ONLY_HINT}")
