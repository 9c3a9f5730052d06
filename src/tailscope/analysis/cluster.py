"""Node ensembles: node-to-node vs run-to-run variance, node effects, outlier nodes, speed bins, job slowdown.

Per probe variant with at least 3 nodes, on y = log performance (log value where higher is better, -log value
where lower is better, so lower y is always slower and differences are relative):

Variance components. One-way random-effects model y_ij = mu + u_i + e_ij, u_i ~ (0, s_node^2),
e_ij ~ (0, s_run^2) (notes/statistics.md). ANOVA moment estimators for unbalanced data: MSB and MSW from the
sums of squares, n0 = (N - sum n_i^2 / N) / (k - 1), s_run^2 = MSW, s_node^2 = max(0, (MSB - MSW) / n0).
For balanced data these are the REML estimates whenever s_node^2 > 0 (Searle, Casella & McCulloch,
"Variance Components", 1992, ch. 3-4). ICC = s_node^2 / (s_node^2 + s_run^2): the share of the variance that
is the node's. Its interval is the F-based one (Searle 1971; exact for balanced data, n0 for unbalanced):
F = MSB/MSW, F_L = F / F_{1-a/2}(k-1, N-k), F_U = F / F_{a/2}(k-1, N-k),
ICC in [(F_L - 1)/(F_L + n0 - 1), (F_U - 1)/(F_U + n0 - 1)].

Node effects with shrinkage. The effect of node i is its median m_i minus the fleet's median node M (medians,
so one slow run does not move a node). The sampling variance of a node median is v_i = (pi/2) s_w^2 / n_i,
with s_w the fleet's typical within-node scale (median over nodes of 1.4826 x MAD). The fleet's natural
node-to-node spread tau^2 = max(0, (1.4826 MAD of the m_i)^2 - median v_i) (robust: the outlier nodes do not
inflate it); with fewer than 8 nodes it cannot be learnt and the ANOVA s_node^2 is used for shrinkage.
Empirical-Bayes (James-Stein / Efron-Morris) shrinkage: effect_i x tau^2 / (tau^2 + v_i). Nodes are ranked
on the shrunken effect, so a node with few runs is not condemned on thin evidence.

Outlier nodes. Node test: z_i = (m_i - M) / sqrt(tau_test^2 + v_i), one-sided p = Phi(z_i) (slow side only).
Why this and not a Mann-Whitney test of a node's runs against the pooled others: with real node-to-node
spread (seed 000: node medians 13% apart across 392 nodes, 8.6% across 31) every node with enough runs
differs significantly from the pool, so a rank test flags half a healthy fleet; the question for drain is
"is this node outside the fleet's normal spread", which is what the robust z of node medians asks (the
seed's Fig. 9 reading). tau_test^2 = tau^2 with at least 8 nodes; below that the fleet's spread is unknowable
and tau_test^2 = 0: a node is then judged against run-to-run noise only ("slower than the median node by more
than its runs can explain"). False alarms across N nodes (notes/statistics.md "Many nodes"): drain when
p < alpha_drain / N (Bonferroni, family-wise), re-test when Benjamini-Hochberg at rate alpha_retest selects
it. Both also need a practical effect: a measured slowdown of at least min_node_effect (not the shrunken
one: when the rest of the fleet is uniform, tau^2 ~ 0 and shrinkage would erase a real outlier).

Speed bins. Optimal 1-D k-means on the log node medians (Fisher 1958 / Jenks natural breaks; exact dynamic
programme over the sorted medians, O(k N^2)). With bins = 0 the smallest k (up to 8) whose bins each span at
most bin_tolerance (relative) is taken: nodes within a bin can get the same share of HPL work (seed 000
section V: four speed bins).

Slow runs and synchronous jobs. A run is slow when its performance ratio to its node median is below
1 - threshold (the primary one); rates per node and pooled with Clopper-Pearson intervals (binomial.py).
P(at least one of N nodes slow in a step) = 1 - (1 - p)^N (binomial.prob_any_slow). Expected slowdown of an
N-node synchronous step from run-to-run variability alone: 1 - E[min of N draws of the pooled ratios], with
E[min] = r(1) + sum_j (r(j+1) - r(j)) (1 - j/M)^N over the M sorted ratios; and for the whole measured
fleet, node effects included: 1 - E[min_i X_i] / fleet median with X_i drawn from node i's own runs,
P(min > x) = prod_i (1 - F_i(x)), integrated on a quantile grid; again without the drained nodes.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from tailscope.analysis.binomial import clopper_pearson, prime_intervals, prob_any_slow
from tailscope.analysis.distributions import bh_adjusted, f_ppf, f_sf, normal_cdf
from tailscope.analysis.model import ClusterSettings, Settings
from tailscope.analysis.robust import MAD_TO_SD, mad

METHOD = (
    "cluster: one-way random-effects ANOVA on log performance (moment/REML-equivalent estimators, ICC with "
    "F interval); node effect = node median - median node, empirical-Bayes shrinkage tau^2/(tau^2+v_i); "
    "outlier nodes by the robust z of node medians, Bonferroni (drain) and Benjamini-Hochberg (re-test); "
    "speed bins by exact 1-D k-means on node medians; slow-run rates with Clopper-Pearson intervals; "
    "synchronous-job slowdown 1-(1-p)^N and E[min of N]"
)

MIN_NODES = 3  # a cluster section needs at least this many nodes of one variant
MIN_NODES_FOR_SPREAD = 8  # below this the fleet's own node-to-node spread is not estimated for the test
MAX_BINS = 8
_GRID = 1024
_NODE_BLOCK = 64  # nodes counted at once by expected_min_of_nodes
JOB_SIZES = (1, 8, 32, 128, 512, 1000)

if TYPE_CHECKING:
    from tailscope.store.manifest import ClusterRecord


@dataclass(frozen=True)
class VarianceComponents:
    nodes: int
    runs: int
    node_variance: float  # s_node^2 on log performance
    run_variance: float  # s_run^2
    node_sd_pct: float  # exp(s_node) - 1: the typical node-to-node difference, relative
    run_sd_pct: float
    icc: float
    icc_low: float | None
    icc_high: float | None
    f_statistic: float | None
    p_value: float | None  # H0: no node effect
    n0: float


@dataclass(frozen=True)
class NodeEffect:
    node: str
    n: int
    minimum: float
    median: float
    maximum: float
    ratio: float  # node median vs the median node, oriented (< 1 = slower)
    effect: float  # log(ratio)
    shrunk_effect: float
    slowdown: float  # 1 - exp(effect): the measured slowdown vs the median node, >= 0 only on the slow side
    rank: int  # 1 = slowest (shrunken)
    z: float
    p_value: float
    drain: bool
    retest: bool
    speed_bin: int  # 1 = slowest bin
    slow_runs: int
    slow_rate: float
    slow_rate_low: float
    slow_rate_high: float

    @property
    def verdict(self) -> str:
        return "drain" if self.drain else "retest" if self.retest else "ok"


@dataclass(frozen=True)
class SpeedBin:
    index: int  # 1 = slowest
    nodes: tuple[str, ...]
    low: float  # node medians, in the metric's unit (oriented: low = slowest)
    high: float
    median: float
    spread: float  # relative span of the bin's node medians


@dataclass(frozen=True)
class JobSlowdown:
    nodes: int
    p_any_slow: float  # P(at least one node slow in a step), at the pooled slow-run rate
    expected_slowdown: float  # from run-to-run variability alone (node effects removed)


@dataclass(frozen=True)
class ClusterSummary:
    probe: str
    variant: str
    metric: str
    unit: str
    higher_is_better: bool
    fleet_median: float  # median of the node medians
    components: VarianceComponents
    fleet_spread: float  # tau: robust node-to-node sd of log medians beyond sampling noise
    within_sd: float  # s_w: typical within-node sd of log performance
    nodes: tuple[NodeEffect, ...]  # slowest first
    bins: tuple[SpeedBin, ...]
    bins_chosen: bool
    threshold: float
    slow_runs: int
    runs: int
    slow_rate: float
    slow_rate_low: float
    slow_rate_high: float
    jobs: tuple[JobSlowdown, ...]
    fleet_job_slowdown: float  # all measured nodes in one synchronous job, node effects included
    fleet_job_slowdown_drained: float | None  # the same without the drain nodes (None: none drained)
    drain: tuple[str, ...]
    retest: tuple[str, ...]  # selected by BH but not drained
    settings: ClusterSettings = field(default_factory=ClusterSettings)


def analyze_cluster(
    scored: pd.DataFrame, settings: Settings, cluster: ClusterSettings | None = None
) -> tuple[ClusterSummary, ...]:
    """One ClusterSummary per variant with >= MIN_NODES nodes; `scored` is summary.score_runs' frame."""
    cluster = cluster or ClusterSettings()
    out = []
    for variant, g in scored.groupby("variant", sort=True):
        if g["node"].nunique() >= MIN_NODES:
            out.append(_variant_cluster(str(variant), g, settings, cluster))
    return tuple(out)


