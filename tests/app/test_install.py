"""A non-editable `pip install .` works from any directory: configuration, the bundled benchmark and
the registries all come from the installed package, not from a checkout."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

LEFT_OUT = (".git", ".venv", ".cache", "runs", "build", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache")


@pytest.mark.slow
def test_a_non_editable_install_runs_from_any_directory(tmp_path):
    source, target, elsewhere = tmp_path / "source", tmp_path / "site", tmp_path / "elsewhere"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*LEFT_OUT))  # a build writes next to its sources
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    subprocess.run([*pip, "--disable-pip-version-check", "--target", str(target), str(source)], check=True)
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}

    def compare(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "data_agent_compare.cli", *args], cwd=elsewhere, env=env, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    where = subprocess.run(
        [sys.executable, "-c", "import data_agent_compare; print(data_agent_compare.__file__)"],
        cwd=elsewhere, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip().startswith(str(target))  # the installed copy answers, not the checkout
    models = {row["alias"]: row for row in json.loads(compare("models", "--json"))}
    assert models["local"]["provider"] == "local"  # configs/models.yaml shipped as package data
    assert json.loads(compare("tasks", "--benchmark", "bundled", "--json"))["tasks"] == 37
    assert {row["name"] for row in json.loads(compare("systems", "--json"))} >= {"tool_use", "multi_agent"}


def test_every_package_folder_is_listed_for_installation():
    """A folder with an __init__.py that pyproject.toml does not list is left out of a non-editable install."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    folders = set()
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if not d.startswith((".", "_")) and d not in ("tests", "build", "docs")]
        if "__init__.py" in files:
            folders.add(".".join(("data_agent_compare", *Path(folder).relative_to(ROOT).parts)))
    assert folders - listed == set()
