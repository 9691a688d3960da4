"""The runs a viewer shows: every run directory under the folders it was given, each with a stable key (its
path under its folder), what its manifest says and how far it got. Read from the files on every call (cheap:
the manifest and the size of results.jsonl), so a run started after the viewer appears by itself."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.runlog import MANIFEST_FILE, RESULTS_FILE

DEPTH = 3  # folders below a given folder searched for runs


@dataclass(frozen=True)
class RunEntry:
    key: str  # the run's path under its folder, "/" written "~" (one URL segment)
    path: Path


def find_runs(folders: list[Path]) -> list[RunEntry]:
    """Every run directory under `folders` (a folder may be a run itself), newest first, keys unique."""
    found: dict[str, RunEntry] = {}
    for folder in folders:
        for path in _run_dirs(folder, DEPTH):
            relative = path.relative_to(folder).as_posix() if path != folder else folder.resolve().name
            key = relative.replace("/", "~") or path.name
            while key in found and found[key].path != path:  # two folders with a run of the same name
                key += "+"
            found[key] = RunEntry(key=key, path=path)
    return sorted(found.values(), key=lambda entry: _started(entry.path), reverse=True)


def _run_dirs(folder: Path, depth: int) -> list[Path]:
    if (folder / MANIFEST_FILE).is_file():
        return [folder]
    if depth == 0 or not folder.is_dir():
        return []
    try:
        children = sorted(child for child in folder.iterdir() if child.is_dir() and not child.name.startswith("."))
    except OSError:
        return []
    return [run for child in children for run in _run_dirs(child, depth - 1)]


def _started(path: Path) -> str:
    return str(read_manifest_json(path).get("started_at") or "")


def read_manifest_json(run_dir: Path) -> dict[str, Any]:
    """The manifest as JSON ({} when it cannot be read right now: a run rewrites it atomically)."""
    try:
        found = json.loads((run_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def fingerprint(run_dir: Path) -> tuple[int, ...]:
    """Changes whenever the run's manifest or results change: what cached views of it are keyed by."""
    stamp: list[int] = []
    for name in (MANIFEST_FILE, RESULTS_FILE):
        try:
            stat = (run_dir / name).stat()
            stamp += [stat.st_mtime_ns, stat.st_size]
        except OSError:
            stamp += [0, 0]
    return tuple(stamp)


def done_units(run_dir: Path) -> int:
    """Lines in results.jsonl: the units finished so far (a re-run unit counts once more until it is read)."""
    try:
        with (run_dir / RESULTS_FILE).open("rb") as file:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: file.read(1 << 20), b""))
    except OSError:
        return 0


def describe(entry: RunEntry) -> dict[str, Any]:
    """What the runs list shows of a run before its records are read."""
    manifest = read_manifest_json(entry.path)
    return {
        "key": entry.key,
        "path": str(entry.path),
        "name": entry.path.name,
        "label": (manifest.get("config") or {}).get("label"),
        "benchmark": manifest.get("benchmark"),
        "systems": sorted(manifest.get("systems") or {}),
        "models": [model.get("alias") for model in manifest.get("models") or [] if isinstance(model, dict)],
        "status": manifest.get("status", "unreadable"),
        "started_at": manifest.get("started_at"),
        "finished_at": manifest.get("finished_at"),
        "units": manifest.get("units"),
        "done": done_units(entry.path),
        "has_report": (entry.path / "report.html").is_file(),
    }
