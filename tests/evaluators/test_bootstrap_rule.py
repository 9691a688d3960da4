"""The bootstrap's two ways of resampling (evaluators/statistics.py): counts per level for values with
few distinct levels, indices otherwise. The first draws the same distribution as the second; the second
gives the same intervals as before counts per level existed."""

from __future__ import annotations

import time

import numpy as np
import pytest

from data_agent_compare.evaluators.statistics import (
    LEVELS_RESAMPLED_AS_COUNTS,
    _bootstrap_means,
    _percentiles,
    bootstrap_ci,
    paired_bootstrap,
)


def index_bootstrap(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Resampling tasks by index, as `_bootstrap_means` always did (numpy's default int64 indices)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    chunk = max(1, 2_000_000 // n)
    draws = [rng.integers(0, n, size=(min(chunk, resamples - s), n)) for s in range(0, resamples, chunk)]
    return np.concatenate([values[d].mean(axis=1) for d in draws])


def test_values_with_many_levels_keep_the_intervals_of_index_resampling() -> None:
    values = np.random.default_rng(5).random(700)  # ROUGE-like scores: every value distinct
    for seed in (0, 1, 42):
        old = _percentiles(index_bootstrap(values, 10_000, seed), 0.95)
        assert tuple(bootstrap_ci(values, seed=seed))[1:] == old  # bit for bit


@pytest.mark.parametrize("levels", [[0.0, 1.0], [0.0, 1 / 3, 2 / 3, 1.0], [1.0, 2.0, 3.0, 4.0, 5.0], [-1.0, 0.0, 1.0]])
def test_counts_per_level_draw_the_distribution_of_index_resampling(levels: list[float]) -> None:
    rng = np.random.default_rng(11)
    values = rng.choice(levels, size=400, p=np.linspace(1, 2, len(levels)) / np.linspace(1, 2, len(levels)).sum())
    counted = _bootstrap_means(values, 40_000, seed=3)
    indexed = index_bootstrap(values, 40_000, seed=3)
    expected_sd = values.std() / np.sqrt(len(values))  # the bootstrap mean's standard deviation, exactly
    for draws in (counted, indexed):
        assert abs(draws.mean() - values.mean()) < 0.05 * expected_sd
        assert abs(draws.std() / expected_sd - 1) < 0.02
    for q in (2.5, 25, 50, 75, 97.5):  # the same quantiles up to Monte-Carlo error
        assert abs(np.percentile(counted, q) - np.percentile(indexed, q)) < 0.06 * expected_sd + 1 / len(values)


def test_counts_per_level_are_deterministic_and_exact_for_zero_one_scores() -> None:
    values = (np.random.default_rng(2).random(2520) < 0.6).astype(float)
    assert len(np.unique(values)) <= LEVELS_RESAMPLED_AS_COUNTS
    assert bootstrap_ci(values, seed=9) == bootstrap_ci(values, seed=9) != bootstrap_ci(values, seed=10)
    means = _bootstrap_means(values, 1000, seed=0)
    assert np.allclose(means * 2520, np.round(means * 2520), rtol=0, atol=1e-9)  # a count of ones over n
    result = paired_bootstrap(values, values[::-1].copy(), seed=1)
    assert result.low < result.mean_difference < result.high


def test_thirteen_metrics_of_2520_tasks_take_well_under_a_second() -> None:
    rng = np.random.default_rng(0)
    metrics = [(rng.random(2520) < p).astype(float) for p in np.linspace(0.1, 0.9, 13)]
    start = time.perf_counter()
    for values in metrics:
        bootstrap_ci(values)
    assert time.perf_counter() - start < 1.0  # ~0.03 s here; resampling indices took ~2 s (a shared machine: margin)