def _variant_cluster(
    variant: str, g: pd.DataFrame, settings: Settings, cs: ClusterSettings
) -> ClusterSummary:
    first = g.iloc[0]
    hib = bool(first["higher_is_better"])
    value = g["value"].to_numpy(dtype=float)
    y = np.log(value) if hib else -np.log(value)
    codes, names = pd.factorize(g["node"], sort=True)
    k = len(names)
    frame = pd.DataFrame({"node": codes, "y": y, "value": value})
    grouped = frame.groupby("node", sort=True)
    n_i = grouped.size().to_numpy()
    m_i = grouped["y"].median().to_numpy()
    mean_i = grouped["y"].mean().to_numpy()
    vmin = grouped["value"].min().to_numpy()
    vmax = grouped["value"].max().to_numpy()
    vmed = grouped["value"].median().to_numpy()
    dev = np.abs(y - m_i[codes])
    mad_i = pd.Series(dev).groupby(codes).median().to_numpy()

    components = variance_components(y, codes, n_i, mean_i, settings.confidence)
    s_w = float(np.median(MAD_TO_SD * mad_i))
    if s_w == 0.0:  # quantised values: fall back to the pooled within-node sd
        s_w = math.sqrt(components.run_variance)
    v_i = (math.pi / 2.0) * s_w**2 / n_i
    centre = float(np.median(m_i))
    effect = m_i - centre
    robust_var = (MAD_TO_SD * mad(m_i)) ** 2
    tau2 = max(0.0, robust_var - float(np.median(v_i)))
    tau2_shrink = tau2 if k >= MIN_NODES_FOR_SPREAD else components.node_variance
    tau2_test = tau2 if k >= MIN_NODES_FOR_SPREAD else 0.0
    weight = np.where(tau2_shrink + v_i > 0, tau2_shrink / np.maximum(tau2_shrink + v_i, 1e-300), 1.0)
    shrunk = effect * weight
    denom = np.sqrt(tau2_test + v_i)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(denom > 0, effect / denom, np.where(effect < 0, -np.inf, 0.0))
    p = normal_cdf(z)
    # The practical-size test uses the measured effect, not the shrunken one: in an otherwise uniform fleet
    # tau^2 ~ 0 and shrinkage would erase a real outlier (a 15% slow node among identical ones); thin
    # evidence is already guarded by z, whose variance includes v_i.
    slowdown = np.maximum(0.0, 1.0 - np.exp(effect))
    big_enough = slowdown >= cs.min_node_effect
    drain = (p < cs.alpha_drain / k) & big_enough
    retest = benjamini_hochberg(p, cs.alpha_retest) & big_enough

    order = np.lexsort((names.to_numpy(dtype=str), effect, shrunk))  # ties of shrunk (tau^2 = 0): by effect
    rank = np.empty(k, dtype=int)
    rank[order] = np.arange(1, k + 1)

    bin_of, bins_chosen, n_bins = speed_bins(m_i, cs.bins, cs.bin_tolerance)
    ratio_all = g["perf_ratio"].to_numpy(dtype=float)
    slow = ratio_all < 1.0 - settings.primary_threshold
    slow_i = np.bincount(codes, weights=slow, minlength=k).astype(int)

    to_value = np.exp if hib else (lambda a: np.exp(-np.asarray(a)))
    counts = zip(slow_i.tolist(), np.asarray(n_i).astype(int).tolist(), strict=True)
    prime_intervals(counts, settings.confidence)  # every node's interval in one vectorised pass
    name_of = [str(n) for n in names.tolist()]  # one list, not 2,000 reads of a pandas Index (~20 ms)
    nodes = []
    for i in order:
        low, high = clopper_pearson(int(slow_i[i]), int(n_i[i]), settings.confidence)
        nodes.append(
            NodeEffect(
                node=name_of[i],
                n=int(n_i[i]),
                minimum=float(vmin[i]),
                median=float(vmed[i]),
                maximum=float(vmax[i]),
                ratio=float(math.exp(effect[i])),
                effect=float(effect[i]),
                shrunk_effect=float(shrunk[i]),
                slowdown=float(slowdown[i]),
                rank=int(rank[i]),
                z=float(z[i]),
                p_value=float(p[i]),
                drain=bool(drain[i]),
                retest=bool(retest[i]),
                speed_bin=int(bin_of[i]),
                slow_runs=int(slow_i[i]),
                slow_rate=float(slow_i[i] / n_i[i]),
                slow_rate_low=low,
                slow_rate_high=high,
            )
        )
    bins = []
    for b in range(1, n_bins + 1):
        members = np.flatnonzero(bin_of == b)
        lo, hi = float(m_i[members].min()), float(m_i[members].max())
        bins.append(
            SpeedBin(
                index=b,
                nodes=tuple(sorted(name_of[i] for i in members)),
                low=float(to_value(lo if hib else hi)),
                high=float(to_value(hi if hib else lo)),
                median=float(to_value(float(np.median(m_i[members])))),
                spread=float(math.expm1(hi - lo)),
            )
        )
    total_slow, total = int(slow.sum()), len(slow)
    p_low, p_high = clopper_pearson(total_slow, total, settings.confidence)
    rate = total_slow / total
    ratios = np.sort(ratio_all)
    sizes = sorted({*JOB_SIZES, k})
    jobs = tuple(JobSlowdown(n, prob_any_slow(rate, n), 1.0 - expected_min(ratios, n)) for n in sizes)
    by_node = np.argsort(codes, kind="stable")  # each node's runs in their order, as y[codes == i] gives them
    node_values = np.split(y[by_node], np.cumsum(n_i)[:-1])
    fleet = 1.0 - math.exp(expected_min_of_nodes(node_values) - centre)
    drained = None
    if drain.any():
        kept = [node_values[i] for i in range(k) if not drain[i]]
        drained = 1.0 - math.exp(expected_min_of_nodes(kept) - centre) if kept else None
    return ClusterSummary(
        probe=str(first["probe"]),
        variant=variant,
        metric=str(first["metric"]),
        unit=str(first["unit"]),
        higher_is_better=hib,
        fleet_median=float(to_value(centre)),
        components=components,
        fleet_spread=math.sqrt(tau2),
        within_sd=s_w,
        nodes=tuple(nodes),
        bins=tuple(bins),
        bins_chosen=bins_chosen,
        threshold=settings.primary_threshold,
        slow_runs=total_slow,
        runs=total,
        slow_rate=rate,
        slow_rate_low=p_low,
        slow_rate_high=p_high,
        jobs=jobs,
        fleet_job_slowdown=fleet,
        fleet_job_slowdown_drained=drained,
        drain=tuple(n.node for n in nodes if n.drain),
        retest=tuple(n.node for n in nodes if n.retest and not n.drain),
        settings=cs,
    )


