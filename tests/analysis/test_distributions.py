"""analysis/distributions.py gives scipy.stats' numbers exactly, without importing scipy.stats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from tailscope.analysis import distributions as d

NS = [1, 2, 5, 6, 50, 299, 300, 1000]
PS = [0.0, 0.004, 0.01, 0.05, 0.5, 0.95, 0.99, 1.0]


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_binomial_is_scipy_stats_bit_for_bit(n: int, p: float) -> None:
    k = np.arange(-2, n + 3)  # outside the support too
    np.testing.assert_array_equal(d.binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
    np.testing.assert_array_equal(d.binom_sf(k, n, p), stats.binom.sf(k, n, p))
    assert d.binom_sf(-1, n, p) == 1.0 and d.binom_cdf(n, n, p) == 1.0  # scalars stay scalars
    assert np.ndim(d.binom_sf(3, n, p)) == 0


def test_beta_normal_f_are_scipy_stats_bit_for_bit() -> None:
    rng = np.random.default_rng(11)
    q = rng.random(200)
    a, b = rng.integers(1, 3000, 200), rng.integers(1, 3000, 200)
    np.testing.assert_array_equal(d.beta_ppf(q, a, b), stats.beta.ppf(q, a, b))
    x = rng.normal(size=200) * 4
    np.testing.assert_array_equal(d.normal_cdf(x), stats.norm.cdf(x))
    np.testing.assert_array_equal(d.normal_cdf(-np.inf), 0.0)
    np.testing.assert_array_equal(d.normal_ppf(q), stats.norm.ppf(q))
    f = rng.random(200) * 6
    np.testing.assert_array_equal(d.f_sf(f, a, b), stats.f.sf(f, a, b))
    np.testing.assert_array_equal(d.f_ppf(q, a, b), stats.f.ppf(q, a, b))


@pytest.mark.parametrize("size", [0, 1, 2, 7, 500])
def test_bh_is_false_discovery_control(size: int) -> None:
    rng = np.random.default_rng(size)
    p = rng.random(size) ** 3
    if size > 2:
        p[:3] = p[3]  # ties
    want = stats.false_discovery_control(p, method="bh") if size else np.zeros(0)
    np.testing.assert_array_equal(d.bh_adjusted(p), want)


def test_bh_refuses_what_scipy_refuses() -> None:
    for bad in ([0.1, np.nan], [0.1, 1.5], [-0.1, 0.2]):
        with pytest.raises(ValueError):
            stats.false_discovery_control(bad, method="bh")
        with pytest.raises(ValueError):
            d.bh_adjusted(bad)


def test_analysis_does_not_import_scipy_stats() -> None:
    # The point of the module: analyze (summary, cluster, notes) runs without scipy.stats' import cost.
    code = (
        "import sys\nimport tailscope.analysis.summary\n"
        "print(sorted(m for m in sys.modules if m.startswith('scipy.stats')))"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
