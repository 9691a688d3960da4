"""What a run depends on besides its configuration (`core.runlog.RunIdentity`), and what changed since.

    code          from a checkout: the commit, a hash of the suite's committed files (tests and Markdown left
                  out) and a hash of the uncommitted changes; installed: a hash of the package's files
    plugin files  sha256 of each `--plugin` file (of a plugin module's files)
    scorers       the declared version of each of the benchmark's scorers (`core.scorer.versioned`)
    data files    a fingerprint of each file the benchmark's agents and scorers read (`Benchmark.data_files`)

Generation settings, models, prompts and tasks are the configuration's and the manifest's other fields,
compared by the runner (`runner.manifest_differences`), which adds these differences to its own.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from ..core.benchmark import Benchmark
from ..core.runlog import CodeIdentity, DataFile, Manifest, RunIdentity
from ..core.scorer import scorer_version
from ..core.task import Task

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
# The package's own folders (pyproject's packages and package data): what an installed suite runs.
PACKAGE_FOLDERS: tuple[str, ...] = ("cli", "core", "configs", "engine", "evaluators", "providers", "reports")
PACKAGE_FOLDERS += ("systems", "tasks", "tools", "workflows")
NOT_CODE = ("tests/",)  # in a checkout, with *.md: a change to these changes no run
UNTRACKED_CODE = ("*.py", "*.yaml", "*.yml", "*.toml")  # untracked files that count as uncommitted code
WHOLE_FILE_BYTES = 8 << 20  # larger data files are fingerprinted by samples
SAMPLE_BYTES, SAMPLES = 64 << 10, 32


def run_identity(benchmark: Benchmark, tasks: Sequence[Task], plugins: Sequence[str]) -> RunIdentity:
    """The identity of a run of these tasks as it would start now (the tasks as loaded, before `prepare`)."""
    started = time.perf_counter()
    data_files = {str(path): data_file(path) for path in benchmark.data_files(tasks)}  # once per run
    data_files_s = round(time.perf_counter() - started, 4)
    return RunIdentity(
        code=process_code_identity(),
        plugin_files={plugin: plugin_hash(plugin) for plugin in plugins},
        scorers={name: scorer_version(name) for name in benchmark.scorers},
        data_files=data_files,
        data_files_s=data_files_s,
    )


# ---------------------------------------------------------------- code


@functools.cache
def process_code_identity() -> CodeIdentity:
    """The identity of the code this process runs, taken once: files edited on disk after it started are
    not the code it runs (and a run and its resume within one process compare the same code)."""
    return code_identity(PACKAGE_ROOT)


def code_identity(root: Path = PACKAGE_ROOT) -> CodeIdentity:
    """The checkout's identity when `root` is one (git present, the suite's files tracked), else the package's."""
    try:
        return _checkout_identity(root)
    except (OSError, subprocess.SubprocessError, _NotACheckout):
        return CodeIdentity(source="package", package_sha256=package_hash(root))


class _NotACheckout(Exception):
    pass


def _git(root: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=30, check=True).stdout


def _is_code(path: str) -> bool:
    return not path.startswith(NOT_CODE) and not path.endswith(".md")


def _checkout_identity(root: Path) -> CodeIdentity:
    if not _git(root, "ls-files", "--", "core/runlog.py").strip():  # e.g. installed inside another repo
        raise _NotACheckout()
    commit = _git(root, "rev-parse", "HEAD").decode().strip()
    tree = hashlib.sha256()
    for entry in _git(root, "ls-tree", "-r", "-z", "HEAD", "--", ".").split(b"\0"):
        if entry and _is_code(entry.split(b"\t", 1)[1].decode("utf-8", "replace")):
            tree.update(entry + b"\0")
    excluded = [f":(exclude){path}" for path in NOT_CODE] + [":(exclude)*.md"]
    diff = _git(root, "diff", "HEAD", "--binary", "--no-ext-diff", "--no-color", "--", ".", *excluded)
    untracked = _git(root, "ls-files", "-z", "--others", "--exclude-standard", "--", *UNTRACKED_CODE, *excluded)
    changes = hashlib.sha256(diff)
    for name in sorted(n for n in untracked.split(b"\0") if n):
        changes.update(b"\0untracked\0" + name + b"\0" + _file_sha256(root / name.decode()).encode())
    dirty = bool(diff) or bool(untracked.strip(b"\0"))
    return CodeIdentity(
        source="checkout",
        commit=commit,
        tree_sha256=tree.hexdigest(),
        diff_sha256=changes.hexdigest() if dirty else None,
    )


