"""Which nodes make their jobs slow: the timed jobs' slowdowns (classes.py) attributed to the nodes they ran
on.

**The model: a job is as slow as its slowest node.** A bulk-synchronous job runs at the pace of its slowest
node, so a slow node taints every job it is in, and a naive comparison per node (its jobs against the jobs
without it) also flags the nodes that often share its jobs (with contiguous allocations, its neighbours). The
model is fitted over all jobs at once, in rounds: the nodes found slow so far answer for the jobs they are in
(the slowest of them, by its estimated effect, when a job holds several); a job answered for by one node says
nothing about its other nodes (under the model their effect only has to be no larger), so it is left out of
their comparison, and the jobs with no slow node are the clean reference. Each round tests every node on the
jobs left to it; the nodes found slow become the next round's; it ends when they stay the same (MAX_ROUNDS at
most). A partner of a slow node keeps the jobs it ran without it, which are not slow.

**Per node, the same classes' jobs elsewhere.** In class c the reference is m_c, the median slowdown of the
class's clean jobs, and s_c their robust scale (1.4826 MAD; the class's jobs when fewer than MIN_CLEAN are
clean). The node's paired-by-class differences d_c = (median slowdown of its jobs in c) - m_c; its effect is
their Hodges-Lehmann estimate (the median of the Walsh averages) with the Wilcoxon signed-rank 95% interval
(exact to 60 differences). An interval needs at least 6 differences (coverage 0.969 at 6, and then it spans
every difference): a node in fewer than CLASS_PAIRS_FROM classes pairs each of its jobs with its class
(d_j = y_j - m_c) instead.

**A permutation p-value within classes.** Under "the node does not matter", which of a class's jobs ran on it
is exchangeable. Statistic: the sum over the node's jobs of psi((y - m_c) / s_c), psi Huber's (k = HUBER_K: a
few wild runs cannot make a node). Its distribution under relabelling within each class (the pool: the class's
clean jobs and the node's own) has an exact mean and variance (draws without replacement); the p-value is the
one-sided normal tail, or, when the node's classes hold at most MC_MAX_JOBS jobs, the Monte Carlo permutation
p-value of MC_PERMUTATIONS relabellings, (1 + count) / (1 + B). Benjamini-Hochberg q over the nodes tested. A
node is slow when q < Q_SLOW and its effect's 95% interval lies above 0 (without an interval: the effect).

**Since when**: the change points of the node's job-effect series (its jobs' y - m_c over time; daily medians
when it has more than DAILY_FROM jobs) by history's rule for one series (tailscope.history.changepoint:
`judge_series`, the noise within the series' own segments). `since` is the first job (day) after the last
change to a slower level; None when the node was this slow from its first job here."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from tailscope import hostlist

HUBER_K = 1.345  # 95% efficiency at the normal
Q_SLOW = 0.05
MAX_ROUNDS = 6
MIN_CLEAN = 5
MC_MAX_JOBS = 400  # beyond, the normal tail of the exact moments is as good and far cheaper
MC_PERMUTATIONS = 1999
DAILY_FROM = 60
MIN_DIFFERENCES = 6  # a signed-rank 95% interval exists from 6 differences
CLASS_PAIRS_FROM = 20  # classes from which one difference per class (else one per job) is paired
EXACT_SIGNED_RANK = 60
SCALE_FLOOR = 1e-3  # 0.1%: quantised timings of identical runs
Z975 = 1.959963984540054


def start_ns(column: pd.Series) -> np.ndarray:
    """Times as int64 nanoseconds since the epoch (UTC), without a Timestamp object per job."""
    return pd.to_datetime(column, utc=True).astype("datetime64[ns, UTC]").array.asi8.copy()


@dataclass(frozen=True)
class Design:
    """The job x node incidence as CSR rows (one row per timed job): `indptr`, `indices`."""

    nodes: tuple[str, ...]
    indptr: np.ndarray
    indices: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.indptr) - 1, len(self.nodes)

    def job_of_pair(self) -> np.ndarray:
        return np.repeat(np.arange(self.shape[0]), np.diff(self.indptr))


def design(nodelists: Sequence[str]) -> Design:
    """The incidence of the jobs' node lists (each distinct list expanded once)."""
    codes, uniques = pd.factorize(pd.Series(list(nodelists), dtype=object))
    index: dict[str, int] = {}
    parts = []
    for text in uniques:
        names = list(dict.fromkeys(hostlist.expand(str(text))))
        parts.append(np.fromiter((index.setdefault(n, len(index)) for n in names), np.int64, len(names)))
    size = np.array([len(x) for x in parts], dtype=np.int64)
    flat = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    offset = np.r_[0, np.cumsum(size)[:-1]] if len(size) else np.zeros(0, np.int64)
    lengths = size[codes] if len(codes) else np.zeros(0, np.int64)
    indptr = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=indptr[1:])
    within = np.arange(indptr[-1]) - np.repeat(indptr[:-1], lengths)  # position inside the job's list
    indices = flat[np.repeat(offset[codes], lengths) + within] if len(codes) else flat
    return Design(tuple(index), indptr, indices)


