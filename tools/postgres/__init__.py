"""PostgreSQL for DAB tasks: a throw-away cluster on loopback, and pg_dump restores into it.

DAB ships its PostgreSQL databases as plain pg_dump files. `prepare_postgres` restores each
dump once per run, into the server the user names (`--postgres-url`) or into a
`PostgresCluster` started for the run, and rewrites the tasks' data sources to
`postgresql://` URLs that `tools/sql/postgres.py`'s `PostgresDatabase` opens read-only.

The throw-away cluster listens on 127.0.0.1 only, on a free port, with its data and unix
socket in a private temporary folder; every server process runs under RLIMIT_AS
(`backend_memory_mb`), so one query cannot take more than that. Two roles with generated
passwords: an admin (the superuser, used only to restore) and a reader whose URL goes into the
tasks. Passwords rather than trust auth, because an agent's Python tool runs on the same machine
and could otherwise connect to the loopback port as the superuser.

A dump runs no code (`restore_dump`): it is never given to psql (pg_dump.py reads it and
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

One module per concept: binaries.py (where the server programs are), cluster.py (the throw-away
cluster and its supervisor), owners.py (who owns a cluster or a reader), roles.py (the reader
role and its lock-down), server.py (a server the user names), pg_dump.py (reading a dump),
restore.py (restoring one), urls.py (URLs, credentials, masked passwords), prepare.py (the
tasks' dumps restored for a run). The names other packages use are imported here.
"""

from .binaries import find_bin_dir
from .cluster import BACKEND_MEMORY_MB, PostgresCluster, reap_orphaned_clusters
from .errors import PostgresError, PostgresUnavailable
from .prepare import prepare_postgres
from .restore import restore_dump
from .roles import READER_CONNECTION_LIMIT, lock_down, reader_problems
from .server import PostgresServer
from .urls import password_masked, register_url_secrets, url_without_password

__all__ = [
    "BACKEND_MEMORY_MB",
    "READER_CONNECTION_LIMIT",
    "PostgresCluster",
    "PostgresError",
    "PostgresServer",
    "PostgresUnavailable",
    "find_bin_dir",
    "lock_down",
    "password_masked",
    "prepare_postgres",
    "reader_problems",
    "reap_orphaned_clusters",
    "register_url_secrets",
    "restore_dump",
    "url_without_password",
]