def package_hash(root: Path = PACKAGE_ROOT) -> str:
    """sha256 over the package's files (paths and contents; compiled caches left out)."""
    digest = hashlib.sha256()
    files = [root / name for name in os.listdir(root) if name.endswith(".py")]
    for folder in PACKAGE_FOLDERS:
        files += [p for p in (root / folder).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    for path in sorted(files):
        digest.update(f"{path.relative_to(root)}\0{_file_sha256(path)}\0".encode())
    return digest.hexdigest()


# ---------------------------------------------------------------- plugins and data files


def plugin_hash(plugin: str) -> str:
    """sha256 of a plugin .py file, or of a plugin module's file(s) (a package: all its .py files)."""
    if plugin.endswith(".py"):
        return _file_sha256(Path(plugin)) if Path(plugin).is_file() else "missing"
    try:
        spec = importlib.util.find_spec(plugin)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return "missing"
    if spec.submodule_search_locations:
        files = sorted(p for folder in spec.submodule_search_locations for p in Path(folder).rglob("*.py"))
    else:
        files = [Path(spec.origin)] if spec.origin and Path(spec.origin).is_file() else []
    digest = hashlib.sha256()
    for path in files:
        digest.update(f"{path.name}\0{_file_sha256(path)}\0".encode())
    return digest.hexdigest() if files else "no source file"


def data_file(path: Path) -> DataFile:
    """A data file's fingerprint: its content hashed whole up to WHOLE_FILE_BYTES; beyond, its size, head,
    tail and SAMPLES evenly spaced blocks, with its modification time."""
    try:
        status = path.stat()
    except OSError as unreadable:  # gone between listing and reading: recorded, so a resume sees the change
        return DataFile(size=-1, sha256=f"unreadable: {unreadable.strerror}")
    if status.st_size <= WHOLE_FILE_BYTES:
        return DataFile(size=status.st_size, sha256=_file_sha256(path))
    digest = hashlib.sha256(str(status.st_size).encode())
    step = (status.st_size - SAMPLE_BYTES) // (SAMPLES + 1)
    with path.open("rb") as file:
        for offset in [0, *(step * i for i in range(1, SAMPLES + 1)), status.st_size - SAMPLE_BYTES]:
            file.seek(offset)
            digest.update(file.read(SAMPLE_BYTES))
    return DataFile(size=status.st_size, sha256=digest.hexdigest(), sampled=True, mtime_ns=status.st_mtime_ns)


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- what changed


def identity_differences(recorded: Manifest, current: Manifest) -> list[str]:
    """One line per thing the run depends on that changed since it started. A run log written before
    schema 3 recorded only its commit: that is compared."""
    old, new = recorded.identity, current.identity
    if new is None:
        return []
    if old is None:
        sha = recorded.git.sha
        if sha not in ("", "unknown") and new.code.commit and sha != new.code.commit:
            return [f"code: commit {sha[:12]} → {new.code.commit[:12]}"]
        return []
    return [
        *code_changes(old.code, new.code),
        *_named_changes("plugin", old.plugin_files, new.plugin_files, "file sha256"),
        *_named_changes("scorer", old.scorers, new.scorers, "version"),
        *data_file_changes(old.data_files, new.data_files),
    ]


def code_changes(old: CodeIdentity, new: CodeIdentity) -> list[str]:
    if old.source != new.source:
        return [f"code: the run started from {_where(old)}; this is {_where(new)}"]
    if old.source == "package":
        if old.package_sha256 == new.package_sha256:
            return []
        return [
            f"code: the installed package's files differ (sha256 {_short(old.package_sha256)} → "
            f"{_short(new.package_sha256)})"
        ]
    changes = []
    if old.tree_sha256 != new.tree_sha256:
        changes.append(f"code: the suite's committed files differ (commit {_short(old.commit)} → {_short(new.commit)})")
    if old.diff_sha256 != new.diff_sha256:
        if old.diff_sha256 is None:
            changes.append("code: uncommitted changes since the run started (it ran on a clean tree)")
        elif new.diff_sha256 is None:
            changes.append("code: the run's uncommitted changes are gone (committed or undone)")
        else:
            changes.append(
                f"code: the uncommitted changes differ from the run's (diff sha256 "
                f"{_short(old.diff_sha256)} → {_short(new.diff_sha256)})"
            )
    return changes


def _where(code: CodeIdentity) -> str:
    return f"a checkout (commit {_short(code.commit)})" if code.source == "checkout" else "an installed package"


def _short(value: str | None) -> str:
    return (value or "none")[:12]


def _named_changes(what: str, old: dict[str, str], new: dict[str, str], field: str) -> list[str]:
    shown = (lambda v: _short(v)) if field.endswith("sha256") else repr
    return [
        f"{what} {name!r}: {field} {shown(old[name]) if name in old else '(none)'} → "
        f"{shown(new[name]) if name in new else '(none)'}"
        for name in sorted(old.keys() | new.keys())
        if old.get(name) != new.get(name)
    ]


def data_file_changes(old: dict[str, DataFile], new: dict[str, DataFile], shown: int = 10) -> list[str]:
    """One line per data file changed, gone or new (at most `shown`, then how many more)."""
    lines = []
    for path in sorted(old.keys() | new.keys()):
        before, after = old.get(path), new.get(path)
        if before == after:
            continue
        if after is None:
            lines.append(f"data file {path}: no longer there")
        elif before is None:
            lines.append(f"data file {path}: new since the run started")
        elif before.size != after.size:
            lines.append(f"data file {path}: size {before.size} → {after.size} bytes")
        elif before.sha256 != after.sha256:
            lines.append(f"data file {path}: content changed (sha256 {_short(before.sha256)} → {_short(after.sha256)})")
        else:
            lines.append(f"data file {path}: modified since the run started (same size and sampled blocks)")
    if len(lines) > shown:
        lines = [*lines[:shown], f"... and {len(lines) - shown} more data files changed"]
    return lines
