"""Read-only SQL over a task's databases: `get_schema_info` and `execute_sql`.

Each logical database is a `Database` backend (SQLite, DuckDB, PostgreSQL). Writes are
refused in layers, because one layer can have gaps:

- SQLite: a `mode=ro` URI, `PRAGMA query_only=ON`, and an authorizer that allows
  only reads, selects, functions, recursive CTEs and a few read-only PRAGMAs.
- DuckDB: `read_only=True` with external access, extension loading and
  configuration changes disabled, plus a statement-type check by DuckDB's own
  parser and by sqlglot (DuckDB's read-only mode still allows TEMP tables, SET,
  INSTALL...).
- PostgreSQL (a server URL; tools/postgres/ restores DAB's dumps into one): the session
  defaults to read-only transactions, every query runs in `BEGIN READ ONLY` and is rolled
  back (so not even a `set_config` outlives it), the statement must be a prepared single
  SELECT/WITH/VALUES/TABLE/EXPLAIN/SHOW that sqlglot also reads as one read, and
  `statement_timeout` bounds it. The throw-away cluster adds a reader role without write
  privileges.

Every query has a row cap, a byte cap on the rendered text and a timeout; its text is capped at
SQL_TEXT_MAX_CHARS before any parser sees it.

An agent's SQLite and DuckDB queries run in a worker process (`WorkerDatabase`, tools/worker_process.py)
under a memory rlimit, killed when a call outlives its timeout (one SQLite function call can run for
minutes without reaching the progress handler) or the unit's wall time. Within it, what one query may
allocate is bounded too: SQLite's values are capped at VALUE_MAX_BYTES
(`Connection.setlimit`), its heap at SQLITE_HEAP_LIMIT (process-wide), and functions that expose
pointers or load code (`fts3_tokenizer`, `load_extension`...) are denied by the authorizer;
DuckDB runs with a `memory_limit` and few threads, and the scalar functions that build one huge
value outside that limit (`repeat`, `lpad`, `range`...) are refused. PostgreSQL's reader role
bounds the server (tools/postgres/); a query's result that comes over exceeds no
RESULT_MAX_BYTES there either: the server checks the running size and fails the query. Every
backend stops fetching at RESULT_MAX_BYTES, with an error that says so.

One module per concept: statements.py (the sqlglot check, shared), database.py (the interface and
its bounds), one module per backend (sqlite_database.py, duckdb_database.py, postgres_database.py),
databases.py (a task's databases, in worker processes), render.py (results as text) and tools.py
(`execute_sql`, `get_schema_info`).
"""

from .database import RESULT_MAX_BYTES, SQL_TEXT_MAX_CHARS, Database, QueryResult, TableInfo
from .databases import BACKENDS, CRASHED, WORKER_KINDS, Databases, WorkerDatabase
from .duckdb_database import DuckDbDatabase
from .postgres_database import PostgresDatabase
from .render import jsonable, render_table
from .sqlite_database import SqliteDatabase
from .statements import check_read_statement, quote_identifier
from .tools import SchemaTool, SqlTool

__all__ = [
    "BACKENDS",
    "CRASHED",
    "RESULT_MAX_BYTES",
    "SQL_TEXT_MAX_CHARS",
    "WORKER_KINDS",
    "Database",
    "Databases",
    "DuckDbDatabase",
    "PostgresDatabase",
    "QueryResult",
    "SchemaTool",
    "SqlTool",
    "SqliteDatabase",
    "TableInfo",
    "WorkerDatabase",
    "check_read_statement",
    "jsonable",
    "quote_identifier",
    "render_table",
]
