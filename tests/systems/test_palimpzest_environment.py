"""Palimpzest runs in an environment built by the suite's mechanism (systems/environments.py): its worker's Python
is the cached environment of its requirements, and the manifest records that environment's resolved versions."""

from __future__ import annotations

import json
import sys

from data_agent_compare.core import create_system
from data_agent_compare.systems import palimpzest_system
from data_agent_compare.systems.environments import CACHE_VARIABLE, RESOLVED_FILE


def fake_built_environment(root, resolved):
    """A complete cache entry for palimpzest's requirements (its Python: this one), as a build leaves it."""
    place = root / palimpzest_system.REQUIREMENTS.key()
    (place / "venv" / "bin").mkdir(parents=True)
    (place / "venv" / "bin" / "python").symlink_to(sys.executable)
    (place / RESOLVED_FILE).write_text(json.dumps({"python": resolved}))
    return place


def test_palimpzest_worker_runs_in_the_cached_environment_and_the_manifest_records_its_versions(tmp_path, monkeypatch):
    monkeypatch.delenv(palimpzest_system.PYTHON_VARIABLE, raising=False)
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    place = fake_built_environment(tmp_path, {"palimpzest": "0.9.0", "torch": "2.13.0+cpu", "numpy": "2.0.2"})

    assert palimpzest_system.worker_python() == place / "venv" / "bin" / "python"
    described = create_system("palimpzest").describe()
    assert described["environment"]["resolved"]["python"]["palimpzest"] == "0.9.0"
    assert described["requirements"]["python"] == ["torch==2.13.0", "palimpzest==0.9.0"]
    assert described["refused"] is None


def test_palimpzest_python_variable_still_overrides_the_cached_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(CACHE_VARIABLE, str(tmp_path))
    fake_built_environment(tmp_path, {"palimpzest": "0.9.0"})
    monkeypatch.setenv(palimpzest_system.PYTHON_VARIABLE, sys.executable)
    assert str(palimpzest_system.worker_python()) == sys.executable
    assert create_system("palimpzest").describe()["environment"] is None
