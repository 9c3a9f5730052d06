"""An application's reference figure (`run --reference VALUE:-TOL,+TOL`, ReFrame's reference tuples): parsed
here, where the verdict's reference check (verdict.py) reads it from the stored parameters, and by
app/figures.py when the command line is checked."""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailscope.errors import InputError


class ReferenceError(InputError, ValueError):
    """A reference that cannot be used (exit 2)."""


@dataclass(frozen=True)
class Reference:
    """`--reference VALUE:-TOL,+TOL` (percent): the site's expected headline and its bounds."""

    value: float
    lower_pct: float
    upper_pct: float

    @classmethod
    def parse(cls, text: str) -> Reference:
        bad = ReferenceError(f"--reference {text!r}: expected VALUE:-TOL,+TOL in percent, e.g. 785:-5,+10")
        value, sep, tols = text.partition(":")
        low, sep2, high = tols.partition(",")
        if not sep or not sep2:
            raise bad
        try:
            v, lo, hi = float(value), float(low), float(high)
        except ValueError:
            raise bad from None
        if not all(math.isfinite(x) for x in (v, lo, hi)) or lo > 0 or hi < 0 or v == 0:
            raise ReferenceError(
                f"--reference {text!r}: VALUE must be finite and non-zero, -TOL <= 0 <= +TOL"
            )
        return cls(v, lo, hi)

    @property
    def bounds(self) -> tuple[float, float]:
        a, b = self.value * (1 + self.lower_pct / 100), self.value * (1 + self.upper_pct / 100)
        return (min(a, b), max(a, b))

    def within(self, x: float) -> bool:
        low, high = self.bounds
        return low <= x <= high
