"""What an analysis produces: plain frozen dataclasses shared by analysis, CLI (--json) and report.

Conventions used throughout:
- A *performance ratio* is oriented so that < 1 is slower: value / node_median for higher-is-better
  metrics (GB/s, GFLOPS), node_median / value for lower-is-better ones (seconds, microseconds).
- A run is *slow at threshold d* when its performance ratio is below 1 - d (default d = 5% and 10%).
- The *node-scaled value* is the seed's Fig. 1 scaling: value * (variant global median / node median).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

RunKind = Literal["systematic", "transient", "none", "unclassified"]


@dataclass(frozen=True)
class Settings:
    """Every knob of an analysis, recorded with its result."""

    thresholds: tuple[float, ...] = (0.05, 0.10)  # slow if perf ratio < 1 - d; the first is primary
    allowed_slow_rate: float = 0.01  # p0 of the binomial tail-count test
    alpha: float = 0.05  # significance of the tail-count test
    confidence: float = 0.95  # coverage of confidence intervals
    quantile_rule_q: float = 0.01  # SJTU rule: (q - median) / median > limit
    quantile_rule_limit: float = -0.005
    robust_cut: float = 3.5  # one-sided modified z-score (Iglewicz & Hoaglin)
    given_rate: float = 0.005  # rate for "trials needed" when none was observed (seed: 1 in 200)
    # User-set verdict limits; None = not checked. Exit code 1 when a checked limit fails.
    max_slow_rate: float | None = None  # fail when the tail-count test rejects p <= this
    max_q01_drop: float | None = None  # fail when the quantile rule's drop is below -this
    max_cv: float | None = None  # fail when a node's coefficient of variation exceeds this

    @property
    def primary_threshold(self) -> float:
        return self.thresholds[0]


@dataclass(frozen=True)
class QuantileCI:
    """Exact order-statistic interval X(lower_rank) <= x_q <= X(upper_rank) (ranks 1-based, ascending)."""

    q: float
    estimate: float
    lower: float | None  # None when no interval with the requested coverage exists for this n
    upper: float | None
    lower_rank: int | None
    upper_rank: int | None
    coverage: float | None


@dataclass(frozen=True)
class TailCount:
    """Runs slower than `threshold` below the node median, tested against an allowed rate p0."""

    threshold: float
    k: int
    n: int
    rate: float
    rate_low: float  # Clopper-Pearson interval of the rate
    rate_high: float
    p0: float
    p_value: float  # one-sided binomial P(X >= k | n, p0)
    rejects: bool  # p_value < alpha: more slow runs than p0 allows


@dataclass(frozen=True)
class QuantileRule:
    """The SJTU acceptance rule: (q-quantile - median) / median > limit, in the performance direction."""

    q: float
    quantile: float
    drop: float  # (quantile - median) / median, oriented so that negative is slower
    limit: float
    passed: bool


@dataclass(frozen=True)
class TrialsNeeded:
    """Trials needed to see at least one event of per-run probability `rate` with `confidence`."""

    rate: float
    rate_source: Literal["observed", "given"]
    confidence: float
    trials: int | None  # None when rate is 0


@dataclass(frozen=True)
class GroupSummary:
    """Statistics of one (variant, node) ensemble of ok runs."""

    probe: str
    variant: str
    node: str
    metric: str
    unit: str
    higher_is_better: bool
    n: int
    n_failed: int
    median: float
    median_ci: QuantileCI
    minimum: float
    maximum: float
    mean: float
    sd: float | None  # undefined for n = 1
    cv: float | None
    mad: float
    low_quantile: QuantileCI  # the q01 on the slow side, with its interval
    quantile_rule: QuantileRule
    tails: tuple[TailCount, ...]
    n_slow: int  # at the primary threshold
    n_systematic: int
    n_transient: int
    trials_needed: tuple[TrialsNeeded, ...]
    extras: dict[str, Any] = field(default_factory=dict)  # probe-specific (fwq noise, ...)
    # The node against the fleet (added by analysis; defaults keep older constructors working):
    node_ratio: float = 1.0  # node median vs the variant's global median, oriented (< 1 = slower node)
    node_score: float = 0.0  # one-sided modified z of log node_ratio across the variant's nodes
    node_outlier: bool = False  # node_score < -robust_cut: this node is slower than its peers


@dataclass(frozen=True)
class VariantSummary:
    """One probe variant across all nodes: the global median used for node scaling."""

    probe: str
    variant: str
    params: dict[str, Any]
    metric: str
    unit: str
    higher_is_better: bool
    nodes: int
    n: int
    global_median: float


@dataclass(frozen=True)
class KindEvidence:
    """Why a slow run was called systematic or transient (iteration ratios are vs. typical iterations)."""

    iterations: int  # non-warm-up iterations looked at
    low: int  # iterations with ratio < 1 - threshold / 2
    fraction_low: float
    median_ratio: float
    min_ratio: float
    spread: float  # interquartile range of iteration ratios


@dataclass(frozen=True)
class ClusterSettings:
    """How nodes are screened against their peers; set in the campaign spec's [cluster] table."""

    alpha_drain: float = 0.05  # family-wise error across the nodes (Bonferroni)
    alpha_retest: float = 0.10  # false-discovery rate (Benjamini-Hochberg)
    min_node_effect: float = 0.01  # a flagged node is at least this much slower than the median node
    bins: int = 0  # speed bins; 0 = the smallest k whose bins span at most bin_tolerance
    bin_tolerance: float = 0.01


@dataclass(frozen=True)
class RunVerdict:
    run_id: str
    node: str
    probe: str
    variant: str
    trial: int
    started_at: str  # ISO 8601, UTC
    value: float
    unit: str
    perf_ratio: float
    scaled_value: float
    robust_score: float  # modified z of log perf ratio; negative = slow side
    robust_outlier: bool
    slow: bool  # at the primary threshold
    slowdown: float  # 1 - perf_ratio
    kind: RunKind
    evidence: KindEvidence | None
    extras: dict[str, Any] = field(default_factory=dict)  # probe-specific per-run numbers (fwq noise)


@dataclass(frozen=True)
class Check:
    """One verdict check with the numbers it used and a plain-words message."""

    name: str
    scope: str  # "variant/node"
    observed: float
    limit: float
    passed: bool
    message: str


@dataclass(frozen=True)
class Verdict:
    passed: bool
    checks: tuple[Check, ...]


@dataclass(frozen=True)
class CampaignAnalysis:
    campaign: str
    settings: Settings
    variants: tuple[VariantSummary, ...]
    groups: tuple[GroupSummary, ...]
    runs: tuple[RunVerdict, ...]
    verdict: Verdict
    notes: tuple[str, ...]  # plain-words findings and warnings, most important first
    methods: dict[str, str] = field(default_factory=dict)  # statistic -> how it was computed, with source
    # Node ensembles (analysis/cluster.py ClusterSummary), one per variant with >= 3 nodes; empty otherwise.
    cluster: tuple[Any, ...] = ()
    # Which counters explain the slow runs (analysis/attribution.py); None when no run has counters.
    attribution: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The `analyze --json` object: runs, groups, variants, verdict, settings, notes, methods."""
        return asdict(self)
