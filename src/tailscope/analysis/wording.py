"""How numbers are written in checks and notes (one place, so every message reads the same)."""

from __future__ import annotations

from collections.abc import Sequence

from tailscope.analysis.model import GroupSummary


def pct(fraction: float) -> str:
    """0.015 -> '1.5%', 0.05 -> '5%', 0.00048 -> '0.048%', 0.99996 -> '>99.9%'."""
    v = 100.0 * fraction
    if v == 0.0:
        return "0%"
    if 99.95 <= v < 100.0:
        return ">99.9%"  # rounding would say 100%, which it is not
    if abs(v) >= 1.0:
        return f"{v:.1f}".removesuffix(".0") + "%"
    return f"{v:.2g}%"


def pct_range(low: float, high: float) -> str:
    """An interval of two fractions: '0.3-4.3%'."""
    return f"{pct(low)[:-1]}-{pct(high)}"


def quantity(value: float, unit: str) -> str:
    """A measured value with its unit, 4 significant digits: '95.12 GB/s'."""
    return f"{value:.4g} {unit}".rstrip()


def p_value(p: float) -> str:
    return f"{p:.2g}"


def where(group: GroupSummary) -> str:
    """The scope a finding is about: 'node n1, l2sum-1a2b'."""
    return where_node(group.node, group.variant)


def where_node(node: str, variant: str) -> str:
    return f"node {node}, {variant}"


def period(seconds: float) -> str:
    """0.004 -> '4 ms', 1.5 -> '1.5 s', 2e-5 -> '20 us'."""
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    return f"{seconds * 1e6:.3g} us"


def some(names: Sequence[str], limit: int = 5) -> str:
    """'n1, n2, n3' or 'n1, n2, n3, n4, n5 and 7 more'."""
    shown = ", ".join(names[:limit])
    rest = len(names) - limit
    return f"{shown} and {rest} more" if rest > 0 else shown


def runs_word(n: int) -> str:
    return "1 run" if n == 1 else f"{n} runs"


def were(k: int) -> str:
    """Verb agreeing with a count of runs: '1 of 30 runs was', '2 of 30 runs were'."""
    return "was" if k == 1 else "were"