@dataclass(frozen=True)
class NodeResult:
    node: str
    effect: float  # Hodges-Lehmann, log units (0.05: 5.1% slower)
    lower: float | None  # its 95% interval (None: too few differences)
    upper: float | None
    jobs: int  # the node's timed jobs left to it (not answered for by a slower node)
    classes: int  # the classes that compare it with jobs elsewhere
    p: float
    q: float
    differences: str  # "classes" | "jobs": what the Hodges-Lehmann estimate paired
    job_rows: np.ndarray  # the timed jobs' rows behind it
    slow: bool = False
    since: pd.Timestamp | None = None
    all_jobs: int = 0  # every timed job it ran in

    @property
    def percent(self) -> float:
        return math.expm1(self.effect) * 100.0


# --- small statistics ------------------------------------------------------------------------------------
def _signed_rank_k(m: int) -> int | None:
    """k of the two-sided 95% interval [W_(k), W_(M-k+1)] of the Walsh averages (None below 6)."""
    if m < MIN_DIFFERENCES:
        return None
    if m <= EXACT_SIGNED_RANK:
        counts = np.zeros(m * (m + 1) // 2 + 1)
        counts[0] = 1.0
        for i in range(1, m + 1):  # the signed-rank statistic's null distribution, by dynamic programming
            counts[i:] = counts[i:] + counts[:-i].copy()
        cdf = np.cumsum(counts) / 2.0**m
        return int(np.searchsorted(cdf, 0.025, side="right"))  # P(T <= k-1) <= 0.025
    big_m = m * (m + 1) / 2
    sd = math.sqrt(m * (m + 1) * (2 * m + 1) / 24)
    return max(1, math.floor(big_m / 2 - Z975 * sd))


def hodges_lehmann(d: np.ndarray) -> tuple[float, float | None, float | None]:
    """The median of the Walsh averages and the signed-rank 95% interval (order statistics by selection)."""
    m = len(d)
    if m == 0:
        return float("nan"), None, None
    i, j = np.triu_indices(m)
    walsh = (d[i] + d[j]) / 2.0
    big_m = len(walsh)
    mid = [(big_m - 1) // 2, big_m // 2]
    k = _signed_rank_k(m)
    wanted = sorted({*mid, *([k - 1, big_m - k] if k is not None else [])})
    part = np.partition(walsh, wanted)
    center = float(0.5 * (part[mid[0]] + part[mid[1]]))
    if k is None:
        return center, None, None
    return center, float(part[k - 1]), float(part[big_m - k])


def bh(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values."""
    n = len(p)
    if n == 0:
        return p.astype(float)
    order = np.argsort(p, kind="stable")
    ranked = p[order] * n / np.arange(1, n + 1)
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(n)
    out[order] = np.minimum(q, 1.0)
    return out


def _psi(u: np.ndarray) -> np.ndarray:
    return np.clip(u, -HUBER_K, HUBER_K)


def _segment_medians(values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique keys, their medians, their counts) of `values` grouped by non-negative integer `keys`: one sort
    of the values ranked within their key (a float key = key + rank / n keeps the order exactly)."""
    if not len(keys):
        empty = np.zeros(0, np.int64)
        return empty, np.zeros(0), empty
    rank = np.empty(len(values), dtype=np.float64)
    rank[np.argsort(values, kind="stable")] = np.arange(len(values))
    order = np.argsort(keys.astype(np.float64) + rank / (len(values) + 1.0))
    k, v = keys[order], values[order]
    starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    ends = np.r_[starts[1:], len(k)]
    med = 0.5 * (v[starts + (ends - starts - 1) // 2] + v[starts + (ends - starts) // 2])
    return k[starts], med, ends - starts


# --- one round: every node tested on the jobs left to it -----------------------------------------------
@dataclass
class Round:
    elig: np.ndarray  # per pair: the job is left to this node
    clean: np.ndarray  # per job: no slow node in it
    m_c: np.ndarray  # per class: the clean jobs' median slowdown
    s_c: np.ndarray  # per class: their robust scale
    p: np.ndarray  # per node
    effect: np.ndarray  # per node: the median of its class differences (a quick estimate)
    classes: np.ndarray  # per node: informative classes
    jobs: np.ndarray  # per node: jobs left to it
    groups: tuple[np.ndarray, ...]  # per (node, class): node, class, k, s_in, informative, median slowdown


class Attribution:
    """The fit over all jobs (see the module's description); `results()` gives every node's answer."""

    def __init__(self, timed: pd.DataFrame, *, seed: int = 0) -> None:
        self.timed = timed
        self.des = design(timed["nodelist"].astype(str).tolist())
        codes, names = pd.factorize(timed["class"], sort=True)
        self.cls = codes.astype(np.int64)
        self.n_classes = len(names)
        self.log_value = timed["log_value"].to_numpy(float)
        self.week = timed["week"].to_numpy(np.int64)
        self.y = timed["slowdown"].to_numpy(float)
        self.start = start_ns(timed["start_at"])
        self.job = self.des.job_of_pair()
        self.node = self.des.indices
        self.rng = np.random.default_rng(seed)
        self.rounds = 0

    # which jobs each node is tested on
    def _eligibility(self, slow: np.ndarray, effect: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n_jobs, _ = self.des.shape
        top = np.full(n_jobs, -1, dtype=np.int64)
        pairs = np.flatnonzero(slow[self.node])
        if len(pairs):
            jobs = self.job[pairs]
            order = np.lexsort((-effect[self.node[pairs]], jobs))  # per job its slowest slow node first
            firsts = pairs[order][np.r_[True, jobs[order][1:] != jobs[order][:-1]]]
            top[self.job[firsts]] = self.node[firsts]
        clean = top < 0
        elig = clean[self.job] | (top[self.job] == self.node)
        return elig, clean

    def _reference(self, clean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slowdowns against the clean jobs of each class-week (classes.baselines), then per class: the clean
        jobs' median slowdown and robust scale (all its jobs when few are clean)."""
        from tailscope.jobs.classes import baselines

        self.y = self.log_value - baselines(self.log_value, self.cls, self.week, clean)
        m_c, s_c = np.zeros(self.n_classes), np.ones(self.n_classes)
        count = np.bincount(self.cls[clean], minlength=self.n_classes)
        use = clean | (count[self.cls] < MIN_CLEAN)
        frame = pd.DataFrame({"c": self.cls[use], "y": self.y[use]})
        med = frame.groupby("c")["y"].median()
        m_c[med.index.to_numpy()] = med.to_numpy()
        dev = (frame["y"] - m_c[frame["c"].to_numpy()]).abs()
        mad = dev.groupby(frame["c"]).median()
        s_c[mad.index.to_numpy()] = np.maximum(1.4826 * mad.to_numpy(), SCALE_FLOOR)
        return m_c, s_c

    def _round(self, slow: np.ndarray, effect: np.ndarray) -> Round:
        """Every node tested on the jobs left to it (the medians are the last round's: `_with_medians`)."""
        from scipy.special import ndtr

        n_nodes = self.des.shape[1]
        elig, clean = self._eligibility(slow, effect)
        m_c, s_c = self._reference(clean)
        psi = _psi((self.y - m_c[self.cls]) / s_c[self.cls])
        c1 = np.bincount(self.cls[clean], weights=psi[clean], minlength=self.n_classes)
        c2 = np.bincount(self.cls[clean], weights=psi[clean] ** 2, minlength=self.n_classes)
        cn = np.bincount(self.cls[clean], minlength=self.n_classes).astype(float)
        pairs = np.flatnonzero(elig)
        pj, pn = self.job[pairs], self.node[pairs]
        pc = self.cls[pj]
        gkey = pn * self.n_classes + pc
        keys, pos = np.unique(gkey, return_inverse=True)
        med = np.zeros(len(keys))
        g_node, g_cls = keys // self.n_classes, keys % self.n_classes
        psi_p = psi[pj]
        k = np.bincount(pos, minlength=len(keys))
        s_in = np.bincount(pos, weights=psi_p, minlength=len(keys))
        own = ~clean[pj]  # a slow node's own jobs (not clean) join its pool
        o1 = np.bincount(pos[own], weights=psi_p[own], minlength=len(keys))
        o2 = np.bincount(pos[own], weights=psi_p[own] ** 2, minlength=len(keys))
        on = np.bincount(pos[own], minlength=len(keys)).astype(float)
        big_n, p1, p2 = cn[g_cls] + on, c1[g_cls] + o1, c2[g_cls] + o2
        kf = k.astype(float)
        inform = big_n > kf
        mean = np.where(inform, kf * p1 / np.maximum(big_n, 1), s_in)
        var = kf * (big_n - kf) / np.maximum(big_n * (big_n - 1), 1) * (p2 - p1 * p1 / np.maximum(big_n, 1))
        var = np.where(inform, np.maximum(var, 0.0), 0.0)
        t = np.bincount(g_node, weights=s_in, minlength=n_nodes)
        e = np.bincount(g_node, weights=mean, minlength=n_nodes)
        v = np.bincount(g_node, weights=var, minlength=n_nodes)
        z = np.where(v > 0, (t - e) / np.sqrt(np.where(v > 0, v, 1.0)), 0.0)
        p = np.where(v > 0, ndtr(-z), 1.0)
        # quick effect: the mean of the node's jobs' differences, each clipped at HUBER_K of its class's scale
        counted = inform[pos]
        scale = s_c[pc[counted]]
        diff = np.clip(self.y[pj[counted]] - m_c[pc[counted]], -HUBER_K * scale, HUBER_K * scale)
        total = np.bincount(pn[counted], weights=diff, minlength=n_nodes)
        quick = total / np.maximum(np.bincount(pn[counted], minlength=n_nodes), 1)
        classes = np.bincount(g_node, weights=inform.astype(float), minlength=n_nodes).astype(int)
        jobs = np.bincount(pn, minlength=n_nodes)
        return Round(elig, clean, m_c, s_c, p, quick, classes, jobs, (g_node, g_cls, k, s_in, inform, med))

    def fit(self) -> Round:
        _, n_nodes = self.des.shape
        slow = np.zeros(n_nodes, dtype=bool)
        effect = np.zeros(n_nodes)
        seen: set[bytes] = set()
        current = self._round(slow, effect)
        for self.rounds in range(1, MAX_ROUNDS + 1):
            tested = current.classes > 0
            q = np.ones(n_nodes)
            q[tested] = bh(current.p[tested])
            new = (q < Q_SLOW) & (current.effect > 0)
            signature = np.flatnonzero(new).tobytes()
            if signature in seen:
                break
            seen.add(signature)
            slow, effect = new, current.effect
            current = self._round(slow, effect)
        return self._with_medians(current)

    def _with_medians(self, current: Round) -> Round:
        """The per-(node, class) medians of the jobs left to each node (the Hodges-Lehmann estimates')."""
        pairs = np.flatnonzero(current.elig)
        pj = self.job[pairs]
        keys, med, _ = _segment_medians(self.y[pj], self.node[pairs] * self.n_classes + self.cls[pj])
        g_node, g_cls, k, s_in, inform, _ = current.groups
        assert np.array_equal(keys, g_node * self.n_classes + g_cls)
        return replace(current, groups=(g_node, g_cls, k, s_in, inform, med))

    def results(self) -> list[NodeResult]:
        if self.des.shape[0] == 0:
            return []
        final = self.fit()
        g_node, g_cls, k, s_in, inform, med = final.groups
        n_nodes = self.des.shape[1]
        bounds = np.r_[0, np.cumsum(np.bincount(g_node, minlength=n_nodes))]
        pairs = np.flatnonzero(final.elig)
        pn, pj = self.node[pairs], self.job[pairs]
        by_node = np.argsort(pn, kind="stable")
        pair_bounds = np.r_[0, np.cumsum(np.bincount(pn, minlength=n_nodes))]
        all_jobs = np.bincount(self.node, minlength=n_nodes)
        clean_per_class = np.bincount(self.cls[final.clean], minlength=self.n_classes)
        p = final.p.copy()
        out = []
        for n in range(n_nodes):
            groups = np.arange(bounds[n], bounds[n + 1])
            inf = groups[inform[groups]]
            jobs_n = pj[by_node[pair_bounds[n] : pair_bounds[n + 1]]]
            pool_size = int(clean_per_class[g_cls[inf]].sum())
            if len(inf) and pool_size + len(jobs_n) <= MC_MAX_JOBS:
                p[n] = self._monte_carlo(final, inf, g_cls, k, jobs_n, float(s_in[inf].sum()))
            wanted = set(g_cls[inf].tolist())
            if len(inf) >= CLASS_PAIRS_FROM:
                d = med[groups][inform[groups]] - final.m_c[g_cls[inf]]
                how = "classes"
            else:
                mine = jobs_n[np.fromiter((c in wanted for c in self.cls[jobs_n]), bool, len(jobs_n))]
                d = self.y[mine] - final.m_c[self.cls[mine]]
                how = "jobs"
            center, lo, hi = hodges_lehmann(d)
            out.append(NodeResult(
                node=self.des.nodes[n], effect=center if np.isfinite(center) else 0.0, lower=lo, upper=hi,
                jobs=len(jobs_n), classes=len(inf), p=float(p[n]), q=1.0, differences=how,
                job_rows=np.sort(jobs_n), all_jobs=int(all_jobs[n]),
            ))  # fmt: skip
        tested = [i for i, r in enumerate(out) if r.classes > 0]
        q = bh(np.array([out[i].p for i in tested]))
        for i, qi in zip(tested, q, strict=True):
            r = out[i]
            above = r.effect > 0 and (r.lower is None or r.lower > 0)  # the interval agrees with the test
            out[i] = replace(r, q=float(qi), slow=bool(qi < Q_SLOW and above))
        self.final = final
        return out

    def _monte_carlo(
        self,
        final: Round,
        inf: np.ndarray,
        g_cls: np.ndarray,
        k: np.ndarray,
        jobs_n: np.ndarray,
        observed: float,
    ) -> float:
        """Within-class relabelling: each class's pool (its clean jobs and the node's own) and
        MC_PERMUTATIONS random draws of the node's count from it."""
        psi = _psi((self.y - final.m_c[self.cls]) / final.s_c[self.cls])
        mine = np.zeros(len(self.y), dtype=bool)
        mine[jobs_n] = True
        total = np.zeros(MC_PERMUTATIONS)
        for g in inf:
            c = g_cls[g]
            pool = psi[(self.cls == c) & (final.clean | mine)]
            kk = int(k[g])
            draws = self.rng.random((MC_PERMUTATIONS, len(pool))).argpartition(kk - 1, axis=1)[:, :kk]
            total += pool[draws].sum(axis=1)
        exceed = int(np.sum(total >= observed - 1e-9))
        return (1 + exceed) / (1 + MC_PERMUTATIONS)

    def job_series(self, result: NodeResult) -> pd.DataFrame:
        """The node's jobs (left to it) in time order: start, difference to its class's clean jobs, class."""
        rows = result.job_rows
        frame = pd.DataFrame({
            "start": pd.to_datetime(self.start[rows], utc=True),
            "difference": self.y[rows] - self.final.m_c[self.cls[rows]],
            "class": self.timed["class"].to_numpy()[rows],
        })  # fmt: skip
        return frame.sort_values("start", kind="stable").reset_index(drop=True)

    def level_since(self, result: NodeResult, since: pd.Timestamp) -> NodeResult:
        """The node's effect over its jobs from `since` on, its level after its last change to a slower one
        (the whole history's effect mixes the level before in): the Hodges-Lehmann estimate and interval
        paired as `results` pairs them, its jobs and classes from then; p, q and slow stay those of the test
        over all its jobs, which found it."""
        rows = result.job_rows[self.start[result.job_rows] >= since.value]
        if not len(rows):
            return result
        cls = self.cls[rows]
        classes, med, _ = _segment_medians(self.y[rows], cls)
        if len(classes) >= CLASS_PAIRS_FROM:
            d, how = med - self.final.m_c[classes], "classes"
        else:
            d, how = self.y[rows] - self.final.m_c[cls], "jobs"
        center, lo, hi = hodges_lehmann(d)
        return replace(result, effect=center, lower=lo, upper=hi, jobs=len(rows), classes=len(classes),
                       differences=how, job_rows=rows)  # fmt: skip

    def since(self, result: NodeResult) -> pd.Timestamp | None:
        """The first job after the node's last change to a slower level (None: slow from its first job)."""
        from tailscope.history.changepoint import judge_series

        if len(result.job_rows) < 6:
            return None
        frame = self.job_series(result)
        series = pd.Series(frame["difference"].to_numpy(), index=frame["start"])
        if len(series) > DAILY_FROM:
            series = series.groupby(series.index.floor("D")).median()
        # a larger difference is slower: oriented so that a slower level is a negative shift
        steps = judge_series(series.to_numpy(float), log=False, higher_is_better=False).steps
        for step in reversed(steps):
            if step.shift < 0:
                return pd.Timestamp(series.index[step.index])
        return None
