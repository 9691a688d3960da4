"""Statistics: pass@k, bootstrap intervals, the paired bootstrap, the exact paired tests and stratified means."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from data_agent_compare.evaluators.statistics import (
    bootstrap_ci,
    bootstrap_p_resolution,
    holm,
    paired_bootstrap,
    paired_exact,
    pass_at_k,
    stratified_bootstrap_ci,
    stratified_mean,
)

# ---------------------------------------------------------------- pass@k


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # pass@1 is c/n
        (5, 2, 2, 1 - 3 / 10),  # 1 − C(3,2)/C(5,2) = 0.7
        (10, 3, 5, 1 - 21 / 252),  # 1 − C(7,5)/C(10,5)
        (5, 0, 3, 0.0),
        (5, 5, 1, 1.0),
        (5, 4, 2, 1.0),  # n − c < k: every pair of trials holds a pass
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("n", "c", "k"), [(5, 2, 6), (5, 2, 0), (5, 6, 1), (5, -1, 1), (0, 0, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_is_the_chance_that_k_drawn_trials_include_a_pass(args):
    n, c, k = args
    draws = list(itertools.combinations(range(n), k))  # trials 0..c-1 are the passing ones
    expected = sum(any(i < c for i in draw) for draw in draws) / len(draws)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_matches_the_codex_product_form_for_large_n():
    n, c, k = 200, 37, 10
    product = 1 - np.prod(1 - k / np.arange(n - c + 1, n + 1))
    assert pass_at_k(n, c, k) == pytest.approx(product, rel=1e-12)


# ---------------------------------------------------------------- bootstrap_ci


def test_bootstrap_interval_contains_the_mean_and_has_the_expected_width():
    values = np.random.default_rng(1).normal(0.0, 1.0, 400)
    mean, low, high = bootstrap_ci(values)
    assert mean == pytest.approx(values.mean())
    assert low < mean < high
    standard_error = values.std(ddof=1) / math.sqrt(len(values))
    assert high - low == pytest.approx(2 * 1.96 * standard_error, rel=0.1)


def test_bootstrap_interval_narrows_with_more_data():
    small = np.random.default_rng(2).integers(0, 2, 30).astype(float)
    _, low_small, high_small = bootstrap_ci(small)
    _, low_large, high_large = bootstrap_ci(np.tile(small, 16))  # same mean, 16× the tasks
    assert high_large - low_large < (high_small - low_small) / 3


def test_bootstrap_is_deterministic_by_seed():
    values = list(np.random.default_rng(6).random(20))
    assert bootstrap_ci(values, resamples=500, seed=7) == bootstrap_ci(values, resamples=500, seed=7)
    assert bootstrap_ci(values, resamples=500, seed=7) != bootstrap_ci(values, resamples=500, seed=8)


def test_wider_confidence_gives_a_wider_interval():
    values = np.random.default_rng(3).random(50)
    _, low_90, high_90 = bootstrap_ci(values, confidence=0.9)
    _, low_99, high_99 = bootstrap_ci(values, confidence=0.99)
    assert low_99 < low_90 and high_99 > high_90


def test_bootstrap_edge_cases():
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    mean, low, high = bootstrap_ci([0.7])
    assert mean == 0.7 and math.isnan(low) and math.isnan(high)
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0, 1.0)
    for bad in ({"confidence": 1.0}, {"confidence": 0.0}, {"resamples": 0}):
        with pytest.raises(ValueError):
            bootstrap_ci([1.0, 2.0], **bad)
    with pytest.raises(ValueError, match="finite"):
        bootstrap_ci([1.0, math.nan])


# ---------------------------------------------------------------- paired bootstrap


def test_paired_bootstrap_detects_a_real_difference():
    rng = np.random.default_rng(4)
    b = rng.random(60)
    a = b + 0.1 + rng.normal(0, 0.05, 60)  # a beats b on (almost) every task
    result = paired_bootstrap(a, b, resamples=2000, seed=0)
    assert result.n == 60
    assert result.mean_difference == pytest.approx(float(np.mean(a - b)))
    assert 0 < result.low < result.mean_difference < result.high
    assert result.p_value < 0.01


def test_paired_bootstrap_finds_no_difference_between_equivalent_systems():
    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 2, 80).astype(float), rng.integers(0, 2, 80).astype(float)
    a[:] = np.where(rng.random(80) < 0.5, a, b)  # same accuracy by construction, different tasks right
    result = paired_bootstrap(a, b, resamples=2000, seed=0)
    assert result.low < 0 < result.high or result.mean_difference == 0
    assert result.p_value > 0.05
    identical = paired_bootstrap(b, b, resamples=500)
    assert identical.mean_difference == 0 and identical.p_value == 1.0


def test_paired_bootstrap_is_deterministic_and_checks_alignment():
    a, b = [1.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 0.0]
    assert paired_bootstrap(a, b, resamples=300, seed=3) == paired_bootstrap(a, b, resamples=300, seed=3)
    with pytest.raises(ValueError, match="aligned"):
        paired_bootstrap([1.0, 0.0], [1.0], resamples=100, seed=0)
    one = paired_bootstrap([1.0], [0.0], resamples=100, seed=0)
    assert one.mean_difference == 1.0 and math.isnan(one.p_value) and math.isnan(one.low)


# ---------------------------------------------------------------- exact paired tests


def outcomes(both: int, a_only: int, b_only: int, neither: int) -> tuple[list[float], list[float]]:
    a = [1.0] * both + [1.0] * a_only + [0.0] * b_only + [0.0] * neither
    b = [1.0] * both + [0.0] * a_only + [1.0] * b_only + [0.0] * neither
    return a, b


def test_exact_mcnemar_on_a_hand_computed_table():
    result = paired_exact(*outcomes(both=20, a_only=9, b_only=1, neither=5))
    assert (result.b01, result.b10, result.test) == (1, 9, "exact McNemar")
    assert result.p_value == pytest.approx(2 * (1 + 10) / 2**10)  # 2·P(X ≤ 1 | n=10, p=½) = 0.0215
    assert result.p_value == pytest.approx(0.0215, abs=1e-4)
    assert paired_exact(*reversed(outcomes(20, 9, 1, 5))).p_value == result.p_value


def test_the_exact_test_stays_exact_at_many_discordant_tasks():
    """No chi-square approximation from 25 discordant pairs on: the binomial tail, exactly."""
    result = paired_exact(*outcomes(both=5, a_only=30, b_only=10, neither=5))
    tail = sum(math.comb(40, i) for i in range(11)) / 2**40
    assert result.test == "exact McNemar" and result.p_value == pytest.approx(2 * tail, rel=1e-12)


def test_per_task_means_get_the_exact_sign_test_and_say_so():
    """Tasks run several times: per-task means are no 0/1 verdicts, so the test is the sign test, named so."""
    result = paired_exact([1.0, 0.5, 1.0], [0.0, 0.0, 0.5])
    assert (result.b01, result.b10, result.test) == (0, 3, "exact sign test")
    assert result.p_value == pytest.approx(2 / 2**3)


def test_exact_tests_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    exact = paired_exact(*outcomes(both=3, a_only=12, b_only=4, neither=2))
    assert exact.p_value == pytest.approx(stats.binomtest(4, 16, 0.5).pvalue)
    many = paired_exact(*outcomes(both=3, a_only=40, b_only=22, neither=2))
    assert many.p_value == pytest.approx(stats.binomtest(22, 62, 0.5).pvalue)


def test_exact_test_edge_cases():
    no_discordance = paired_exact([1.0, 0.0], [1.0, 0.0])
    assert (no_discordance.b01, no_discordance.b10, no_discordance.p_value) == (0, 0, 1.0)
    assert paired_exact([1.0], [0.0]).p_value == 1.0  # one discordant pair: 2·½, capped at 1
    with pytest.raises(ValueError, match="aligned"):
        paired_exact([1.0, 0.0], [1.0])


def test_a_bootstrap_p_value_is_never_below_its_resolution():
    """Two tasks that both favour a: every resample agrees, yet p is 1/(B+1), never 0."""
    result = paired_bootstrap([1.0, 1.0], [0.0, 0.5], resamples=999, seed=0)
    assert result.p_value == bootstrap_p_resolution(999) == 1 / 1000


# ---------------------------------------------------------------- stratified mean


def test_stratified_mean_weights_groups_equally():
    groups = {"bookreview": [1.0, 1.0, 1.0, 1.0], "yelp": [0.0]}
    assert stratified_mean(groups) == 0.5  # pooled, it would be 0.8
    assert stratified_mean({"only": [0.2, 0.4]}) == pytest.approx(0.3)
    assert math.isnan(stratified_mean({}))
    with pytest.raises(ValueError, match="yelp"):
        stratified_mean({"bookreview": [1.0], "yelp": []})


def test_stratified_interval_resamples_each_group_within_itself():
    rng = np.random.default_rng(7)
    groups = {"books": list(rng.random(40)), "crm": list((rng.random(5) > 0.5).astype(float)), "yelp": [0.3]}
    mean, low, high = stratified_bootstrap_ci(groups)
    assert mean == pytest.approx(stratified_mean(groups)) and low < mean < high
    # By hand: resample every group by index within itself, average the group means equally.
    draws = np.random.default_rng(1)
    manual = [
        np.mean([np.mean(draws.choice(values, size=len(values))) for values in groups.values()]) for _ in range(4000)
    ]
    assert (low, high) == pytest.approx(tuple(np.percentile(manual, [2.5, 97.5])), abs=0.02)
    assert stratified_bootstrap_ci(groups) == (mean, low, high)  # the same seed, the same interval
    pooled = bootstrap_ci([v for values in groups.values() for v in values])
    assert pooled.mean != pytest.approx(mean)  # pooling would weigh books 40 times as much as yelp


def test_stratified_interval_without_spread_to_resample_is_nan():
    mean, low, high = stratified_bootstrap_ci({"books": [1.0], "crm": [0.0]})
    assert mean == 0.5 and math.isnan(low) and math.isnan(high)
    assert all(math.isnan(v) for v in stratified_bootstrap_ci({}))
    with pytest.raises(ValueError, match="crm"):
        stratified_bootstrap_ci({"books": [1.0, 0.0], "crm": []})


def test_holm_adjusts_p_values_as_computed_by_hand():
    # m = 4; sorted 0.01, 0.03, 0.04, 0.20 → ×4, ×3, ×2, ×1 = 0.04, 0.09, 0.08, 0.20; running maximum → 0.09 for 0.04
    assert holm([0.01, 0.04, 0.03, 0.20]) == pytest.approx([0.04, 0.09, 0.09, 0.20])
    assert holm([0.5, 0.6]) == [1.0, 1.0]  # 0.5 × 2 caps at 1, and the larger p may not fall below it
    assert holm([0.02]) == [0.02]  # one test: nothing to adjust
    adjusted = holm([math.nan, 0.02, 0.03])  # an untestable pair is no comparison: m = 2
    assert math.isnan(adjusted[0]) and adjusted[1:] == pytest.approx([0.04, 0.04])
    assert holm([]) == []
