"""Variants compared as an experiment: does an option (the page policy, the offset in a 1 GiB page) remove
the tail?

The seed's Fig. 8 runs DGEMM on 4 KiB, 2 MiB and 1 GiB pages and sorts the node-scaled results; the 1 GiB
pages remove the slow runs. Here the same question is asked of any campaign holding variants of one probe
that differ in one option (`tailscope run l2sum --page 2m,1g` runs them interleaved on the same node):

- the slow-run rate of each variant (a run is slow when it is more than the primary threshold below its
  node's median for that variant, as in the analysis) with its Clopper-Pearson interval;
- Fisher's exact test (two-sided) of each variant's slow-run count against the reference variant's;
- the shift of the median (candidate vs reference, oriented so that > 0 is faster) with a percentile
  bootstrap interval (1000 resamples, fixed seed: the same campaign gives the same interval);
- one sentence that says what the numbers mean.

The reference is the variant at the option's default when there is one (thp pages, offset 0), else the
first in the option's natural order (4k, thp, 2m, 1g; smaller offsets first).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from tailscope.analysis.binomial import clopper_pearson
from tailscope.analysis.model import CampaignAnalysis, VariantSummary
from tailscope.analysis.run_columns import RunVerdicts
from tailscope.probes.catalogue import PROBES, bytes_label, parse_bytes, variant_name

METHOD = (
    "variant comparison: slow-run rate per variant with its Clopper-Pearson interval; two-sided Fisher's "
    "exact test of slow/not-slow counts against the reference variant; median shift with a percentile "
    "bootstrap interval (1000 resamples, seed 0)"
)
BOOTSTRAP = 1000
# `--by` accepts the option's word too (`--page`); the parameter is page_policy.
BY_ALIASES = {"page_policy": "page_policy", "page": "page_policy", "offset": "offset"}
PAGE_WORDS = {"4k": "4 KiB pages", "thp": "transparent huge pages", "2m": "2 MiB pages", "1g": "1 GiB pages"}


class CompareError(ValueError):
    """Nothing to compare (one variant, or variants differing in more than the chosen option)."""


@dataclass(frozen=True)
class Arm:
    """One variant of the comparison."""

    variant: str
    name: str  # human name, `l2sum 1g`
    value: str  # the compared option's value, `1g`
    label: str  # the value in words, `1 GiB pages`
    n: int
    slow: int
    rate: float
    rate_low: float
    rate_high: float
    median: float
    unit: str
    scaled: tuple[float, ...]  # node-scaled values, sorted slowest first (the seed's Fig. 8)


@dataclass(frozen=True)
class Contrast:
    """A variant against the reference."""

    candidate: str
    reference: str
    fisher_p: float
    odds_ratio: float | None
    median_shift: float  # candidate vs reference, > 0 = faster
    shift_low: float
    shift_high: float
    effect: str  # removes the tail | reduces the tail | adds a tail | no difference shown
    sentence: str


@dataclass(frozen=True)
class Comparison:
    probe: str
    option: str
    threshold: float
    confidence: float
    alpha: float
    arms: tuple[Arm, ...]  # reference first
    contrasts: tuple[Contrast, ...]
    method: str = METHOD

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def option_label(option: str, value: Any) -> str:
    if option == "page_policy":
        return PAGE_WORDS.get(str(value), f"{value} pages")
    if option == "offset":
        return f"offset +{_bytes_text(value)}"
    return f"{option.replace('_', '-')}={value}"


def _bytes_text(value: Any) -> str:
    try:
        return bytes_label(parse_bytes(str(value)))
    except ValueError:
        return str(value)


def _default_of(probe: str, option: str) -> Any:
    spec = PROBES.get(probe)
    if spec is None:
        return None
    return next((o.default for o in spec.all_options if o.dest == option), None)


def _order_key(probe: str, option: str, value: Any) -> tuple[int, float, str]:
    spec = PROBES.get(probe)
    opt = next((o for o in spec.all_options if o.dest == option), None) if spec else None
    if opt is not None and opt.choices and str(value) in opt.choices:
        return (0, float(opt.choices.index(str(value))), "")
    if opt is not None and opt.metavar == "BYTES":
        try:
            return (0, float(parse_bytes(str(value))), "")
        except ValueError:
            pass
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _value_of(v: VariantSummary, option: str) -> Any:
    default = _default_of(v.probe, option)
    return v.params.get(option, default)


def comparable_sets(
    analysis: CampaignAnalysis, by: str | None = None
) -> list[tuple[str, str, list[VariantSummary]]]:
    """(probe, option, variants) for each probe whose variants differ in exactly one option (`by` when set).

    With `by`, variants are grouped by all their other options, so a sweep inside a larger campaign works.
    """
    option_wanted = BY_ALIASES.get(by, by) if by else None
    by_probe: dict[str, list[VariantSummary]] = defaultdict(list)
    for v in analysis.variants:
        by_probe[v.probe].append(v)
    out = []
    for probe, variants in sorted(by_probe.items()):
        if len(variants) < 2:
            continue
        keys = sorted({k for v in variants for k in v.params})
        differing = [k for k in keys if len({str(_value_of(v, k)) for v in variants}) > 1]
        if option_wanted is None:
            if len(differing) == 1:
                out.append((probe, differing[0], variants))
            continue
        if option_wanted not in differing:
            continue
        rest = [k for k in differing if k != option_wanted]
        groups: dict[tuple[str, ...], list[VariantSummary]] = defaultdict(list)
        for v in variants:
            groups[tuple(str(_value_of(v, k)) for k in rest)].append(v)
        for members in groups.values():
            if len(members) >= 2:
                out.append((probe, option_wanted, members))
    return out


def compare(analysis: CampaignAnalysis, by: str | None = None) -> list[Comparison]:
    """Every comparison the campaign holds (empty when no probe has variants differing in one option)."""
    sets = comparable_sets(analysis, by)
    if not sets:  # the runs are not even looked at
        return []
    runs = RunVerdicts.of(analysis.runs)  # by column: no object per run
    variant_of = runs.column("variant")
    rows_of = {v.variant: np.flatnonzero(variant_of == v.variant) for _, _, members in sets for v in members}
    value = runs.column("value")
    settings = analysis.settings
    out = []
    for probe, option, variants in sets:
        ordered = sorted(variants, key=lambda v: _order_key(probe, option, _value_of(v, option)))
        default = _default_of(probe, option)
        ref = next(
            (v for v in ordered if default is not None and str(_value_of(v, option)) == str(default)), None
        )
        if ref is not None:
            ordered = [ref, *[v for v in ordered if v is not ref]]
        arms = tuple(_arm(v, option, runs.take(rows_of[v.variant]), settings.confidence) for v in ordered)
        arms = tuple(a for a in arms if a.n > 0)
        if len(arms) < 2:
            continue
        hib = ordered[0].higher_is_better
        values = {v.variant: np.asarray(value[rows_of[v.variant]], dtype=float) for v in ordered}
        contrasts = tuple(
            _contrast(arm, arms[0], values[arm.variant], values[arms[0].variant], hib, settings.alpha, option)
            for arm in arms[1:]
        )
        out.append(
            Comparison(
                probe=probe,
                option=option,
                threshold=settings.primary_threshold,
                confidence=settings.confidence,
                alpha=settings.alpha,
                arms=arms,
                contrasts=contrasts,
            )
        )
    return out


def _arm(v: VariantSummary, option: str, runs: RunVerdicts, confidence: float) -> Arm:
    """One variant's arm from its runs' columns."""
    n = len(runs)
    k = int(np.count_nonzero(runs.column("slow")))
    low, high = clopper_pearson(k, n, confidence) if n else (0.0, 1.0)
    values = runs.column("value").tolist()
    scaled = sorted(runs.column("scaled_value").tolist())
    if v.higher_is_better is False:
        scaled = scaled[::-1]  # slowest first: the largest times
    value = _value_of(v, option)
    return Arm(
        variant=v.variant,
        name=variant_name(v.probe, v.params),
        value=_bytes_text(value) if option == "offset" else str(value),
        label=option_label(option, value),
        n=n,
        slow=k,
        rate=k / n if n else 0.0,
        rate_low=low,
        rate_high=high,
        median=float(np.median(values)) if values else math.nan,
        unit=v.unit,
        scaled=tuple(scaled),
    )


def median_shift(
    candidate: np.ndarray, reference: np.ndarray, higher_is_better: bool, confidence: float
) -> tuple[float, float, float]:
    """Relative shift of the candidate's median vs the reference's (> 0 = faster), bootstrap interval."""

    def shift(c: np.ndarray, r: np.ndarray) -> np.ndarray:
        return c / r - 1.0 if higher_is_better else r / c - 1.0

    est = float(shift(np.median(candidate), np.median(reference)))
    rng = np.random.default_rng(0)
    draws = []
    for start in range(0, BOOTSTRAP, 100):
        b = min(100, BOOTSTRAP - start)
        c = np.median(rng.choice(candidate, size=(b, candidate.size)), axis=1)
        r = np.median(rng.choice(reference, size=(b, reference.size)), axis=1)
        draws.append(shift(c, r))
    boot = np.concatenate(draws)
    a = (1.0 - confidence) / 2.0
    return est, float(np.quantile(boot, a)), float(np.quantile(boot, 1.0 - a))


def _contrast(
    cand: Arm,
    ref: Arm,
    cand_values: np.ndarray,
    ref_values: np.ndarray,
    higher_is_better: bool,
    alpha: float,
    option: str,
) -> Contrast:
    from scipy.stats import fisher_exact  # 0.5 s to import: only where variants are compared (not `report`)

    table = [[cand.slow, cand.n - cand.slow], [ref.slow, ref.n - ref.slow]]
    odds, p = fisher_exact(table, alternative="two-sided")
    odds_ratio = None if not math.isfinite(float(odds)) else float(odds)
    est, low, high = median_shift(cand_values, ref_values, higher_is_better, 0.95)
    what = "page policy" if option == "page_policy" else option.replace("_", " ")
    if p < alpha and cand.rate < ref.rate:
        effect = "removes the tail" if cand.slow == 0 else "reduces the tail"
    elif p < alpha:
        effect = "adds a tail"
    else:
        effect = "no difference shown"
    counts = (
        f"{cand.label}: {cand.slow} of {cand.n} runs slow vs {ref.slow} of {ref.n} with {ref.label}, "
        f"p = {_p(p)}"
    )
    if effect == "no difference shown":
        judged = (
            f"no evidence that the {what} changes the tail (Fisher's exact test, alpha {alpha:g}); "
            f"{_detectable(cand.n, ref.n)}"
        )
    else:
        judged = f"the {what} {effect}"
    direction = "faster" if est >= 0 else "slower"
    shift_text = f"median {abs(est):.1%} {direction} (95% interval {low:+.1%} to {high:+.1%})"
    sentence = f"{counts}: {judged}; {shift_text}."
    return Contrast(
        candidate=cand.variant,
        reference=ref.variant,
        fisher_p=float(p),
        odds_ratio=odds_ratio,
        median_shift=est,
        shift_low=low,
        shift_high=high,
        effect=effect,
        sentence=sentence,
    )


def _p(p: float) -> str:
    return "< 0.001" if p < 0.001 else f"{p:.3f}" if p < 0.1 else f"{p:.2f}"


def _detectable(n1: int, n2: int) -> str:
    """What the sample sizes could see: a rate with no slow run among n is below about 3/n at 95%."""
    n = min(n1, n2)
    return (
        f"with {n} runs per variant only large differences show (no slow run in {n} still allows a rate "
        f"up to {3 / n:.0%})"
    )


def render_comparison(c: Comparison) -> list[str]:
    """Plain-text lines of one comparison (the `compare` verb and the terminal summary)."""
    lines = [
        f"{c.probe}: variants differing in {c.option} (slow = more than {c.threshold:.0%} below the node "
        f"median; {c.confidence:.0%} Clopper-Pearson intervals)"
    ]
    width = max(len(a.label) for a in c.arms)
    for i, a in enumerate(c.arms):
        ref = "  (reference)" if i == 0 else ""
        lines.append(
            f"  {a.label:<{width}}  {a.slow:>4d} of {a.n:<5d} slow  {a.rate:6.1%} "
            f"[{a.rate_low:.1%}, {a.rate_high:.1%}]  median {a.median:.4g} {a.unit}{ref}"
        )
    for k in c.contrasts:
        lines.append(f"  {k.sentence}")
    return lines
