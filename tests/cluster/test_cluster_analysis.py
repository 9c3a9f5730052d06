"""Cluster analysis: variance components, node test and false alarms, shrinkage, speed bins, job cost."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from tailscope.analysis import cluster as cluster_module
from tailscope.analysis.cluster import (
    ClusterSettings,
    analyze_cluster,
    benjamini_hochberg,
    expected_min,
    expected_min_of_nodes,
    optimal_bins,
    speed_bins,
)
from tailscope.analysis.model import Settings
from tailscope.analysis.summary import score_runs

from .fleet import fleet_frame

SEEDS = (11, 12, 13)


def _summary(frame, **cluster):
    (summary,) = analyze_cluster(score_runs(frame, Settings()), Settings(), ClusterSettings(**cluster))
    return summary


@pytest.mark.parametrize("seed", SEEDS)
def test_variance_components_recover_the_simulated_split(seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    node_sd, run_sd = 0.03, 0.01
    factor = np.exp(rng.normal(0.0, node_sd, 60))
    c = _summary(fleet_frame(factor, 30, run_sd, rng)).components
    assert c.nodes == 60 and c.runs == 1800
    assert math.sqrt(c.run_variance) == pytest.approx(run_sd, rel=0.08)
    assert math.sqrt(c.node_variance) == pytest.approx(np.std(np.log(factor), ddof=1), rel=0.08)
    truth = node_sd**2 / (node_sd**2 + run_sd**2)
    assert c.icc_low <= truth <= c.icc_high or abs(c.icc - truth) < 0.05
    assert c.p_value < 1e-6


def test_no_node_effect_gives_small_icc():
    rng = np.random.default_rng(5)
    c = _summary(fleet_frame(np.ones(20), 20, 0.01, rng)).components
    assert c.icc < 0.1 and c.icc_low == 0.0 and c.p_value > 0.001


def test_healthy_heterogeneous_fleet_has_few_false_drains():
    """200 healthy nodes 3% apart: Bonferroni at 5% allows a false drain in about 1 of 20 fleets."""
    false_drains = 0
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        factor = np.exp(rng.normal(0.0, 0.03, 200))
        false_drains += len(_summary(fleet_frame(factor, 10, 0.01, rng)).drain)
    print(f"false drains over 20 fleets of 200 nodes: {false_drains}")
    assert false_drains <= 4


@pytest.mark.parametrize("seed", SEEDS)
def test_planted_slow_nodes_are_drained_and_one_bad_run_is_not(seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    factor = np.exp(rng.normal(0.0, 0.01, 100))
    factor[[7, 42]] *= 0.85  # two nodes 15% slower
    frame = fleet_frame(factor, 12, 0.005, rng)
    frame.loc[frame.index[frame["node"] == "c0050"][0], "value"] *= 0.3  # one terrible run on a good node
    s = _summary(frame)
    assert set(s.drain) == {"c0007", "c0042"}
    assert {n.node for n in s.nodes[:2]} == {"c0007", "c0042"} and s.nodes[0].rank == 1
    good = next(n for n in s.nodes if n.node == "c0050")
    assert good.verdict == "ok" and good.slow_runs == 1
    assert 0 < good.slow_rate_low < 1 / 12 < good.slow_rate_high
    assert s.fleet_job_slowdown_drained is not None and s.fleet_job_slowdown_drained < s.fleet_job_slowdown


def test_three_nodes_judged_against_run_noise():
    rng = np.random.default_rng(3)
    s = _summary(fleet_frame(np.array([1.0, 0.7, 0.98]), 12, 0.01, rng))
    assert s.drain == ("c0001",)
    assert [n.verdict for n in s.nodes if n.node != "c0001"] == ["ok", "ok"]


def test_shrinkage_pulls_thin_nodes_harder():
    rng = np.random.default_rng(8)
    factor = np.exp(rng.normal(0.0, 0.01, 40))
    factor[0] = factor[1] = 0.95
    frame = fleet_frame(factor, 20, 0.02, rng)
    frame = frame[(frame["node"] != "c0001") | (frame["trial"] < 2)]  # c0001 keeps only 2 runs
    s = {n.node: n for n in _summary(frame).nodes}
    thick, thin = s["c0000"], s["c0001"]
    assert abs(thin.shrunk_effect / thin.effect) < abs(thick.shrunk_effect / thick.effect)


def test_benjamini_hochberg_matches_the_step_up_rule():
    p = np.array([0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205, 0.212, 0.216])
    # q = 0.05, m = 10: thresholds 0.005 k; the largest k with p(k) <= 0.005 k is k = 2.
    assert benjamini_hochberg(p, 0.05).tolist() == [True, True] + [False] * 8
    assert benjamini_hochberg(p[::-1], 0.05).tolist() == ([False] * 8 + [True, True])
    assert benjamini_hochberg([], 0.05).size == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_optimal_bins_equal_brute_force(seed):
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    x = np.sort(rng.normal(0.0, 1.0, 9))
    for k in (1, 2, 3, 4):
        starts = optimal_bins(x, k)

        def sse(cuts):
            edges = [0, *cuts, x.size]
            return sum(np.sum((x[a:b] - x[a:b].mean()) ** 2) for a, b in itertools.pairwise(edges))

        best = min(sse(c) for c in itertools.combinations(range(1, x.size), k - 1))
        assert sse(list(starts[1:])) == pytest.approx(best)


def test_speed_bins_find_four_planted_groups():
    rng = np.random.default_rng(21)
    levels = np.log([1.0, 0.97, 0.94, 0.91])
    medians = np.repeat(levels, 25) + rng.normal(0.0, 0.001, 100)
    labels, chosen, k = speed_bins(medians, 0, 0.01)
    assert chosen and k == 4
    for level_index in range(4):
        group = labels[level_index * 25 : (level_index + 1) * 25]
        assert len(set(group)) == 1 and group[0] == 4 - level_index  # bin 1 = slowest
    labels2, chosen2, k2 = speed_bins(medians, 2, 0.01)
    assert not chosen2 and k2 == 2 and set(labels2) == {1, 2}


def test_expected_min_equals_enumeration():
    values = np.array([0.7, 0.9, 0.95, 1.0, 1.02])
    for n in (1, 2, 3):
        brute = np.mean([min(c) for c in itertools.product(values, repeat=n)])
        assert expected_min(values, n) == pytest.approx(brute)
    nodes = [np.array([0.0, 1.0]), np.array([0.5, 2.0])]
    brute = np.mean([min(a, b) for a in nodes[0] for b in nodes[1]])
    assert expected_min_of_nodes(nodes) == pytest.approx(brute, abs=0.01)


def test_expected_min_of_nodes_is_the_grid_integral_taken_node_by_node():
    """All nodes at once (a histogram along the grid, logs looked up) gives the numbers of the plain form, a
    sort and searchsorted per node, to the last bit: nodes of unequal sizes, ties, a node of one value."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        nodes = [np.round(rng.normal(1.0, 0.05, int(rng.integers(1, 40))), int(rng.integers(1, 4)))
                 for _ in range(int(rng.integers(1, 50)))]  # fmt: skip
        pooled = np.concatenate(nodes)
        grid = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, cluster_module._GRID)))
        log_survive = np.zeros(grid.size)
        for values in nodes:
            s = np.sort(values)
            with np.errstate(divide="ignore"):
                log_survive += np.log(1.0 - np.searchsorted(s, grid, side="right") / s.size)
        want = float(grid[0] + np.sum(np.diff(grid) * np.exp(log_survive)[:-1]))
        assert expected_min_of_nodes(nodes) == want


