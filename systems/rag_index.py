"""What the RAG systems index and how an index is built once: a task's corpus, the cache on disk, one
build at a time, and the metering of building apart from every task.

Corpus. A task's passages are the ~500-character chunks of its document sources (the chunking of
`tools/documents.py`, the same passages `search_documents` returns), then the passages of the
FDABench frozen vector search recorded with it (`tools/frozen_search.py`'s rendering, chunked the same
way), then those of the unstructured text columns of its databases (DAB's review texts and book
descriptions: `tools/text_columns.py`, one passage source per `<database>.<table>.<column>`, headed by
the row's identifying columns). Its digest (sha256 over the passages and CORPUS_VERSION) names it.
Reading the text columns is done once per process and set of databases.

Cache. An index layer lives in `<tools.cache_dir>/rag/<layer>/<key>.json`, key = sha256 of the corpus
digest, the model (provider, id, alias), the layer's settings and its prompt version; written to a
temporary file and renamed, so a reader never sees half of one. A second task, run or process over
the same corpus and model reads it and makes no model call.

One build at a time. A per-key thread lock and an `fcntl` lock on `<key>.lock` make concurrent tasks
and processes that need the same index wait for the first build and then read it.

Metering. A build's model calls go through `SystemSetup.metered`: a metered model on a trace of its
own (agent "indexing", INDEX_BUDGETS), written to `traces/_index/<system>/<model>/<corpus>.json` in the
run directory. Each layer reports an `IndexReport` (model calls, tokens, cost, seconds) for the
manifest; one read from the cache reports `cached: true` and costs nothing now, with what its build
cost kept under `built`.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core import (
    Budgets,
    DataSource,
    DataSourceKind,
    Message,
    MeteredModel,
    ModelConfig,
    ModelError,
    Task,
    ToolSettings,
    Trace,
)
from ..core.model import GenerationSettings, RetrySettings
from ..core.runlog import write_json
from ..core.system import SystemSetup
from ..core.trace import ModelCallStep
from ..tools import text_columns
from ..tools.documents import INDEX_VERSION, Chunk, DocumentIndex, chunk_markdown, corpus_files
from ..tools.files import source_path
from ..tools.frozen_search import render
from ..tools.text_columns import TextColumn, text_column_chunks

CORPUS_VERSION = "rag-corpus/v1"  # bump when the passages of a corpus change
INDEX_BUDGETS = Budgets(max_steps=5_000, max_tokens=50_000_000, wall_time_s=6 * 3600.0)
# An indexing call reads a long text unit: on a shared CPU the embedded model may need minutes for one.
INDEX_RETRIES = RetrySettings(attempt_timeout_s=600.0, call_timeout_s=900.0)
INDEXING_AGENT = "indexing"  # the agent label of every indexing model call


@dataclass(frozen=True)
class Passage:
    id: int
    source: str  # file path relative to the corpus folder, or "frozen_vector_search"
    heading: str
    text: str

    def render(self) -> str:
        where = f"{self.source} — {self.heading}" if self.heading else self.source
        return f"[{self.id}] {where}\n{self.text}"


@dataclass(frozen=True)
class Corpus:
    passages: list[Passage]
    digest: str
    text_columns: list[TextColumn] = field(default_factory=list)  # the database columns read as text

    @property
    def name(self) -> str:
        """A short name for files and reports."""
        return self.digest[:16]

    def database_passages(self) -> list[Passage]:
        """The passages read from database text columns (no task tool searches them)."""
        sources = {column.source for column in self.text_columns}
        return [p for p in self.passages if p.source in sources]

    def describe(self) -> dict[str, Any]:
        """What the corpus holds, for the index reports in the manifest."""
        described: dict[str, Any] = {"passages": len(self.passages)}
        if self.text_columns:
            described["text_columns"] = [column.report() for column in self.text_columns]
        return described


def task_corpus(task: Task, settings: ToolSettings | None = None) -> Corpus | None:
    """The passages a RAG system indexes for `task` (module docstring), or None when it has none.
    Raises ToolError or OSError when a document folder or database cannot be read."""
    documents = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
    pieces = []
    for name, path in corpus_files(documents, task.data_dir) if documents else []:
        pieces += chunk_markdown(name, path.read_text("utf-8", errors="replace"))
    recorded = task.metadata.get("frozen_vector_search")
    if recorded not in (None, "", [], {}):
        pieces += chunk_markdown("frozen_vector_search", render(recorded))
    database_chunks, columns = database_text(task, settings or ToolSettings())
    passages = [Passage(i, c.source, c.heading, c.text) for i, c in enumerate(pieces + database_chunks)]
    if not passages:
        return None
    digest = hashlib.sha256(CORPUS_VERSION.encode())
    for passage in passages:
        digest.update(json.dumps([passage.source, passage.heading, passage.text]).encode())
    return Corpus(passages, digest.hexdigest(), columns)


_database_text: dict[tuple[Any, ...], tuple[list[Chunk], list[TextColumn]]] = {}
_database_text_lock = threading.Lock()


def database_text(task: Task, settings: ToolSettings) -> tuple[list[Chunk], list[TextColumn]]:
    """The text columns' passages of the task's databases, read once per process while the database
    files are unchanged (a server database is keyed by its URL: DAB restores are named by their dump)."""
    databases = [s for s in task.data if s.kind not in (DataSourceKind.DOCUMENTS, DataSourceKind.FILES)]
    if not databases:
        return [], []
    key = (str(task.data_dir), *((s.name, s.kind, s.location, _stat(task, s)) for s in databases))
    with _database_text_lock:
        found = _database_text.get(key)
        if found is None:
            found = _database_text[key] = text_column_chunks(task.model_copy(update={"data": databases}), settings)
    return found


def _stat(task: Task, source: DataSource) -> tuple[int, int] | None:
    """The database file's modification time and size; None for a server (a URL) or a missing file."""
    if not source.location or "://" in source.location:
        return None
    try:
        stat = source_path(source, task.data_dir).stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


