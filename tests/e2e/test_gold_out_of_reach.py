"""Gold material is out of every agent's reach, on every benchmark: a scripted agent (a test system that
needs no model) lists and reads every file its tools can reach and runs Python that walks `/` and reads
every readable file, and finds no task file, answer, ground truth or validator."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from data_agent_compare.core import Answer, RunContext, System, Task, create_benchmark
from data_agent_compare.core.runlog import read_run
from data_agent_compare.engine.runner import execute

from helpers import FIXTURES, SCRIPTED, make_plan, postgres_bin_dir_or_skip, registered_system

# Names and contents that only gold material carries: the benchmarks' task files and answer keys, DAB's
# ground truths and validators (`validate(llm_output)`), DBGorilla's gold queries, a run's results.
GOLD_FILE_NAMES = {
    "dev.jsonl",
    "tasks.jsonl",
    "all.jsonl",
    "ground_truth.csv",
    "test_singlechoice.jsonl",
    "test_multichoice.jsonl",
    "test_report.jsonl",
    "queries-sample.json",
    "results.jsonl",
}
GOLD_CONTENT = [
    '"correct_answer"',
    '"ground_truth_report"',
    '"gold": {',
    "def validate(llm_output",
    '"corresponding_natural_language_query"',
]

# Every file name is checked; the content of every readable text file under 2 MB is searched (gold files
# are small text; reading every shared library of the runtime would only make the walk slow).
WALK = r"""
import json, os
wanted = json.loads(open("wanted.json").read())
TEXT = (".json", ".jsonl", ".csv", ".py", ".md", ".txt", ".yaml", ".yml", ".sql", "")
found, read = [], 0
for top, dirs, files in os.walk("/", onerror=lambda error: None):
    dirs[:] = [d for d in dirs if os.path.join(top, d) not in ("/proc", "/sys", "/dev", os.getcwd())]
    for name in files:
        path = os.path.join(top, name)
        if name in wanted["names"]:
            found.append(path)
        if os.path.splitext(name)[1] not in TEXT:
            continue
        try:
            if os.path.getsize(path) > 2_000_000:
                continue
            with open(path, "rb") as handle:
                text = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        read += 1
        found += [f"{path}: {marker}" for marker in wanted["contents"] if marker in text]
print(json.dumps({"read": read, "found": found[:50]}))
"""


class GoldHunter(System):
    """A test system that reaches for everything its tools allow and reports what it found."""

    name = "test_gold_hunter"
    kind = "test"

    answer_markers: ClassVar[list[str]] = []  # the task's own gold answer as its task file stores it (set by the test)

    def run(self, task: Task, ctx: RunContext) -> Answer:
        offered = {spec.name for spec in ctx.tool_specs()}
        found: list[str] = []
        if "list_files" in offered:
            found += self._read_every_file(ctx)
        python = "execute_python" in offered
        if python:
            found += self._walk_with_python(ctx, task)
        return Answer(text=json.dumps({"found": found, "python": python, "tools": sorted(offered)}))

    def _read_every_file(self, ctx: RunContext) -> list[str]:
        listing = ctx.call_tool("list_files", {})
        found = []
        for entry in listing.data or []:
            if entry["size"] is None:
                continue
            if Path(entry["path"]).name in GOLD_FILE_NAMES:
                found.append(entry["path"])
            offset, text = 0, ""
            while True:
                part = ctx.call_tool("read_file", {"path": entry["path"], "offset": offset})
                if not part.success:
                    break
                text += part.content
                if not part.truncated:
                    break
                offset = part.data["next_offset"]
            markers = [*GOLD_CONTENT, *self.answer_markers]
            found += [f"{entry['path']}: {marker}" for marker in markers if marker in text]
        return found

    def _walk_with_python(self, ctx: RunContext, task: Task) -> list[str]:
        wanted = {"names": sorted(GOLD_FILE_NAMES), "contents": [*GOLD_CONTENT, *self.answer_markers]}
        code = f"open('wanted.json', 'w').write({json.dumps(json.dumps(wanted))})\n" + WALK
        result = ctx.call_tool("execute_python", {"code": code})
        assert result.success, result.content
        report = json.loads(result.data["stdout"].strip().splitlines()[-1])
        assert report["read"] > 0  # the walk did read files (the Python runtime's own)
        return report["found"]


@pytest.fixture
def gold_hunter() -> Iterator[type[System]]:
    with registered_system(GoldHunter) as cls:
        yield cls


def dabstep(tmp_path: Path) -> tuple[str, Path]:
    return "dabstep", FIXTURES / "dabstep"


def fdabench(tmp_path: Path) -> tuple[str, Path]:
    """The sample's tasks with a SQLite file standing in for every BIRD database they name (only what
    the tools can reach matters here, not what the database holds)."""
    folder = tmp_path / "fdabench"
    shutil.copytree(FIXTURES / "fdabench", folder)
    for task in create_benchmark("fdabench", folder).load():
        for source in task.data:
            if source.kind == "sqlite" and source.location:
                Path(source.location).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(FIXTURES / "regional_sales.sqlite", source.location)
    return "fdabench", folder


def dab(tmp_path: Path) -> tuple[str, Path]:
    postgres_bin_dir_or_skip()
    folder = tmp_path / "query_bookreview"
    shutil.copytree(FIXTURES / "dab" / "query_bookreview", folder)
    return "dab", folder


@pytest.mark.slow  # a Python walk of the whole sandbox per benchmark (DAB also restores a pg_dump)
@pytest.mark.parametrize(
    "benchmark",
    [
        lambda tmp: ("bundled", None),
        fdabench,
        dabstep,
        dab,
        lambda tmp: ("dbgorilla", FIXTURES / "dbgorilla" / "queries-sample.json"),
    ],
    ids=["bundled", "fdabench", "dabstep", "dab", "dbgorilla"],
)
def test_no_tool_reaches_gold_material(tmp_path, scripted_model, gold_hunter, benchmark):
    name, path = benchmark(tmp_path)
    bench = create_benchmark(name, path)
    tasks = [task for task in bench.load() if not task.unavailable][:1]
    assert tasks, f"no available task in the {name} sample"
    scripted_model(lambda request, context: pytest.fail("the gold hunter asks no model"))
    gold = tasks[0].gold.answer if tasks[0].gold else None
    GoldHunter.answer_markers = [f'"answer": {json.dumps(gold)}'] if isinstance(gold, str) else []
    plan = make_plan(tmp_path, tasks, SCRIPTED, [GoldHunter.name], benchmark=bench, tools={"python_timeout_s": 300})
    execute(plan)

    (record,) = read_run(plan.run_dir).records
    assert record.status == "completed", record.error
    report = json.loads(record.answer["text"])
    assert report["found"] == [], report["found"]
    python_expected = name != "dbgorilla"  # DBGorilla's only tool is its prediction
    assert report["python"] == python_expected, report["tools"]
