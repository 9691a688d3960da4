"""Every model call's request, as sent, kept in the run directory: `conversations.sqlite`.

    ConversationWriter(run_dir)   stores each finished call's request (thread-safe; one per process)
    read_requests(run_dir, ...)    a unit's stored requests, in the order of their trace steps

A request is stored after the gateway's enforcement (the messages, the tools offered, the settings sent) and
before its call's line in calls.jsonl, so a finished call in the journal always has its request: a crash loses
at most the calls in flight. Content-addressed: each message, each tool list and each settings block is one
compressed blob stored once per run, so a conversation's shared prefix and a tool list offered on every call
cost their size once; a call is a row naming its blobs. Secrets are masked before anything is hashed or
written (`core/redaction.py`), as in every other file of the run. SQLite in WAL mode takes the writes of
several worker processes at once; a commit per call reaches the operating system (no fsync: the journal's rule).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .model import ModelRequest
from .redaction import redact_credentials

CONVERSATIONS_FILE = "conversations.sqlite"
STORE_FORMAT = 1
_DIGEST_BYTES = 16  # blake2b-128: collisions are out of reach for the blobs of any run
_REMEMBERED = 8192  # blobs a writer remembers having stored (a bounded memo, not the run's history)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS store (format INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS blobs (digest BLOB PRIMARY KEY, body BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS calls (
    attempt TEXT NOT NULL, task_id TEXT NOT NULL, system TEXT NOT NULL, model TEXT NOT NULL,
    epoch INTEGER NOT NULL, role TEXT NOT NULL, step INTEGER NOT NULL, request_key TEXT,
    messages BLOB NOT NULL, tools BLOB, settings BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS calls_by_unit ON calls (task_id, system, model, epoch, attempt, role, step);
"""


class StoredRequest(BaseModel):
    """One model call's request as it was sent: its messages, the tools offered and the other settings."""

    role: str  # "system" or "judge"
    step: int  # the index of its model-call step in the unit's trace
    request_key: str | None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None  # None: not recorded (an imported conversation)
    settings: dict[str, Any]  # every other field of the request (sampling settings, tool choice, options)


class RequestParts(BaseModel):
    """A request split for the store: each message, the tool list and the settings as JSON text."""

    messages: list[str]
    tools: str | None  # None: not recorded (an imported conversation); "[]": none offered
    settings: str


def request_parts(request: ModelRequest) -> RequestParts:
    """`request` as the JSON texts the store keeps: a message's unset fields and the settings left at their
    defaults left out. One serialization of the whole request, split here: this runs on every model call."""
    dumped = request.model_dump(mode="json")
    messages = [
        _json({name: value for name, value in message.items() if value is not None})
        for message in dumped.pop("messages")
    ]
    tools = _json(dumped.pop("tools"))
    fields = ModelRequest.model_fields
    settings = {
        name: value
        for name, value in dumped.items()
        if value is not None and value != fields[name].get_default(call_default_factory=True)
    }
    return RequestParts(messages=messages, tools=tools, settings=_json(settings))


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class CallRequest(BaseModel):
    """What a unit hands the store for one finished call: whose it is and its request's parts."""

    task_id: str
    system: str
    model: str
    epoch: int
    attempt: str
    role: str
    step: int
    request_key: str | None
    parts: RequestParts


