"""The request store (core/conversations.py): each call's request kept as sent, a shared prefix and a repeated
tool list stored once, secrets masked before anything is written, several writers on one file, and a store of
a newer format or a damaged one refused with its path."""

from __future__ import annotations

import sqlite3
import threading
import zlib
from pathlib import Path

import pytest

from data_agent_compare.core import redaction
from data_agent_compare.core.conversations import (
    CONVERSATIONS_FILE,
    CallRequest,
    ConversationWriter,
    StoreError,
    read_requests,
    request_parts,
    store_sizes,
)
from data_agent_compare.core.model import Message, ModelRequest, ToolSpec
from data_agent_compare.core.redaction import register_secret

UNIT = ("T1", "tool_use", "gpt-5", 1)
SQL = ToolSpec(name="execute_sql", description="Run one read-only query.", parameters={"type": "object"})
SECRET = "sk-or-v1-0123456789abcdef0123456789abcdef"


@pytest.fixture(autouse=True)
def no_secrets_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redaction, "_secrets", ())
    monkeypatch.setattr(redaction, "_prefixes", ())


def conversation(turns: int) -> list[ModelRequest]:
    """The requests of a tool-using conversation of `turns` calls: each repeats every message before it."""
    messages = [Message(role="system", content="You are a data analyst."), Message(role="user", content="Q?")]
    requests = []
    for turn in range(turns):
        requests.append(ModelRequest(messages=list(messages), tools=[SQL], temperature=0.0))
        messages.append(Message(role="assistant", content=f"step {turn}"))
        messages.append(Message(role="tool", content=f"result {turn} " + "x" * 400, tool_call_id=f"c{turn}"))
    return requests


def store(writer: ConversationWriter, requests: list[ModelRequest], unit=UNIT, attempt: str = "a1") -> None:
    task, system, model, epoch = unit
    for step, request in enumerate(requests):
        writer.put(
            CallRequest(
                task_id=task, system=system, model=model, epoch=epoch, attempt=attempt, role="system",
                step=step * 2, request_key=f"k{step}", parts=request_parts(request),
            )
        )  # fmt: skip


def test_each_request_reads_back_as_sent_in_step_order(tmp_path: Path) -> None:
    requests = conversation(3)
    writer = ConversationWriter(tmp_path)
    store(writer, requests)
    writer.close()

    stored = read_requests(tmp_path, UNIT, "a1")
    assert stored is not None and [call.step for call in stored] == [0, 2, 4]
    for call, request in zip(stored, requests, strict=True):
        assert call.messages == [m.model_dump(exclude_none=True) for m in request.messages]
        assert call.tools == [SQL.model_dump()] and call.settings == {"temperature": 0.0}
    assert read_requests(tmp_path, UNIT, None) == stored  # no attempt named: the unit's last one


def test_a_shared_prefix_and_a_repeated_tool_list_are_stored_once(tmp_path: Path) -> None:
    requests = conversation(12)
    writer = ConversationWriter(tmp_path)
    store(writer, requests)
    writer.close()

    sizes = store_sizes(tmp_path)
    sent = sum(len(request.model_dump_json()) for request in requests)  # what 12 requests sent in all
    # 2 opening messages + 2 per turn, one tool list, one settings block: each blob once
    assert sizes["calls"] == 12 and sizes["blobs"] == 2 + 2 * 11 + 1 + 1
    assert sizes["blob_bytes"] < sent / 8


def test_a_secret_in_a_tool_result_is_masked_in_the_store(tmp_path: Path) -> None:
    register_secret(SECRET)
    leaked = f"key={SECRET} url=postgresql://reader:hunter2-secret@db.internal/sales"
    request = ModelRequest(messages=[Message(role="user", content="Q?"), Message(role="tool", content=leaked)])
    writer = ConversationWriter(tmp_path)
    store(writer, [request])
    writer.close()

    (call,) = read_requests(tmp_path, UNIT, "a1") or []
    assert SECRET not in call.messages[1]["content"] and "hunter2-secret" not in call.messages[1]["content"]
    with sqlite3.connect(tmp_path / CONVERSATIONS_FILE) as connection:
        bodies = [zlib.decompress(body) for (body,) in connection.execute("SELECT body FROM blobs")]
    assert bodies and not any(SECRET.encode() in body or b"hunter2-secret" in body for body in bodies)


def test_writers_of_several_threads_and_two_connections_share_one_store(tmp_path: Path) -> None:
    first, second = ConversationWriter(tmp_path), ConversationWriter(tmp_path)  # as two worker processes
    units = [(f"T{n}", "tool_use", "gpt-5", 1) for n in range(8)]
    threads = [
        threading.Thread(target=store, args=(first if n % 2 else second, conversation(4), unit))
        for n, unit in enumerate(units)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first.close()
    second.close()

    assert all(len(read_requests(tmp_path, unit, "a1") or []) == 4 for unit in units)
    assert store_sizes(tmp_path)["calls"] == 32


def test_a_run_without_a_store_reads_as_none_and_a_foreign_file_is_refused_by_path(tmp_path: Path) -> None:
    assert read_requests(tmp_path, UNIT, "a1") is None
    (tmp_path / CONVERSATIONS_FILE).write_text("not a database at all " * 100)
    with pytest.raises(StoreError, match=CONVERSATIONS_FILE):
        read_requests(tmp_path, UNIT, "a1")


def test_a_store_of_a_newer_format_is_refused(tmp_path: Path) -> None:
    writer = ConversationWriter(tmp_path)
    store(writer, conversation(1))
    writer.close()
    with sqlite3.connect(tmp_path / CONVERSATIONS_FILE) as connection:
        connection.execute("UPDATE store SET format = 99")
    with pytest.raises(StoreError, match="format 99"):
        read_requests(tmp_path, UNIT, "a1")
