"""The CLI starts without loading what only a run, a score or a report needs (`compare --help` in < 0.5 s
on a quiet machine): tool backends, scorers' libraries, the runner and the reports load on first use."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = [
    "networkx",
    "duckdb",
    "psycopg",
    "sqlglot",
    "faiss",
    "mongomock",
    "numpy",
    "rouge_score",
    "nltk",
    "scipy",
    "jsonschema",
    "llama_cpp",
    "torch",
    "http.server",
    "data_agent_compare.app.runner",
    "data_agent_compare.reports",
]


def loaded_after(code: str) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_no_tool_backend_scorer_library_runner_or_report() -> None:
    assert loaded_after("import data_agent_compare.app.cli") == []


def test_help_loads_none_of_them_either() -> None:
    code = (
        "from data_agent_compare.app.cli import app\n"
        "try:\n    app(['--help'], prog_name='compare')\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code) == []


def test_the_tools_package_loads_its_backends_on_first_use() -> None:
    assert loaded_after("import data_agent_compare.tools") == []
    assert "duckdb" in loaded_after("from data_agent_compare.tools import SqlTool")


def test_scoring_without_a_gold_dag_does_not_load_networkx() -> None:
    assert loaded_after("import data_agent_compare.evaluators.dag") == []  # `tool_success` needs no graph