def text_column_rule() -> dict[str, Any]:
    """Which database columns the corpus reads as text (tools/text_columns.py), for the manifest: a change
    changes what the indexes hold, so a resumed run must see it."""
    return {
        "min_mean_chars": text_columns.MIN_MEAN_CHARS,
        "min_mean_words": text_columns.MIN_MEAN_WORDS,
        "sample_rows": text_columns.SAMPLE_ROWS,
        "max_rows": text_columns.MAX_ROWS,
    }


def index_key(
    corpus: Corpus,
    model: ModelConfig,
    layer: str,
    settings: dict[str, Any],
    generation: GenerationSettings | None = None,
) -> str:
    """The cache key of one index layer: corpus, model, the layer's settings and prompt version, and the
    run's sampling settings when it sets any (an index built without them keeps its key)."""
    parts = [corpus.digest, model.provider, model.model_id, model.alias, layer, settings]
    if generation is not None and generation.sent():
        parts.append(generation.sent())
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


# ---------------------------------------------------------------- the cache and its locks

_thread_locks: dict[str, threading.Lock] = {}
_thread_locks_guard = threading.Lock()


class IndexCache:
    """Index layers as JSON files under `<cache_dir>/rag` (module docstring)."""

    def __init__(self, settings: ToolSettings) -> None:
        self.root = Path(settings.cache_dir) / "rag"

    def path(self, layer: str, key: str) -> Path:
        return self.root / layer / f"{key}.json"

    def load(self, layer: str, key: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path(layer, key).read_text("utf-8"))
        except (OSError, ValueError):  # missing or damaged: build again
            return None
        return data if isinstance(data, dict) else None

    def save(self, layer: str, key: str, data: dict[str, Any]) -> None:
        target = self.path(layer, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_name(f"{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        staging.write_text(json.dumps(data, ensure_ascii=False), "utf-8")
        staging.replace(target)

    @contextmanager
    def building(self, layer: str, key: str) -> Iterator[None]:
        """Hold the key's thread lock and file lock: one build per key across threads and processes."""
        with _thread_locks_guard:
            lock = _thread_locks.setdefault(key, threading.Lock())
        lock_file = self.path(layer, key).with_suffix(".lock")
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        with lock, lock_file.open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------- metering a build


@dataclass
class Indexer:
    """The builds of one system over one corpus with one model: a metered model on one indexing trace,
    created on the first model call, and the reports of every layer obtained."""

    setup: SystemSetup
    system: str
    corpus: Corpus
    reports: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # indexing calls that failed (their units add nothing)
    _model: MeteredModel | None = None

    @property
    def cache(self) -> IndexCache:
        return IndexCache(self.setup.tools)

    @property
    def trace_file(self) -> str:
        model = self.setup.model.alias.replace("/", "_")
        return str(Path("traces") / "_index" / self.system / model / f"{self.corpus.name}.json")

    def model(self) -> MeteredModel:
        if self._model is None:
            label = f"_index/{self.corpus.name}"
            self._model = self.setup.metered(label, f"index:{self.system}", INDEX_BUDGETS, INDEX_RETRIES)
        return self._model

    def generate(self, messages: list[Message], schema: dict[str, Any], max_tokens: int) -> str | None:
        """One indexing call with structured output: its text, or None when the model failed (noted)."""
        try:
            reply = self.model().generate(
                messages, response_schema=schema, max_output_tokens=max_tokens, agent=INDEXING_AGENT
            )
        except ModelError as failure:
            self.failures.append(str(failure))
            return None
        return reply.message.content or ""

    def obtain(self, layer: str, key: str, build: Callable[[Indexer], dict[str, Any]]) -> dict[str, Any]:
        """The layer's data from the cache, else built (once across threads and processes) and cached."""
        cache = self.cache
        data = cache.load(layer, key)
        if data is None:
            with cache.building(layer, key):
                data = cache.load(layer, key)  # built by another thread or process while this one waited
                if data is None:
                    data = self._build(layer, key, build)
                    self.reports.append(self._report(layer, key, data["built"], cached=False))
                    return data
        self.reports.append(self._report(layer, key, data.get("built", {}), cached=True))
        return data

    def vectors(self, passages: list[Passage]) -> DocumentIndex:
        """A FAISS index of these passages over MiniLM embeddings (no model call): from
        `<cache_dir>/rag/vectors/<key>`, else embedded and saved there; reported as layer "vectors"."""
        parts = [self.corpus.digest, INDEX_VERSION, [p.id for p in passages]]
        key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
        folder = self.cache.path("vectors", key).with_suffix("")
        with self.cache.building("vectors", key):
            index = DocumentIndex.load(folder)
            if index is not None:
                self.reports.append(self._report("vectors", key, {"indexed_passages": len(passages)}, cached=True))
                return index
            start = time.perf_counter()
            index = DocumentIndex.of_chunks([Chunk(p.source, p.heading, p.text) for p in passages])
            index.save(folder)
        built = {**usage_of([]), "seconds": round(time.perf_counter() - start, 3), "indexed_passages": len(passages)}
        self.reports.append(self._report("vectors", key, built, cached=False))
        return index

    def _build(self, layer: str, key: str, build: Callable[[Indexer], dict[str, Any]]) -> dict[str, Any]:
        before, failed = (len(self._model.recorder.trace.steps) if self._model else 0), len(self.failures)
        start = time.perf_counter()
        data = build(self)
        seconds = time.perf_counter() - start
        calls = (
            [s for s in self._model.recorder.trace.steps[before:] if isinstance(s, ModelCallStep)]
            if self._model
            else []
        )
        data["built"] = {**usage_of(calls), "seconds": round(seconds, 3), "by_system": self.system}
        failures = self.failures[failed:]
        if failures and len(failures) == len(calls):
            raise ModelError(f"every indexing call of {layer} failed; the last: {failures[-1]}")
        if failures:  # usable for this run, but never cached: a transient failure must not outlive it
            data["built"]["failed_calls"] = len(failures)
        else:
            self.cache.save(layer, key, data)
        return data

    def _report(self, layer: str, key: str, built: dict[str, Any], *, cached: bool) -> dict[str, Any]:
        report = {"index": layer, "corpus": self.corpus.name, "key": key[:16], "model": self.setup.model.alias}
        report |= self.corpus.describe()
        if cached:  # read from the cache: nothing spent now; what building it cost is kept for reference
            nothing = usage_of([])
            return {**report, "cached": True, **nothing, "seconds": 0.0, "built": built}
        return {**report, "cached": False, **{k: v for k, v in built.items() if k != "by_system"}}

    def finish(self) -> list[dict[str, Any]]:
        """Write the indexing trace into the run directory (when model calls were made) and return the
        reports, each naming that trace."""
        trace = self.trace()
        if trace is not None and self.setup.run_dir is not None:
            write_json(self.setup.run_dir / self.trace_file, trace.model_dump(mode="json"))
            for report in self.reports:
                if not report["cached"]:
                    report["trace_file"] = self.trace_file
        return self.reports

    def trace(self) -> Trace | None:
        if self._model is None:
            return None
        return self._model.recorder.finish("completed")


def usage_of(calls: list[ModelCallStep]) -> dict[str, Any]:
    costs = [c.usage.cost_usd for c in calls]
    return {
        "model_calls": len(calls),
        "input_tokens": sum(c.usage.input_tokens for c in calls),
        "output_tokens": sum(c.usage.output_tokens for c in calls),
        # null when a call's cost is unknown (a model without a price): never counted as $0
        "cost_usd": None if None in costs else sum(cost or 0.0 for cost in costs),
    }
