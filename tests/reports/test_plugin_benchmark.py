"""Benchmark knowledge lives in the Benchmark: a plug-in declares its primary metric and its report tables, and
gets the same report treatment as a built-in one; reports name no benchmark (issue 28 item 2)."""

import ast
import json
import re
from pathlib import Path

import pytest

from data_agent_compare.core.benchmark import (
    BENCHMARKS,
    Benchmark,
    Loading,
    ReportLayout,
    ReportMetric,
    ReportTableSpec,
)
from data_agent_compare.reports import build_report

F1 = ReportMetric("token F1", ("f1",))


class ToyBench(Benchmark):
    """A toy benchmark that scores answers by token F1."""

    name = "toybench"
    loading = Loading(needs_path=False)
    layout = ReportLayout(
        primary_metric=F1,
        tables=(ReportTableSpec("metrics", "Toy: token F1 and its parts", (F1, ReportMetric("recall", ("recall",)))),),
    )

    def load(self):
        return []

    def tools(self, task, settings):
        return []


@pytest.fixture
def toybench():
    BENCHMARKS.register(ToyBench.name, ToyBench)
    yield ToyBench
    BENCHMARKS.unregister(ToyBench.name)


def toy_run(wide_run, name: str) -> Path:
    """A wide run re-labelled as the toy benchmark's, each record scored by f1 and recall."""
    run = wide_run(name, systems=3, models=("m1",), tasks=4)
    lines = []
    for number, line in enumerate((run / "results.jsonl").read_text().splitlines()):
        record = json.loads(line)
        record["benchmark"] = "toybench"
        record["scores"] = {"f1": (number % 4) / 4, "recall": 0.5}
        lines.append(json.dumps(record))
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["benchmark"] = manifest["config"]["benchmark"] = "toybench"
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_a_plugin_benchmark_gets_its_primary_metric_and_table_in_summary_and_report(tmp_path, wide_run, toybench):
    first, second = toy_run(wide_run, "one"), toy_run(wide_run, "two")
    files = build_report([first, second], tmp_path / "report")
    summary = files.files["summary"].read_text()
    header = next(line for line in summary.splitlines() if line.startswith("| system |"))
    assert "| token F1 |" in header  # its primary metric, a column of summary.md
    assert re.search(r"\| 0\.\d{3} \(n=4\) \|", summary)
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Toy: token F1 and its parts" in page and "recall" in page


def test_the_overview_across_benchmarks_shows_each_benchmarks_own_primary_metric(tmp_path, wide_run, toybench):
    files = build_report([toy_run(wide_run, "toy"), wide_run("bundled", systems=2, tasks=4)], tmp_path / "report")
    text = (tmp_path / "report" / "report.md").read_text()
    overview = text[text.index("Overview: every system × model × benchmark") :].split("\n\n")[1]
    metrics = {line.split(" | ")[2]: line.split(" | ")[3] for line in overview.splitlines()[2:]}
    assert metrics == {"toybench": "token F1", "bundled": "accuracy"}
    assert files.files["html"].exists()


def _string_constants(path: Path) -> list[str]:
    """Every string literal of a module except its docstrings (which may cite a paper by name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_no_benchmark_name_appears_in_the_reports_code():
    """Reports read what each benchmark declares; no string of theirs names a registered benchmark."""
    reports = Path(__file__).resolve().parents[2] / "reports"
    names = [name for name in BENCHMARKS.names() if name != "toybench"]
    assert {"dab", "dabstep", "dbgorilla", "fdabench", "bundled"} <= set(names)
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b", re.IGNORECASE)
    found = [
        f"{path.name}: {text!r}"
        for path in sorted(reports.glob("*.py"))
        for text in _string_constants(path)
        if pattern.search(text)
    ]
    assert found == []
