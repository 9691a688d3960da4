"""How many tasks a difference needs: the normal approximation for a paired mean difference."""

import math
from statistics import NormalDist, stdev

from data_agent_compare.reports.significance import tasks_needed


def test_tasks_needed_follows_the_paired_sample_size_formula():
    differences = [1.0] * 3 + [0.0] * 7  # a 0.3 gap in accuracy
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert tasks_needed(differences) == math.ceil((z * stdev(differences) / 0.3) ** 2)


def test_smaller_differences_need_more_tasks():
    large = [1.0] * 5 + [0.0] * 5
    small = [1.0] * 1 + [0.0] * 9
    assert tasks_needed(small) > tasks_needed(large)


def test_no_difference_needs_no_number():
    assert tasks_needed([0.0, 0.0, 0.0]) is None
    assert tasks_needed([1.0, -1.0]) is None
    assert tasks_needed([1.0]) is None
