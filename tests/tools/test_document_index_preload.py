"""A document corpus is read once per process, before any task's clock: the runner preloads its index and
the embedding model (`tools.prepare_tools`), and each task's `search_documents` reuses them."""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

import pytest

from data_agent_compare.core import CallContext, Message, ModelRequest, ToolSettings
from data_agent_compare.core.runlog import read_records
from data_agent_compare.core.task import DataSourceKind
from data_agent_compare.engine.runner import execute
from data_agent_compare.providers.scripted import tool_call_message
from data_agent_compare.tasks.bundled import BundledBenchmark
from data_agent_compare.tools import documents

from helpers import load_tasks, make_plan, scripted_provider, steps_taken


def search_then_answer(request: ModelRequest, context: CallContext) -> Message:
    if steps_taken(request) == 0:
        return tool_call_message("search_documents", {"query": "key account threshold"})
    return tool_call_message("answer", {"answer": "A"})


@pytest.fixture
def digests(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each corpus was hashed: only a corpus the process has not loaded yet is."""
    documents._indexes.clear()
    times: list[float] = []
    real = documents.corpus_digest

    def counted(files: list[tuple[str, Path]]) -> str:
        times.append(time.time())
        return real(files)

    monkeypatch.setattr(documents, "corpus_digest", counted)
    return times


def test_the_index_is_read_once_and_before_any_task_clock(tmp_path: Path, digests: list[float]) -> None:
    tasks = [t for t in load_tasks("bundled") if any(s.kind == DataSourceKind.DOCUMENTS for s in t.data)][:6]
    assert len(tasks) == 6
    with scripted_provider() as install:
        model = install(search_then_answer)
        tools = ToolSettings(cache_dir=str(tmp_path / "cache"))  # a fresh on-disk cache: embedded once, here
        plan = make_plan(tmp_path, tasks, model, ["tool_use"], BundledBenchmark(), concurrency=3, tools=tools)
        manifest = execute(plan)
    assert len(digests) == 1  # six tasks, one corpus, hashed and embedded once
    assert "search_documents (embedding model, document indexes)" in manifest.model_load_s
    records = read_records(plan.run_dir)[0]
    assert len(records) == 6
    for record in records:
        assert record.setup_s < 0.5, record.setup_s  # no embedding model, no index read inside a task
        started_at = json.loads((plan.run_dir / record.trace_file).read_text())["started_at"]
        assert datetime.fromisoformat(started_at).timestamp() > digests[0]  # the clock started after the read
