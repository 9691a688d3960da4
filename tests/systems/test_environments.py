"""Systems in environments of their own (systems/environments.py): built once from the registry into a cache
keyed by the requirements' hash, reused without any install, their resolved versions in the manifest, and the
system run with that environment's interpreter."""

from __future__ import annotations

import shutil

import pytest

from data_agent_compare.core import SYSTEMS, QuestionType
from data_agent_compare.systems import environments
from data_agent_compare.systems.environments import Requirements, ensure_environment
from data_agent_compare.systems.external import external_system

from helpers import load_tasks, run_task

TINY = Requirements(python=("six==1.17.0",))  # a one-file package: the build's time is the machinery's


def test_environment_is_built_once_and_reused_without_an_install(tmp_path, monkeypatch):
    cold = ensure_environment(TINY, tmp_path)
    assert cold.build_s is not None and cold.resolved["python"]["six"] == "1.17.0"
    assert cold.python is not None and cold.python.is_file()

    def no_install(argv, env):
        raise AssertionError(f"a reused environment ran {argv}")

    monkeypatch.setattr(environments, "_run", no_install)
    warm = ensure_environment(TINY, tmp_path)
    assert warm.build_s is None and warm.path == cold.path and warm.resolved == cold.resolved


def test_requirements_key_depends_on_what_is_installed_only():
    assert Requirements(python=("a", "b")).key() == Requirements(python=("b", "a")).key()
    assert Requirements(python=("a==1",)).key() != Requirements(python=("a==2",)).key()
    assert Requirements(python=("a",), installer="pip").key() != Requirements(python=("a",)).key()


def test_failed_build_names_the_requirement_and_leaves_nothing_behind(tmp_path):
    broken = Requirements(python=("this-package-does-not-exist-dac==0.0.1",))
    with pytest.raises(environments.EnvironmentBuildError, match="this-package-does-not-exist-dac"):
        ensure_environment(broken, tmp_path)
    assert not (tmp_path / broken.key()).exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def test_scripted_external_system_runs_in_its_environment_and_the_manifest_records_resolved_versions(
    tmp_path, scripted_model, monkeypatch
):
    monkeypatch.setenv(environments.CACHE_VARIABLE, str(tmp_path / "envs"))
    name = "test_scripted_in_own_env"
    external_system(name, ["{python}", "-c", "import six, sys; print(six.__version__)"], python=list(TINY.python))
    try:
        task = next(t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID)
        model = scripted_model(lambda request, context: pytest.fail("this agent asks no model"))
        record, _, manifest = run_task(tmp_path, model, task, name)
    finally:
        SYSTEMS.unregister(name)

    assert record["status"] == "completed", record["error"]
    assert record["answer"]["text"] == "1.17.0"  # six is not in the suite's environment: it ran in its own
    described = manifest["systems"][name]
    assert described["environment"]["resolved"]["python"]["six"] == "1.17.0"
    assert described["requirements"] == {"python": ["six==1.17.0"], "node": []}


@pytest.mark.skipif(shutil.which("npm") is None, reason="no npm on this machine")
def test_node_environment_is_built_once_with_its_resolved_versions(tmp_path):
    needs = Requirements(node=("left-pad@1.3.0",))
    cold = ensure_environment(needs, tmp_path)
    assert cold.resolved["node"] == {"left-pad": "1.3.0"}
    assert cold.node_modules is not None and (cold.node_modules / "left-pad" / "package.json").is_file()
    assert ensure_environment(needs, tmp_path).build_s is None