class ConversationWriter:
    """Stores requests into `run_dir`'s conversations.sqlite; the file is opened at the first request."""

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / CONVERSATIONS_FILE
        self._connection: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._stored: OrderedDict[bytes, bytes] = OrderedDict()  # sha of a raw text → digest of its masked blob

    def put(self, call: CallRequest) -> None:
        """Store one call's request."""
        parts = call.parts
        with self._lock:
            connection = self._connection or self._open()
            new: dict[bytes, bytes] = {}  # remembered once committed: a rolled-back blob is not stored
            with connection:  # one transaction: the call's blobs and its row together
                messages = b"".join(self._blob(connection, text, new) for text in parts.messages)
                tools = self._blob(connection, parts.tools, new) if parts.tools is not None else None
                settings = self._blob(connection, parts.settings, new)
                unit = (call.attempt, call.task_id, call.system, call.model, call.epoch, call.role, call.step)
                row = (*unit, call.request_key, messages, tools, settings)
                connection.execute("INSERT INTO calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            self._stored.update(new)
            while len(self._stored) > _REMEMBERED:
                self._stored.popitem(last=False)

    def _open(self) -> sqlite3.Connection:
        # Two writers opening a new store at once: switching it to WAL does not wait on the busy handler
        # ("database is locked" at once), so the first open is tried again for a while.
        deadline = time.monotonic() + 60.0
        while True:
            try:
                return self._open_once()
            except sqlite3.OperationalError as locked:
                if "locked" not in str(locked) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _open_once(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False, isolation_level=None)
        try:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            with connection:
                connection.executescript(_SCHEMA)
                if connection.execute("SELECT count(*) FROM store").fetchone()[0] == 0:
                    connection.execute("INSERT INTO store VALUES (?)", (STORE_FORMAT,))
        except sqlite3.Error:
            connection.close()
            raise
        self._connection = connection
        return connection

    def _blob(self, connection: sqlite3.Connection, text: str, new: dict[bytes, bytes]) -> bytes:
        """The digest of `text`'s masked blob, stored unless this writer stored it lately."""
        raw = hashlib.blake2b(text.encode("utf-8"), digest_size=_DIGEST_BYTES).digest()
        known = self._stored.get(raw) or new.get(raw)
        if known is not None:
            if raw in self._stored:
                self._stored.move_to_end(raw)
            return known
        masked = redact_credentials(text).encode("utf-8")
        digest = hashlib.blake2b(masked, digest_size=_DIGEST_BYTES).digest()
        connection.execute("INSERT OR IGNORE INTO blobs VALUES (?, ?)", (digest, zlib.compress(masked, 6)))
        new[raw] = digest
        return digest

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


class StoreError(Exception):
    """conversations.sqlite cannot be read (not a store, a newer format, damaged)."""


def read_requests(
    run_dir: Path, unit: tuple[str, str, str, int], attempt: str | None, role: str | None = None
) -> list[StoredRequest] | None:
    """The stored requests of one attempt at a unit (None for `attempt`: the unit's last attempt), in step
    order; None when the run has no store (a run from before it existed, or one that made no model call)."""
    path = Path(run_dir) / CONVERSATIONS_FILE
    if not path.exists():
        return None
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
            return list(_read(connection, unit, attempt, role))
    except sqlite3.DatabaseError as problem:
        raise StoreError(f"{path}: not readable as the run's request store: {problem}") from None


def _read(
    connection: sqlite3.Connection, unit: tuple[str, str, str, int], attempt: str | None, role: str | None
) -> Iterator[StoredRequest]:
    (found,) = connection.execute("SELECT max(format) FROM store").fetchone()
    if found is not None and found > STORE_FORMAT:
        raise sqlite3.DatabaseError(f"written in store format {found}; this suite reads up to {STORE_FORMAT}")
    where = "task_id = ? AND system = ? AND model = ? AND epoch = ?"
    if attempt is None:
        last = connection.execute(f"SELECT attempt FROM calls WHERE {where} ORDER BY rowid DESC LIMIT 1", unit)
        row = last.fetchone()
        if row is None:
            return
        attempt = row[0]
    query = f"SELECT role, step, request_key, messages, tools, settings FROM calls WHERE {where} AND attempt = ?"
    arguments: tuple[Any, ...] = (*unit, attempt)
    if role is not None:
        query, arguments = query + " AND role = ?", (*arguments, role)
    blobs: dict[bytes, Any] = {}
    rows = connection.execute(query + " ORDER BY role, step", arguments)
    for call_role, step, key, messages, tools, settings in rows:
        digests = [messages[at : at + _DIGEST_BYTES] for at in range(0, len(messages), _DIGEST_BYTES)]
        yield StoredRequest(
            role=call_role,
            step=step,
            request_key=key,
            messages=[_blob_value(connection, blobs, digest) for digest in digests],
            tools=_blob_value(connection, blobs, tools) if tools is not None else None,
            settings=_blob_value(connection, blobs, settings),
        )


def _blob_value(connection: sqlite3.Connection, blobs: dict[bytes, Any], digest: bytes) -> Any:
    if digest not in blobs:
        row = connection.execute("SELECT body FROM blobs WHERE digest = ?", (digest,)).fetchone()
        if row is None:
            raise sqlite3.DatabaseError(f"a call names blob {digest.hex()}, which the store lacks")
        blobs[digest] = json.loads(zlib.decompress(row[0]))
    return blobs[digest]


def store_sizes(run_dir: Path) -> dict[str, int]:
    """What the store holds: calls, blobs, and the bytes of the file (for the docs' and tests' bounds)."""
    path = Path(run_dir) / CONVERSATIONS_FILE
    with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as connection:
        calls = connection.execute("SELECT count(*) FROM calls").fetchone()[0]
        blobs, stored = connection.execute("SELECT count(*), coalesce(sum(length(body)), 0) FROM blobs").fetchone()
    wal = path.with_name(path.name + "-wal")
    size = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return {"calls": calls, "blobs": blobs, "blob_bytes": stored, "file_bytes": size}