def variance_components(
    y: np.ndarray, codes: np.ndarray, n_i: np.ndarray, mean_i: np.ndarray, confidence: float
) -> VarianceComponents:
    """One-way random-effects ANOVA (moment estimators; REML for balanced data with s_node^2 > 0)."""
    k, total = len(n_i), len(y)
    grand = float(np.mean(y))
    ssb = float(np.sum(n_i * (mean_i - grand) ** 2))
    ssw = float(np.sum((y - mean_i[codes]) ** 2))
    df_b, df_w = k - 1, total - k
    msb = ssb / df_b if df_b > 0 else 0.0
    msw = ssw / df_w if df_w > 0 else 0.0
    n0 = (total - float(np.sum(n_i**2)) / total) / df_b if df_b > 0 else 0.0
    node_var = max(0.0, (msb - msw) / n0) if n0 > 0 else 0.0
    icc = node_var / (node_var + msw) if node_var + msw > 0 else 0.0
    f_stat = p_value = icc_low = icc_high = None
    if df_b > 0 and df_w > 0 and msw > 0:
        f_stat = msb / msw
        p_value = float(f_sf(f_stat, df_b, df_w))
        a = 1.0 - confidence
        # both quantiles in one call: a beta quantile costs its ~5 Newton steps of numpy calls, whatever
        # the number of values (~5 ms each on a small campaign)
        upper_q, lower_q = f_ppf(np.array([1.0 - a / 2.0, a / 2.0]), df_b, df_w).tolist()
        f_low = f_stat / upper_q
        f_high = f_stat / lower_q
        icc_low = min(1.0, max(0.0, (f_low - 1.0) / (f_low + n0 - 1.0)))
        icc_high = min(1.0, max(0.0, (f_high - 1.0) / (f_high + n0 - 1.0)))
    return VarianceComponents(
        nodes=k,
        runs=total,
        node_variance=node_var,
        run_variance=msw,
        node_sd_pct=math.expm1(math.sqrt(node_var)),
        run_sd_pct=math.expm1(math.sqrt(msw)),
        icc=icc,
        icc_low=icc_low,
        icc_high=icc_high,
        f_statistic=f_stat,
        p_value=p_value,
        n0=n0,
    )


