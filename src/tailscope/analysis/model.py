"""What an analysis produces: plain frozen dataclasses shared by analysis, CLI (--json) and report.

Conventions used throughout:
- A *performance ratio* is oriented so that < 1 is slower: value / node_median for higher-is-better
  metrics (GB/s, GFLOPS), node_median / value for lower-is-better ones (seconds, microseconds).
- A run is *slow at threshold d* when its performance ratio is below 1 - d (default d = 5% and 10%).
- The *node-scaled value* is the seed's Fig. 1 scaling: value * (variant global median / node median).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
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
    # Verdict limits (analysis/health.py), on by default; None = not checked. They are printed with the
    # verdict. `check`, `analyze` and `verdict --nhc` use the same ones.
    max_slow_rate: float | None = 0.01  # degraded when the tail-count test rejects p <= this
    max_q01_drop: float | None = 0.005  # SJTU rule (seed 003): degraded when (median - q01)/median > this...
    floor_sds: float = 4.0  # ...or than this many robust sds of the node's own noise, where that is larger
    max_cv: float | None = None  # degraded when a node's coefficient of variation exceeds this (absolute)
    max_cv_ratio: float | None = 3.0  # degraded when CV > this x the robust CV (noise floor) and > 1%
    max_busy_share: float = 0.10  # inconclusive when others took more of the probe CPUs in the median trial
    # degraded when the level's anytime-valid confidence sequence against the node's baseline (its history,
    # else the fleet's) lies wholly more than this below it (analysis/sequential.py); only with a baseline
    max_level_drop: float | None = 0.05

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
    rejects: bool  # the slow-run test says more slow runs than p0 allows (the `!` beside the count)
    # which test `rejects` is: "binomial" (p_value < alpha, fixed trial counts), or "anytime-valid" in a
    # campaign stopped when settled (analysis/sequential.py's, at the primary threshold only: a fixed-n test
    # looked at after every trial has no error rate, so its p_value is only a description there)
    test: str = "binomial"


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
    page_policy: str | None = None  # runs.page_policy: 4k | thp | 2m | 1g (the default is stored too)


@dataclass(frozen=True)
class KindEvidence:
    """Why a slow run was called systematic or transient (iteration ratios are vs. typical iterations)."""

    iterations: int  # non-warm-up iterations looked at
    low: int  # iterations with ratio < 1 - threshold / 2
    fraction_low: float
    median_ratio: float
    min_ratio: float
    spread: float  # interquartile range of iteration ratios
    low_cut: float = 0.975  # an iteration is low below this ratio to the reference (classify.low_cut)
    reference: float | None = None  # the typical iteration value (metric unit) when the run has one record


@dataclass(frozen=True)
class ClusterSettings:
    """How nodes are screened against their peers; set in the campaign spec's [cluster] table."""

    alpha_drain: float = 0.05  # family-wise error across the nodes (Bonferroni)
    alpha_retest: float = 0.10  # false-discovery rate (Benjamini-Hochberg)
    min_node_effect: float = 0.01  # a flagged node is at least this much slower than the median node
    bins: int = 0  # speed bins; 0 = the smallest k whose bins span at most bin_tolerance
    bin_tolerance: float = 0.01


@dataclass(frozen=True)
class CauseFinding:
    """One cause of the catalogue (analysis/causes) applied to one run or node, with what it read."""

    cause: str  # the catalogue's name: cpu-contention, os-noise, ..., unknown
    score: float  # 0..1: the share of the slowdown the evidence accounts for (ranking key)
    confidence: Literal["high", "medium", "low"]
    evidence: dict[str, Any]  # the values read, by name (JSON-ready)
    sentence: str  # plain words with the evidence values
    mitigation: str  # what to do about it


NodeState = Literal["healthy", "degraded", "inconclusive"]


@dataclass(frozen=True)
class NodeHealth:
    """The verdict of one node (analysis/health.py): one screen for terminal, report, NHC, Prometheus."""

    node: str
    verdict: NodeState
    reasons: tuple[str, ...]  # plain words, most important first, each with its numbers
    causes: tuple[CauseFinding, ...]  # ranked node-level causes (degraded: why; inconclusive: busy)
    limits: tuple[str, ...]  # the limits applied, in words
    busy_share: float | None = None  # others' share of the probe CPUs, median trial (None: no evidence)
    drain: bool = False  # the fleet screen (cluster) says drain
    retest: bool = False  # the fleet screen selects it for a re-test


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
    flagged: bool = False  # slow, a robust outlier, or failing its node's quantile rule: get kind and causes
    causes: tuple[CauseFinding, ...] = ()  # ranked, most likely first (analysis/causes); flagged runs only
    # every figure the run reports beyond its headline (analysis/figures.py: {name, value, unit,
    # higher_is_better, params}); filled for `analyze --json`, empty elsewhere
    figures: tuple[dict[str, Any], ...] = ()


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
class Claim:
    """What a stopped probe's anytime-valid confidence sequences allow to say (analysis/sequential.py)."""

    probe: str
    variant: str
    node: str
    kind: Literal["level", "slow_rate"]
    relation: Literal["within", "below", "above"]  # level within / below the baseline; rate below / above
    bound: float  # level: the drop (0.02 = 2% below the baseline at most / at least); rate: the rate
    confidence: float
    trials: int
    text: str


@dataclass(frozen=True)
class Verdict:
    passed: bool  # every node healthy
    checks: tuple[Check, ...]
    state: NodeState = "healthy"  # the worst node: degraded > inconclusive > healthy


@dataclass(frozen=True)
class CampaignAnalysis:
    campaign: str
    settings: Settings
    variants: tuple[VariantSummary, ...]
    groups: tuple[GroupSummary, ...]
    runs: Sequence[RunVerdict]  # a tuple, or the runs by column (analysis/run_columns.RunVerdicts)
    verdict: Verdict
    notes: tuple[str, ...]  # plain-words findings and warnings, most important first
    methods: dict[str, str] = field(default_factory=dict)  # statistic -> how it was computed, with source
    # Node ensembles (analysis/cluster.py ClusterSummary), one per variant with >= 3 nodes; empty otherwise.
    cluster: tuple[Any, ...] = ()
    # Which counters explain the slow runs (analysis/attribution.py); None when no run has counters.
    attribution: dict[str, Any] | None = None
    nodes: tuple[NodeHealth, ...] = ()  # one verdict per node (analysis/health.py)
    # A campaign stopped when settled (`check`, `run --until-settled`): what each probe's anytime-valid
    # confidence sequences claim (analysis/sequential.py); empty for a campaign of fixed trial counts.
    claims: tuple[Claim, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The `analyze --json` object: runs, groups, variants, verdict, settings, notes, methods (the runs as
        objects, whatever holds them: analysis/run_columns.py keeps them by column)."""
        runs = self.runs if isinstance(self.runs, tuple) else tuple(self.runs)
        return asdict(replace(self, runs=runs))
