"""Registries: names resolve lazily to "module:Class" targets or registered objects, clashes and unknown
names are refused with what a user needs to fix them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from data_agent_compare.core import BENCHMARKS, PROVIDERS, SCORERS, SYSTEMS, Registry, RegistryError


def test_the_suites_own_names_come_from_its_entry_points():
    assert {"tool_use", "planning", "planning_static", "reflection", "multi_agent"} <= set(SYSTEMS.names())
    assert set(BENCHMARKS.names()) >= {"bundled", "fdabench", "dabstep", "dab", "dbgorilla"}
    assert set(PROVIDERS.names()) >= {"local", "openrouter", "openai-compatible"}
    assert set(SCORERS.names()) >= {"exact_match", "dabstep", "dab", "dbgorilla", "rouge", "rubric", "tool_dag"}
    assert SYSTEMS.entries()["tool_use"].origin == "entry point of data-agent-compare"


def test_a_string_target_is_imported_only_when_its_name_is_first_used(tmp_path: Path, monkeypatch):
    (tmp_path / "lazy_target_module.py").write_text("class Thing:\n    answer = 42\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry: Registry[type] = Registry("things")
    registry.register("thing", "lazy_target_module:Thing")

    assert "lazy_target_module" not in sys.modules
    assert registry.load("thing").answer == 42
    assert "lazy_target_module" in sys.modules
    sys.modules.pop("lazy_target_module")


def test_unknown_names_list_what_is_registered():
    registry: Registry[object] = Registry("widgets")
    registry.register("gear", object())
    with pytest.raises(RegistryError, match=r"unknown widget 'cog'; registered: gear"):
        registry.load("cog")


def test_a_target_that_cannot_be_imported_names_the_entry():
    registry: Registry[object] = Registry("widgets")
    registry.register("ghost", "no_such_module_anywhere:Ghost", origin="entry point of ghost-dist")
    with pytest.raises(
        RegistryError, match=r"widget 'ghost' \(no_such_module_anywhere:Ghost, entry point of ghost-dist\)"
    ):
        registry.load("ghost")


def test_two_targets_under_one_name_are_refused_but_the_same_one_twice_is_not():
    class First:
        pass

    class Second:
        pass

    registry: Registry[type] = Registry("widgets")
    registry.register("w", First)
    registry.register("w", First)  # the same object again, e.g. a module imported twice
    with pytest.raises(RegistryError, match="widget name 'w' is registered twice"):
        registry.register("w", Second)
    registry.unregister("w")
    registry.register("w", Second)
    assert registry.load("w") is Second


def test_registering_the_class_an_entry_point_names_is_not_a_clash():
    entry = SYSTEMS.entries()["tool_use"]
    cls = SYSTEMS.load("tool_use")
    SYSTEMS.register("tool_use", cls)  # what a decorator on the built-in class would do
    try:
        assert SYSTEMS.load("tool_use") is cls and SYSTEMS.entries()["tool_use"].path == entry.path
    finally:
        SYSTEMS.unregister("tool_use")
    assert SYSTEMS.entries()["tool_use"].origin == entry.origin


@pytest.mark.parametrize("name", ["../up", "a/b", "a,b", "two words", ".hidden", "-x", "+x", "", "x" * 65, "tab\t"])
def test_a_name_that_would_make_a_path_or_split_a_list_is_refused(name: str) -> None:
    registry: Registry[object] = Registry("widgets")
    with pytest.raises(RegistryError, match=r"widget name .* is not a name: a name is 1 to 64 letters"):
        registry.register(name, object())
    assert registry.names() == []


@pytest.mark.parametrize("name", ["tool_use", "gpt-5", "v1.2", "a+b", "X" * 64, "_private"])
def test_names_of_letters_digits_and_a_few_marks_are_taken(name: str) -> None:
    registry: Registry[object] = Registry("widgets")
    registry.register(name, object())
    assert registry.names() == [name]