def benjamini_hochberg(p: Sequence[float] | np.ndarray, q: float) -> np.ndarray:
    """Benjamini-Hochberg step-up: True for the hypotheses rejected at false-discovery rate q."""
    p = np.asarray(p, dtype=float)
    if p.size == 0:
        return np.zeros(0, dtype=bool)
    return bh_adjusted(p) <= q  # BH-adjusted p, as scipy.stats.false_discovery_control and attribution


def optimal_bins(x: np.ndarray, k: int) -> np.ndarray:
    """Exact 1-D k-means (minimum within-bin sum of squares) of sorted `x`: the start index of each bin."""
    return optimal_bins_upto(x, k)[-1]


def optimal_bins_upto(x: np.ndarray, k_max: int) -> list[np.ndarray]:
    """Bin starts of the exact 1-D k-means of sorted `x` for k = 1 .. k_max, from one dynamic programme.

    best_b[j] = least within-bin sum of squares of x[0..j] in b+1 bins = min over i of best_{b-1}[i-1] +
    cost(i, j); the levels do not depend on the final k, so one pass serves every k (Fisher 1958).
    """
    n = x.size
    k_max = max(1, min(k_max, n))
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])

    def cost(i0: int, i1: int, j0: int, j1: int) -> np.ndarray:
        """cost(i, j) of one bin x[i..j] for starts i0 <= i < i1 and ends j0 <= j < j1 (inf for j < i)."""
        i = np.arange(i0, i1, dtype=float)[:, None]  # segment start
        j = np.arange(j0, j1, dtype=float)[None, :]  # segment end (inclusive)
        sum1 = s1[j0 + 1 : j1 + 1][None, :] - s1[i0:i1][:, None]  # slices: no gathers
        sum2 = s2[j0 + 1 : j1 + 1][None, :] - s2[i0:i1][:, None]
        # sum2 - sum1**2 / (j - i + 1), floored at 0, in place: the same numbers with 3 temporaries of the
        # block's size instead of 9 (memory traffic is this function's cost)
        size = j - i
        size += 1.0
        np.square(sum1, out=sum1)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.divide(sum1, size, out=sum1)
        np.subtract(sum2, sum1, out=sum2)
        np.maximum(sum2, 0.0, out=sum2)
        sum2[size <= 0.0] = np.inf  # j < i: no such bin
        return sum2

    # Column blocks of about 2 million cells, left to right, every level per block: the level-b value at
    # end j needs level b-1 only before j. Never the whole n x n table (200 MB at 5,000 nodes), and only
    # its upper triangle (a bin cannot start after it ends: rows i > j are infinite and never chosen).
    # At least 8 blocks: a block's rows stop at its last end, so 8 blocks compute about 56% of the square
    # (1,000 nodes: 5 ms instead of 15 ms, the same bins), and in the cache
    width = max(1, min((1 << 21) // n, -(-n // 8)))
    best = np.empty((k_max, n))
    best[0] = cost(0, 1, 0, n)[0]  # one bin covering 0..j
    back = np.zeros((k_max, n), dtype=int)
    for j0 in range(0, n, width) if k_max > 1 else ():
        j1 = min(n, j0 + width)
        block = cost(1, max(j1, 2), j0, j1)  # row r: the bin starting at i = r + 1
        total = np.empty_like(block)
        for b in range(1, k_max):
            np.add(best[b - 1, : block.shape[0], None], block, out=total)  # bins before i, plus the bin i..j
            arg = np.argmin(total, axis=0)
            back[b, j0:j1] = arg + 1
            best[b, j0:j1] = total[arg, np.arange(j1 - j0)]
    out = []
    for k in range(1, k_max + 1):
        starts = [0] * k
        end = n - 1
        for b in range(k - 1, 0, -1):
            starts[b] = int(back[b, end])
            end = starts[b] - 1
        out.append(np.asarray(starts))
    return out


def speed_bins(log_medians: np.ndarray, bins: int, tolerance: float) -> tuple[np.ndarray, bool, int]:
    """Bin index (1 = slowest) per node; whether k was chosen; the number of bins."""
    order = np.argsort(log_medians, kind="stable")
    x = log_medians[order]
    n = x.size
    k_max = min(bins, n) if bins > 0 else min(MAX_BINS, n)
    all_starts = optimal_bins_upto(x, k_max)

    def assign(k: int) -> np.ndarray:
        labels = np.searchsorted(all_starts[k - 1], np.arange(n), side="right")
        out = np.empty(n, dtype=int)
        out[order] = labels
        return out

    if bins > 0:
        return assign(k_max), False, k_max
    for k in range(1, k_max + 1):
        starts = [*all_starts[k - 1].tolist(), n]
        spans = [_relative_span(x[b - 1] - x[a]) for a, b in itertools.pairwise(starts)]
        if max(spans) <= tolerance:
            return assign(k), True, k
    return assign(k_max), True, k_max


def _relative_span(log_span: float) -> float:
    """max/min - 1 of a bin from its span of log medians; infinite past what a float holds (medians from
    1e-300 to 8e300 are 1,380 apart in log: exp() of that has no float, and such a bin is never narrow)."""
    return math.expm1(log_span) if log_span < _LOG_FLOAT_MAX else math.inf


_LOG_FLOAT_MAX = math.log(sys.float_info.max)  # 709.78


def expected_min(sorted_values: np.ndarray, n: int) -> float:
    """E[min of n independent draws] from the empirical distribution of `sorted_values` (exact)."""
    r = np.asarray(sorted_values, dtype=float)
    m = r.size
    j = np.arange(1, m)
    survive = (1.0 - j / m) ** n  # P(min > r(j)) for draws from the empirical distribution
    return float(r[0] + np.sum(np.diff(r) * survive))


def expected_min_of_nodes(node_values: Sequence[np.ndarray]) -> float:
    """E[min_i X_i], X_i drawn from node i's values (independent): integral of prod_i P(X_i > x) on a grid."""
    pooled = np.concatenate(node_values)
    grid = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, _GRID)))
    sizes = np.array([len(v) for v in node_values])
    # log P(X_i > x) = log(1 - count / size): one log per (size, count) a node can have, looked up, not one
    # per grid point and node (a million logs for 1,000 nodes)
    distinct, size_of_node = np.unique(sizes, return_inverse=True)
    table = np.zeros((distinct.size, int(distinct.max()) + 1))
    with np.errstate(divide="ignore"):
        for j, size in enumerate(distinct):
            table[j, : size + 1] = np.log(1.0 - np.arange(size + 1) / size)
    # Node i's values at or below each grid point, a block of nodes at once (a few hundred KiB, not a
    # nodes x grid matrix at the analysis' peak): a value v is <= grid[k] from the first k with grid[k] >= v
    # on, so a per-node histogram of that k, summed along the grid, counts them (the counts a per-node sort
    # and searchsorted give, without a Python loop over 1,000 nodes).
    ends = np.cumsum(sizes)
    width = grid.size + 1
    log_survive = np.zeros(grid.size)
    for lo in range(0, sizes.size, _NODE_BLOCK):
        hi = min(lo + _NODE_BLOCK, sizes.size)
        values = pooled[ends[lo] - sizes[lo] : ends[hi - 1]]
        node = np.repeat(np.arange(hi - lo), sizes[lo:hi])
        first = np.searchsorted(grid, values, side="left")
        below = np.bincount(node * width + first, minlength=(hi - lo) * width).reshape(hi - lo, width)
        at_or_below = np.cumsum(below, axis=1)[:, : grid.size]
        for row in table[size_of_node[lo:hi, None], at_or_below]:  # node by node, in order: the sums of
            log_survive += row  # the per-node form, to the last bit
    survive = np.exp(log_survive)
    return float(grid[0] + np.sum(np.diff(grid) * survive[:-1]))


def cluster_settings_of(cluster: ClusterRecord | None) -> ClusterSettings:
    """The [cluster] settings a campaign was submitted with (its manifest's cluster record), else defaults."""
    values = cluster.cluster_settings if cluster is not None else {}
    known = {f.name for f in fields(ClusterSettings)}
    return ClusterSettings(**{k: v for k, v in values.items() if k in known})