def test_job_table_uses_one_minus_one_minus_p_to_the_n():
    rng = np.random.default_rng(4)
    frame = fleet_frame(np.ones(10), 100, 0.002, rng)
    slow = rng.choice(len(frame), 20, replace=False)
    frame.loc[slow, "value"] *= 0.8
    s = _summary(frame)
    assert s.slow_runs == 20 and s.runs == 1000
    for job in s.jobs:
        assert job.p_any_slow == pytest.approx(1 - (1 - 0.02) ** job.nodes)
    growth = [j.expected_slowdown for j in s.jobs]
    assert growth == sorted(growth) and growth[-1] > 0.15


def test_fewer_than_three_nodes_has_no_cluster_section():
    rng = np.random.default_rng(1)
    scored = score_runs(fleet_frame(np.ones(2), 10, 0.01, rng), Settings())
    assert analyze_cluster(scored, Settings()) == ()


def _dense_bins(x: np.ndarray, k_max: int) -> list[list[int]]:
    """The dynamic programme of optimal_bins_upto on the whole n x n cost table, as it was first written."""
    n = x.size
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        cost = (s2[j + 1] - s2[i]) - (s1[j + 1] - s1[i]) ** 2 / (j - i + 1).astype(float)
    cost = np.where(j >= i, np.maximum(cost, 0.0), np.inf)
    best, back = cost[0].copy(), np.zeros((k_max, n), dtype=int)
    for b in range(1, k_max):
        total = best[:-1, None] + cost[1:, :]
        arg = np.argmin(total, axis=0)
        back[b], best = arg + 1, total[arg, np.arange(n)]
    out = []
    for k in range(1, k_max + 1):
        starts, end = [0] * k, n - 1
        for b in range(k - 1, 0, -1):
            starts[b] = int(back[b, end])
            end = starts[b] - 1
        out.append(starts)
    return out


@pytest.mark.parametrize("n", [2, 3, 9, 200, 1500])  # 1,500: several column blocks
def test_optimal_bins_in_blocks_equal_the_dense_table(n: int) -> None:
    from tailscope.analysis.cluster import optimal_bins_upto

    rng = np.random.default_rng(n)
    for decimals in (2, 12):  # coarse values tie, which argmin must break the same way
        x = np.sort(np.round(rng.normal(0.0, 0.03, n), decimals))
        k_max = min(8, n)
        got = [s.tolist() for s in optimal_bins_upto(x, k_max)]
        assert got == _dense_bins(x, k_max)
