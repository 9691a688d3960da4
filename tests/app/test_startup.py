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
    "transformers",
    "sentence_transformers",
    "pandas",
    "altair",
    "vl_convert",
    "httpx",
    "openai",
    "openrouter",
    "litellm",
    "langchain",
    "langchain_core",
    "langgraph",
    "autogen_agentchat",
    "llama_index",
    "lotus",
    "docetl",
    "palimpzest",
    "http.server",
    "data_agent_compare.engine.runner",
    "data_agent_compare.reports",
]
# What only a command needs, not `compare --help`: the core's pydantic models, the run configuration (YAML)
# and the run log. The root package serves the core's names on first use.
CORE = ["pydantic", "yaml", "data_agent_compare.core", "data_agent_compare.engine.config"]


def loaded_after(code: str, watched: list[str] = HEAVY) -> list[str]:
    probe = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_the_cli_loads_no_tool_backend_scorer_library_runner_or_report() -> None:
    assert loaded_after("import data_agent_compare.cli.main") == []


def test_help_loads_none_of_them_either() -> None:
    code = (
        "from data_agent_compare.cli.main import app\n"
        "try:\n    app(['--help'], prog_name='compare')\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code) == []


def test_help_loads_neither_the_core_nor_the_configuration() -> None:
    code = (
        "from data_agent_compare.cli.main import app\n"
        "try:\n    app(['--help'], prog_name='compare')\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code, CORE) == []


def test_the_root_package_serves_the_core_api_on_first_use() -> None:
    assert loaded_after("import data_agent_compare", CORE) == []
    code = "from data_agent_compare import *\nassert Task.__name__ == 'Task' and callable(register_system)"
    assert "data_agent_compare.core" in loaded_after(code, CORE)


def test_the_reports_package_is_not_shadowed_by_the_scorer_decorator() -> None:
    code = (
        "import types\nfrom data_agent_compare import reports, reports_metrics\n"
        "assert isinstance(reports, types.ModuleType) and reports.__name__ == 'data_agent_compare.reports'\n"
        "assert callable(reports_metrics) and not isinstance(reports_metrics, types.ModuleType)"
    )
    assert "data_agent_compare.reports" in loaded_after(code)


def test_the_tools_package_loads_its_backends_on_first_use() -> None:
    assert loaded_after("import data_agent_compare.tools") == []
    assert "duckdb" in loaded_after("from data_agent_compare.tools import SqlTool")


def test_scoring_without_a_gold_dag_does_not_load_networkx() -> None:
    assert loaded_after("import data_agent_compare.evaluators.dag") == []  # `tool_success` needs no graph
