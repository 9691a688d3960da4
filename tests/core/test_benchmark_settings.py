"""A benchmark's settings come in three typed groups (loading, scoring rules, report layout); a plug-in benchmark
written before them, setting the former class variables, is read into the groups with a DeprecationWarning, and
the former names still read from the groups for code that has not moved to them."""

from __future__ import annotations

import warnings
from dataclasses import FrozenInstanceError

import pytest

from data_agent_compare.core.benchmark import (
    ACCURACY,
    BENCHMARKS,
    GENERIC_TABLES,
    Benchmark,
    BenchmarkError,
    Loading,
    ReportLayout,
    ReportMetric,
    ScoringRules,
)

F1 = ReportMetric("token F1", ("f1",))


class Grouped(Benchmark):
    name = "test_grouped"
    loading = Loading(needs_path=False, harness={"budgets": {"max_steps": 3}})
    scoring = ScoringRules(scorers=("exact_match",), rules={"old": ("rouge",)}, published_digits=4)
    layout = ReportLayout(primary_metric=F1)

    def load(self):
        return []

    def tools(self, task, settings):
        return []


def test_grouped_settings_are_what_the_former_names_read_and_the_rest_keep_their_defaults() -> None:
    assert (Grouped.scorers, Grouped.rules, Grouped.published_digits) == (("exact_match",), {"old": ("rouge",)}, 4)
    assert (Grouped.needs_path, Grouped.harness, Grouped.primary_metric) == (False, {"budgets": {"max_steps": 3}}, F1)
    assert (Grouped.report_tables, Grouped.run_scorers, Grouped.aggregate_rule) == (GENERIC_TABLES, (), "")
    assert (Benchmark.primary_metric, Benchmark.needs_path, Benchmark.scorers) == (ACCURACY, True, ())
    with pytest.raises(FrozenInstanceError):
        Grouped.scoring.scorers = ("rouge",)  # type: ignore[misc]


def test_every_registered_benchmark_declares_its_settings_grouped_without_a_deprecation_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        classes = {name: BENCHMARKS.load(name) for name in ("bundled", "fdabench", "dabstep", "dab", "dbgorilla")}
    assert classes["dab"].loading.harness["budgets"]["max_steps"] == 100
    assert classes["dbgorilla"].scoring.rules == {"ast-2024-11": ("dbgorilla_ast_2024_11", "tool_success")}
    assert classes["bundled"].scoring == classes["fdabench"].scoring and not classes["bundled"].loading.needs_path
    assert all("tool_success" in cls.scoring.run_scorers for cls in classes.values())


def test_a_plugin_benchmark_written_the_old_way_still_works_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"OldStyle sets needs_path, primary_metric, scorers"):

        class OldStyle(Benchmark):
            name = "test_old_style"
            needs_path = False
            scorers = ("exact_match", "tool_success")
            primary_metric = F1

            def load(self):
                return []

            def tools(self, task, settings):
                return []

    assert OldStyle.scoring == ScoringRules(scorers=("exact_match", "tool_success"))
    assert OldStyle.layout.primary_metric == F1 and OldStyle.loading.needs_path is False
    assert OldStyle.scorers == ("exact_match", "tool_success")
    assert OldStyle().load() == []  # needs_path read from its class variable: no --tasks-path needed


def test_a_subclass_of_a_grouped_benchmark_changes_one_setting_and_inherits_the_rest() -> None:
    class Narrower(Grouped):
        name = "test_narrower"
        scoring = ScoringRules(scorers=("rouge",))

    assert Narrower.scorers == ("rouge",) and Narrower.primary_metric == F1 and not Narrower.needs_path
    with pytest.raises(BenchmarkError, match="needs its task files"):
        type("NeedsFiles", (Grouped,), {"name": "test_needs_files", "loading": Loading()})()
