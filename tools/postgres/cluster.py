"""A throw-away PostgreSQL cluster on 127.0.0.1, run under a supervisor that stops it and deletes
its folder when the runner asks or is gone; and the reaping of clusters whose run died."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from ...core.runlog import register_secret
from .binaries import find_bin_dir
from .errors import PostgresError
from .owners import owner_alive, owner_tag
from .roles import READER_CONNECTION_LIMIT, READER_ROLE, create_reader, grant_reader, lock_down, refuse_unfit_reader
from .urls import Role

log = logging.getLogger(__name__)

ADMIN_ROLE = "dab_admin"
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


class PostgresCluster:
    """A throw-away PostgreSQL cluster on 127.0.0.1; `stop()` (or leaving the `with` block)
    shuts it down and deletes its folder. Also stopped at interpreter exit, and by its
    supervisor (SUPERVISOR) when this process dies."""

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
        self.admin = Role(ADMIN_ROLE, secrets.token_urlsafe(24))
        self.reader = Role(READER_ROLE, secrets.token_urlsafe(24))
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

    def _url(self, role: Role, dbname: str) -> str:
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
