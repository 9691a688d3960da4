"""Statistics for comparing systems: bootstrap intervals, paired tests, pass@k, stratified means.

- `bootstrap_ci`: percentile bootstrap interval of a mean.
- `paired_bootstrap`: the mean difference of two systems scored on the same tasks, its
  interval, and a two-sided bootstrap p-value (never below its resolution 1/(B+1); for fewer than
  `BOOTSTRAP_MIN_TASKS` tasks a bootstrap has too few distinct resamples to give a p-value at all, and
  the reports use the exact test alone).
- `paired_exact`: the exact paired test that fits the data, named by what it is: exact McNemar when every
  task has one 0/1 verdict per side, else the exact sign test on per-task mean differences (tasks run
  several times: repeating a task must not count as more evidence than one task). Both are the exact
  binomial test on the discordant tasks, at any n (no chi-square approximation).
- `sign_test`: the discordant-task test itself, on given per-task differences.
- `holm`: Holm–Bonferroni adjusted p-values of a family of tests (several pairwise comparisons).
- `pass_at_k`: the unbiased pass@k estimator of Chen et al. (2021).
- `stratified_mean`: mean per group, then the unweighted mean of the group means;
  `stratified_bootstrap_ci` its interval, each group resampled within itself.

Every resampling function is deterministic for a given seed (numpy's PCG64 generator). Values with
few distinct levels (at most `LEVELS_RESAMPLED_AS_COUNTS`: 0/1 scores, per-task means over a few
epochs, rubric grades) are resampled as counts per level: the counts of each level in a resample of
n tasks drawn with replacement are Multinomial(n, level frequencies), so the resampled means have
exactly the distribution of resampling tasks, drawn in O(resamples × levels) instead of
O(resamples × n) (2,520 tasks: ~2 ms instead of ~0.15 s). The same seed then draws other resamples
than resampling indices would: intervals agree up to Monte-Carlo error (tested), not bit for bit.
Values with more levels are resampled by index, as before.
Fewer than two observations give NaN interval bounds (and p-value): one value carries no
information about spread, and a degenerate [v, v] interval would look like certainty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

MAX_DRAWS_PER_CHUNK = 2_000_000  # resample indices drawn at once, so large inputs stay within memory
BOOTSTRAP_MIN_TASKS = 20  # fewer paired tasks: no bootstrap p-value (too few distinct resamples), exact test only
LEVELS_RESAMPLED_AS_COUNTS = 16  # at most this many distinct values: resample counts per value (module docstring)


class BootstrapCI(NamedTuple):
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class PairedResult:
    """a − b on aligned tasks: mean difference, its interval, two-sided p-value of ≠ 0."""

    mean_difference: float
    low: float
    high: float
    p_value: float
    n: int


@dataclass(frozen=True)
class ExactTestResult:
    """b01: tasks where b is better (a wrong and b right); b10: where a is better. `test` names it:
    "exact McNemar" (one 0/1 verdict per task and side) or "exact sign test" (per-task means)."""

    b01: int
    b10: int
    p_value: float
    test: Literal["exact McNemar", "exact sign test"]


def _as_array(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise ValueError("values must be a flat sequence of finite numbers")
    return array


def _check(confidence: float, resamples: int) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")


def _bootstrap_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """Means of `resamples` samples drawn with replacement, each of size len(values)."""
    rng = np.random.default_rng(seed)
    n = len(values)
    levels, counts = np.unique(values, return_counts=True)
    if len(levels) <= LEVELS_RESAMPLED_AS_COUNTS:  # the same distribution, drawn as counts per level
        return rng.multinomial(n, counts / n, size=resamples) @ levels / n
    chunk = max(1, MAX_DRAWS_PER_CHUNK // n)
    index = np.int32 if n < 2**31 else np.int64  # the same draws as int64 indices, gathered faster
    means = [
        values[rng.integers(0, n, size=(min(chunk, resamples - start), n), dtype=index)].mean(axis=1)
        for start in range(0, resamples, chunk)
    ]
    return np.concatenate(means)


def _percentiles(means: np.ndarray, confidence: float) -> tuple[float, float]:
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> BootstrapCI:
    """(sample mean, low, high): the (1 − confidence)/2 and (1 + confidence)/2 percentiles of
    the means of `resamples` resamples with replacement.

    No values: (NaN, NaN, NaN). One value: (value, NaN, NaN).
    """
    _check(confidence, resamples)
    array = _as_array(values)
    if len(array) == 0:
        return BootstrapCI(math.nan, math.nan, math.nan)
    mean = float(array.mean())
    if len(array) == 1:
        return BootstrapCI(mean, math.nan, math.nan)
    return BootstrapCI(mean, *_percentiles(_bootstrap_means(array, resamples, seed), confidence))


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> PairedResult:
    """Paired bootstrap of d = a − b, where a[i] and b[i] are the scores of the same task.

    Tasks are resampled (pairs stay together). The interval is the percentile interval of
    the resampled mean differences d*. The p-value tests mean(d) ≠ 0 with the bootstrap
    distribution shifted to the null (centred on 0):
    p = (1 + #{|d* − mean(d)| ≥ |mean(d)|}) / (resamples + 1); the +1 keeps p above 0.
    Fewer than two tasks: NaN interval and p-value.
    """
    _check(confidence, resamples)
    first, second = _as_array(a), _as_array(b)
    if len(first) != len(second):
        raise ValueError(f"a and b must be aligned by task: {len(first)} vs {len(second)} values")
    differences = first - second
    n = len(differences)
    if n < 2:
        mean = float(differences.mean()) if n else math.nan
        return PairedResult(mean, math.nan, math.nan, math.nan, n)
    mean = float(differences.mean())
    means = _bootstrap_means(differences, resamples, seed)
    extreme = int(np.count_nonzero(np.abs(means - mean) >= abs(mean)))
    p_value = (1 + extreme) / (resamples + 1)
    return PairedResult(mean, *_percentiles(means, confidence), p_value=p_value, n=n)


def _binomial_two_sided(successes: int, trials: int) -> float:
    """Exact two-sided p-value of `successes` under Binomial(trials, 1/2): 2·P(X ≤ min(k, n−k)), capped at 1."""
    smaller = min(successes, trials - successes)
    tail = sum(math.comb(trials, i) for i in range(smaller + 1)) / 2**trials
    return min(1.0, 2 * tail)


def paired_exact(a: Sequence[float], b: Sequence[float], *, repeated: bool = False) -> ExactTestResult:
    """The exact paired test of a vs b (aligned by task): exact McNemar when every value is one 0/1 verdict
    (`repeated`: the values are means over a task's several trials, so they are not), else the exact sign
    test on the per-task differences; ties count for neither side.
    p = 2·P(X ≤ min(b01, b10)), X ~ Binomial(b01 + b10, 1/2), capped at 1; no discordant task: p = 1."""
    first, second = _as_array(a), _as_array(b)
    if len(first) != len(second):
        raise ValueError(f"a and b must be aligned by task: {len(first)} vs {len(second)} values")
    binary = not repeated and bool(np.isin(first, (0.0, 1.0)).all() and np.isin(second, (0.0, 1.0)).all())
    result = sign_test(first - second)
    return ExactTestResult(result.b01, result.b10, result.p_value, "exact McNemar" if binary else "exact sign test")


def sign_test(differences: Sequence[float]) -> ExactTestResult:
    """The exact sign test on per-task differences a − b: tasks where b is better count as b01, those where
    a is better as b10, ties not at all (with 0/1 verdicts, McNemar's exact test)."""
    values = _as_array(differences)
    b01, b10 = int(np.count_nonzero(values < 0)), int(np.count_nonzero(values > 0))
    return ExactTestResult(b01, b10, _binomial_two_sided(b01, b01 + b10), "exact sign test")


def bootstrap_p_resolution(resamples: int) -> float:
    """The smallest p-value a bootstrap of `resamples` resamples can give: 1/(resamples + 1)."""
    return 1 / (resamples + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values, in the order given: the i-th smallest of m raw p-values is
    multiplied by m − i + 1 (i from 1), made non-decreasing in that order and capped at 1. Rejecting where
    the adjusted p < α keeps the family-wise error rate at α over all m tests. A NaN stays NaN and is not
    counted among the m tests."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if not math.isnan(p))
    adjusted = [math.nan] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(tested):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[i] = running
    return adjusted


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n trials of which c passed: 1 − C(n−c, k) / C(n, k).

    That is the probability that k trials drawn without replacement from the n include at
    least one pass: 1.0 when n − c < k (every draw of k holds a pass), 0.0 when c = 0.
    Requires n ≥ 1, 0 ≤ c ≤ n and 1 ≤ k ≤ n; anything else is a ValueError.
    """
    if n < 1:
        raise ValueError(f"pass@k needs at least one trial, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"the number of passing trials must lie in [0, n={n}], got c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must lie in [1, n={n}], got k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)  # exact integers, one correctly rounded division


def stratified_mean(values_by_group: Mapping[str, Sequence[float]]) -> float:
    """The mean of each group, then the unweighted mean of those means (every group counts
    equally, whatever its size). No groups: NaN. An empty group is a ValueError, because
    dropping it silently would change the other groups' weights."""
    if not values_by_group:
        return math.nan
    empty = sorted(group for group, values in values_by_group.items() if len(values) == 0)
    if empty:
        raise ValueError(f"groups without values: {empty}")
    return float(np.mean([np.mean(_as_array(values)) for values in values_by_group.values()]))


def stratified_bootstrap_ci(
    values_by_group: Mapping[str, Sequence[float]], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> BootstrapCI:
    """(stratified mean, low, high): each group is resampled with replacement within itself (its size
    kept), the group means are averaged with equal weights, and the interval is the percentile interval
    of those stratified means. Groups are told apart by name, sorted, each with a seed of its own.

    No groups: NaN everywhere. When no group has two values there is nothing to resample: NaN bounds (a
    group of one value adds its value to every resample, without spread). An empty group: ValueError.
    """
    _check(confidence, resamples)
    mean = stratified_mean(values_by_group)
    if not values_by_group or all(len(values) < 2 for values in values_by_group.values()):
        return BootstrapCI(mean, math.nan, math.nan)
    seeds = np.random.SeedSequence(seed).spawn(len(values_by_group))
    means = np.zeros(resamples)
    for (_, values), child in zip(sorted(values_by_group.items()), seeds, strict=True):
        array = _as_array(values)
        group_seed = int(child.generate_state(1)[0])
        means += _bootstrap_means(array, resamples, group_seed) if len(array) > 1 else float(array[0])
    return BootstrapCI(mean, *_percentiles(means / len(values_by_group), confidence))
