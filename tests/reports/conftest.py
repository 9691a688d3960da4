"""Wide run directories for the report tests: many system × model rows, built from the recorded fixture run's
manifest and one of its traces, with numbers that differ by row the way real runs do (latency and cost over
several decades, accuracy from 0 to 1, ties included)."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import FIXTURES

RUN = FIXTURES / "report_run"
TRACE = "traces/tool_use/alpha/BND001.json"
FAMILIES = ["langgraph_react", "langgraph_plan_execute", "autogen_assistant", "llamaindex_react", "tool_use"]
FAMILIES += ["planning", "reflection", "lotus_semantic", "docetl_pipeline", "palimpzest_plan", "rag_naive", "rag_hyde"]


def _unit(*parts: object) -> float:
    """A stable number in [0, 1) for these parts (the same every run)."""
    return (zlib.crc32("/".join(map(str, parts)).encode()) % 10_000) / 10_000


def _record(benchmark: str, system: str, model: str, task: str, level: str | None, rank: float, epoch: int) -> dict:
    base = json.loads(RUN.joinpath("results.jsonl").read_text().splitlines()[0])
    bundled = benchmark in ("bundled", "fdabench")
    right = _unit(system, model, task, epoch) < rank
    metric = "correct" if benchmark in ("dabstep", "dab") else "exact_match"
    latency = 0.05 * 10 ** (3 * _unit(system, model))  # 0.05 s .. 50 s per row
    cost = 0.00001 * 10 ** (3 * _unit(model, system)) * (1 + _unit(task))
    phases = {"decision": 0.5, "execute": 0.3, "generate": 0.15, "other": 0.05}
    return {
        **base,
        "task_id": task,
        "epoch": epoch,
        "benchmark": benchmark,
        "system": system,
        "model": model,
        "level": level,
        "question_type": "single_choice" if benchmark == "bundled" else "factoid",
        "scores": {metric: float(right), **({"tos": rank, "tf": _unit(system, task)} if bundled else {})},
        "usage": {**base["usage"], "cost_usd": cost},
        "latency_s": latency,
        "latency_by_phase": {
            name: {**base["latency_by_phase"]["decision"], "latency_s": latency * share}
            for name, share in phases.items()
        },
        "trace_file": TRACE,
        "question": f"Question {task}?",
    }


def write_wide_run(
    out: Path,
    *,
    benchmark: str = "bundled",
    systems: int = 12,
    models: tuple[str, ...] = ("gpt-5-mini", "qwen3-30b-a3b-instruct"),
    tasks: int = 12,
    epochs: int = 1,
    settings: dict | None = None,
) -> Path:
    """A run directory of `systems` × `models` rows over `tasks` tasks of `benchmark` (DAB's ids name their
    dataset, as `<dataset>/query<N>`)."""
    manifest = json.loads(RUN.joinpath("manifest.json").read_text())
    names = [FAMILIES[i % len(FAMILIES)] + ("" if i < len(FAMILIES) else f"_{i}") for i in range(systems)]
    levels = ["easy", "hard"] if benchmark == "dabstep" else ["easy", "medium", "hard"]
    prefix = {"bundled": "BND", "dabstep": "", "dbgorilla": "DBG"}.get(benchmark, "T")
    task_ids = [f"{prefix}{i + 1:03d}" for i in range(tasks)]
    if benchmark == "dab":
        task_ids = [f"query_ds{i % 3}/query{i + 1}" for i in range(tasks)]
    records = []
    for s, system in enumerate(names):
        for model in models:
            rank = 1.0 if s < 2 else _unit("rank", system, model)  # the first two systems tie at 1.0
            for t, task in enumerate(task_ids):
                level = levels[t % len(levels)] if benchmark != "dab" else None
                records += [_record(benchmark, system, model, task, level, rank, e + 1) for e in range(epochs)]
    (out / "traces" / "tool_use" / "alpha").mkdir(parents=True)
    shutil.copy(RUN / TRACE, out / TRACE)
    model_entry = manifest["models"][0]
    manifest |= {
        "benchmark": benchmark,
        "task_ids": task_ids,
        "units": len(records),
        "models": [{**model_entry, "alias": m, "model_id": m} for m in models],
        "systems": {n: {"name": n, "kind": "workflow", **(settings or {})} for n in names},
        "config": {**manifest["config"], "benchmark": benchmark},
    }
    (out / "manifest.json").write_text(json.dumps(manifest))
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return out


@pytest.fixture
def wide_run(tmp_path: Path) -> Callable[..., Path]:
    """`wide_run(name, **options)`: a wide run directory under tmp_path (see write_wide_run)."""

    def make(name: str = "wide", **options) -> Path:
        return write_wide_run(tmp_path / name, **options)

    return make


# ---------------------------------------------------------------- a real browser: Debian's chromium, by Playwright

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def chromium_or_skip() -> Path:
    found = CHROMIUM if CHROMIUM.exists() else shutil.which("chromium")
    if found:
        return Path(found)
    if os.environ.get("CI") == "true":
        pytest.fail("CI installs chromium (setup.sh), yet /usr/bin/chromium is missing")
    pytest.skip("no chromium on this machine: apt-get install chromium (setup.sh does)")


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless chromium (Playwright's own browser download does not work here), one per test module."""
    from playwright.sync_api import sync_playwright

    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), args=FLAGS)
        yield launched
        launched.close()
