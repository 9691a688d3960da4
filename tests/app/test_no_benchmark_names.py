"""The application names no benchmark (issue 28): what differs between benchmarks is declared by each
Benchmark in tasks/, and engine/ and cli/ ask it. The one name allowed is the run's default benchmark."""

from __future__ import annotations

import ast
from pathlib import Path

from data_agent_compare.core import BENCHMARKS
from data_agent_compare.engine.config import RunConfig

ROOT = Path(__file__).resolve().parents[2]
APPLICATION = ("engine", "cli")


def test_no_string_in_the_application_is_a_benchmark_name_but_the_default_one():
    names = set(BENCHMARKS.names())
    assert {"dab", "dabstep", "dbgorilla", "fdabench", "bundled"} <= names
    found = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
        for folder in APPLICATION
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    ]
    default = RunConfig.model_fields["benchmark"].default
    assert [f for f in found if not (f.startswith("engine/config.py:") and f.endswith(repr(default)))] == []
    assert len(found) == 1  # the default, said once
