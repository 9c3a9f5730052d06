"""MAD, the modified z-score and its MAD = 0 guard, by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tailscope.analysis import robust
from tailscope.analysis.robust import mad, modified_z, slow_outliers
from tailscope.analysis.scaling import node_scaled, perf_ratio


def test_mad_by_hand():
    # median 3, |deviations| 2 1 0 1 97 -> median 1
    assert mad([1, 2, 3, 4, 100]) == 1.0
    assert mad([7.0]) == 0.0
    with pytest.raises(ValueError):
        mad([])


def test_modified_z_by_hand():
    z = modified_z([1, 2, 3, 4, 100])
    assert z == pytest.approx([0.6745 * -2, 0.6745 * -1, 0.0, 0.6745, 0.6745 * 97])
    assert slow_outliers(z, 3.5).tolist() == [False] * 5  # 100 is far out, but on the fast side
    z = modified_z([-100, 2, 3, 4, 5])
    assert z[0] == pytest.approx(0.6745 * -103 / 1)
    assert slow_outliers(z, 3.5).tolist() == [True, False, False, False, False]


def test_mad_zero_guard_uses_mean_absolute_deviation():
    # Quantised timer: most values identical. median 10, MAD 0, mean |dev| = 3/5.
    z = modified_z([10, 10, 10, 10, 13])
    assert z[-1] == pytest.approx(3 / (math.sqrt(math.pi / 2) * 0.6))
    assert z[:4].tolist() == [0.0] * 4
    assert np.all(np.isfinite(modified_z([10, 10, 10, 10, 7])))
    assert modified_z([4.0, 4.0, 4.0]).tolist() == [0.0, 0.0, 0.0]


def test_perf_ratio_both_directions():
    # higher is better (GB/s): value / node median
    assert perf_ratio([90.0, 100.0, 110.0], 100.0, True) == pytest.approx([0.9, 1.0, 1.1])
    # lower is better (microseconds): node median / value, so a longer time is < 1
    assert perf_ratio([90.0, 100.0, 125.0], 100.0, False) == pytest.approx([100 / 90, 1.0, 0.8])


def test_node_scaling_by_hand():
    # node median 100, global median 200: every value doubles, whatever the direction.
    assert node_scaled([90.0, 100.0, 110.0], 100.0, 200.0) == pytest.approx([180.0, 200.0, 220.0])


def test_robust_cut_must_be_positive():
    with pytest.raises(ValueError):
        slow_outliers([0.0], 0.0)


def test_group_mads_equal_mad_of_each_group() -> None:
    rng = np.random.default_rng(5)
    sizes = [1, 2, 3, 4, 7, 50, 51]
    group = np.repeat(np.arange(len(sizes)), sizes)
    rng.shuffle(group)  # groups interleaved, as rows of a campaign are
    values = np.round(rng.lognormal(4.0, 0.05, group.size), 2)  # rounded: ties, and MAD 0 in small groups
    got = robust.group_mads(values, group, len(sizes))
    want = [robust.mad(values[group == g]) for g in range(len(sizes))]
    assert got.tolist() == want  # exactly: the same order statistics
    with pytest.raises(ValueError):
        robust.group_mads(values, group, len(sizes) + 1)  # an empty group


def test_group_medians_are_each_groups_median_skipping_nan_and_nan_for_an_empty_group():
    rng = np.random.default_rng(11)
    values = rng.normal(size=400).round(1)  # ties
    values[rng.random(400) < 0.1] = np.nan
    group = rng.integers(0, 9, size=400)
    group[group == 4] = 5  # group 4 empty
    got = robust.group_medians(values, group, 10)  # group 9 empty too
    for g in range(10):
        present = values[(group == g) & ~np.isnan(values)]
        if present.size:
            assert got[g] == np.median(present)
        else:
            assert np.isnan(got[g])
