"""How the report and the terminal summary write numbers that belong together (a median and its interval).

Percentages, p-values and single quantities come from `tailscope.analysis.wording` (the notes and checks
use the same); this module adds what only the renderers need: several values written with the decimals of
one reference value, byte sizes, and the short cells of the group tables.
"""

from __future__ import annotations

import math

from tailscope.analysis.model import GroupSummary, TailCount
from tailscope.analysis.wording import pct, pct_range

__all__ = ["bytes_text", "decimals_for", "kinds_text", "median_ci_text", "tail_text", "value_text"]

SIGNIFICANT = 4  # digits of a measured value: 95.12 GB/s, 2405 GFLOPS, 0.1234 s


def decimals_for(reference: float, significant: int = SIGNIFICANT) -> int:
    """Decimals that give `reference` its significant digits: 95.12 -> 2, 2405.3 -> 0, 0.01234 -> 5."""
    if not math.isfinite(reference) or reference == 0.0:
        return 2
    return max(0, significant - 1 - math.floor(math.log10(abs(reference))))


def value_text(value: float | None, decimals: int) -> str:
    """A value with fixed decimals; '-' for a missing or non-finite one."""
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{decimals}f}"


def median_ci_text(group: GroupSummary, *, unit: bool = True) -> str:
    """'95.12 [94.98, 95.20] GB/s': the median and its exact interval with the median's decimals.

    Without an interval (fewer runs than a median interval needs): '95.12 [no CI, n=4] GB/s'.
    """
    d = decimals_for(group.median)
    ci = group.median_ci
    if ci.lower is None or ci.upper is None:
        interval = f"[no CI, n={group.n}]"
    else:
        interval = f"[{value_text(ci.lower, d)}, {value_text(ci.upper, d)}]"
    text = f"{value_text(group.median, d)} {interval}"
    return f"{text} {group.unit}" if unit and group.unit else text


def tail_text(tail: TailCount) -> str:
    """'3/200'."""
    return f"{tail.k}/{tail.n}"


def tail_rate_text(tail: TailCount) -> str:
    """'1.5% [0.31-4.3%]': the slow-run rate and its Clopper-Pearson interval."""
    return f"{pct(tail.rate)} [{pct_range(tail.rate_low, tail.rate_high)}]"


def kinds_text(group: GroupSummary) -> str:
    """'2 systematic, 1 transient' over the slow runs at the primary threshold; '-' when none."""
    unclassified = group.n_slow - group.n_systematic - group.n_transient
    parts = [
        f"{k} {name}"
        for k, name in (
            (group.n_systematic, "systematic"),
            (group.n_transient, "transient"),
            (unclassified, "unclassified"),
        )
        if k > 0
    ]
    return ", ".join(parts) if parts else "-"


def bytes_text(n: float | None) -> str:
    """1536 -> '1.5 KiB', 48 * 1024 -> '48 KiB', 2**30 -> '1 GiB'; '-' when missing."""
    if n is None or not math.isfinite(float(n)):
        return "-"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024.0 or unit == "TiB":
            return f"{value:.4g} {unit}"
        value /= 1024.0
    raise AssertionError("unreachable")
