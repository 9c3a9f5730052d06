"""How many runs it takes to tell a node that is delta slower from run-to-run noise sigma.

One-sided z-test of a node's mean against the fleet, normal approximation: the number of runs is
n = ((z_(1-alpha) + z_power) x sigma / delta)^2, rounded up (e.g. Chow, Shao & Wang, "Sample Size
Calculations in Clinical Research", one-sample mean, one-sided). With alpha = 0.01 and power = 0.9:
sigma = 0.13%, delta = 1% -> 1 run; sigma = 1% -> 14; sigma = 2% -> 53; sigma = 2%, delta = 0.5% -> 209
(notes/statistics.md "Power"). Quiet probes are what make node screening cheap.
"""

from __future__ import annotations

import math

from tailscope.analysis.distributions import normal_ppf

METHOD = "runs to detect a slow node: n = ((z_(1-alpha) + z_power) sigma / delta)^2, one-sided, normal"


def runs_to_detect_shift(sigma: float, delta: float, alpha: float = 0.01, power: float = 0.9) -> int:
    """Runs per node to detect a relative slowdown `delta` with per-run relative noise `sigma` (>= 1)."""
    if sigma < 0 or delta <= 0:
        raise ValueError(f"need sigma >= 0 and delta > 0, got sigma={sigma}, delta={delta}")
    if not (0 < alpha < 1 and 0 < power < 1):
        raise ValueError(f"alpha and power must be in (0, 1), got alpha={alpha}, power={power}")
    z = float(normal_ppf(1.0 - alpha) + normal_ppf(power))
    return max(1, math.ceil((z * sigma / delta) ** 2 - 1e-9))
