"""Within a process a document corpus is read once while its files are unchanged (`tools.documents.load_index`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from data_agent_compare.core import ToolSettings
from data_agent_compare.core.task import DataSource, DataSourceKind
from data_agent_compare.tools import documents
from data_agent_compare.tools.documents import DocumentSearchTool


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


def test_a_changed_corpus_is_read_again(tmp_path: Path, digests: list[float]) -> None:
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "a.md").write_text("# Refunds\n\nWithin 30 days.\n")
    source = DataSource(name="docs", kind=DataSourceKind.DOCUMENTS, location=str(corpus))
    settings = ToolSettings(cache_dir=str(tmp_path / "cache"))
    first = DocumentSearchTool([source], settings)
    assert DocumentSearchTool([source], settings).index is first.index and len(digests) == 1
    (corpus / "b.txt").write_text("Express delivery takes one day.\n")  # a new file
    second = DocumentSearchTool([source], settings)
    assert second.index is not first.index and len(second.index.chunks) == 2 and len(digests) == 2
