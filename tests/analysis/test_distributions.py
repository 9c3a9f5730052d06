"""analysis/distributions.py gives scipy.stats' numbers (relative 1e-10) with numpy and math only.

scipy stays the referee here. Where scipy's own value is below 1e-280 its Boost functions underflow to 0
or lose digits (binom.sf(78, 100, 1e-4) = 2.03763e-295 against the exact 2.03761e-295); there the module
is checked against exact rational arithmetic instead (test_deep_binomial_tails_are_exact).
"""

from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy import special, stats

from installed import tailscope_env
from tailscope.analysis import distributions as d
from tailscope.store.limits import MAX_TRIALS

RTOL = 1e-10
RESOLVED = 1e-280  # below this scipy's value is not a reference (see the module docstring)


def assert_close(got: object, want: object) -> None:
    """Relative difference <= RTOL where scipy resolves the value; both tiny where it does not."""
    g, w = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert g.shape == w.shape
    np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
    g, w = g[~np.isnan(w)], w[~np.isnan(w)]
    resolved = np.abs(w) >= RESOLVED
    both_infinite = np.isinf(w) & (g == w)
    with np.errstate(invalid="ignore"):
        rel = np.where(both_infinite, 0.0, np.abs(g - w) / np.where(w == 0.0, 1.0, np.abs(w)))
    bad = resolved & ~(rel <= RTOL)
    assert not bad.any(), (
        f"{bad.sum()} values differ, worst {rel[bad].max():.3g}: {g[bad][:3]} vs {w[bad][:3]}"
    )
    assert np.all(np.abs(g[~resolved]) < 1e-270), g[~resolved].max()


NS = [1, 2, 5, 6, 50, 299, 300, 1000, 20_000]
PS = [0.0, 1e-6, 0.004, 0.01, 0.05, 0.3, 0.5, 0.95, 0.99, 0.999, 1.0 - 1e-6, 1.0]


@pytest.mark.parametrize("n", NS)
@pytest.mark.parametrize("p", PS)
def test_binomial_is_scipy_stats_every_k(n: int, p: float) -> None:
    k = np.arange(-2, n + 3)  # outside the support too
    assert_close(d.binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
    assert_close(d.binom_sf(k, n, p), stats.binom.sf(k, n, p))
    assert d.binom_sf(-1, n, p) == 1.0 and d.binom_cdf(n, n, p) == 1.0  # scalars stay scalars
    assert isinstance(d.binom_sf(3, n, p), np.float64)


@pytest.mark.parametrize("n", [200_000, MAX_TRIALS])
def test_binomial_is_scipy_stats_up_to_the_largest_campaign(n: int) -> None:
    rng = np.random.default_rng(n)
    for p in [1e-6, 1e-4, 0.004, 0.3, 0.5, 0.999, rng.random()]:
        around_mean = np.round(n * p + np.arange(-4000, 4000, 3))
        k = np.unique(
            np.concatenate([rng.integers(0, n, 3000), np.arange(60), n - np.arange(1, 60), around_mean])
        )
        k = k[(k >= 0) & (k < n)]
        assert_close(d.binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
        assert_close(d.binom_sf(k, n, p), stats.binom.sf(k, n, p))


def _exact_cdfs(n: int, p: float) -> list[Fraction]:
    """P(B <= k) for k = 0..n-1 in exact rational arithmetic on the binary value of p."""
    q = Fraction(p)
    m, e = q.numerator, q.denominator  # p = m / e, 1 - p = (e - m) / e
    term, total, out = (e - m) ** n, 0, []  # term_j = C(n, j) m^j (e - m)^(n - j), exact integers
    for j in range(n):
        total += term
        out.append(Fraction(total, e**n))
        term = term * (n - j) * m // ((j + 1) * (e - m))
    return out


@pytest.mark.parametrize(("n", "p"), [(100, 1e-4), (299, 0.95), (1000, 0.5495936876730595), (1000, 0.004)])
def test_deep_binomial_tails_are_exact(n: int, p: float) -> None:
    # Down to 1e-300, where scipy's Boost underflows or loses digits: against the exact sums.
    for k, cdf in enumerate(_exact_cdfs(n, p)):
        for got, exact in ((d.binom_cdf(k, n, p), float(cdf)), (d.binom_sf(k, n, p), float(1 - cdf))):
            if exact >= 1e-300:
                assert abs(got - exact) <= 1e-12 * exact, (k, got, exact)
            else:
                assert got <= 1e-299, (k, got, exact)


def test_beta_quantiles_are_scipy_stats() -> None:
    # Clopper-Pearson asks Beta(k, n-k+1) and Beta(k+1, n-k) at (1-c)/2 and (1+c)/2, n up to MAX_TRIALS.
    rng = np.random.default_rng(11)
    size = 2000
    for a_high, b_high in [(10, 200_001), (1000, 200_001), (200_001, 200_001), (MAX_TRIALS, 1000)]:
        a = rng.integers(1, a_high, size).astype(float)
        b = rng.integers(1, b_high, size).astype(float)
        q = 10 ** rng.uniform(-6, 0, size)
        q = np.clip(np.where(rng.random(size) < 0.5, q, 1.0 - q), 1e-6, 1.0 - 1e-6)
        assert_close(d.beta_ppf(q, a, b), stats.beta.ppf(q, a, b))
    half = rng.uniform(0.5, 5.0, size)  # non-integer shapes too (the F distribution's halves)
    q = rng.random(size)
    assert_close(d.beta_ppf(q, half, half[::-1] * 1000), special.betaincinv(half, half[::-1] * 1000, q))


def test_f_distribution_is_scipy_stats() -> None:
    rng = np.random.default_rng(12)
    size = 6000
    dfn = rng.integers(1, 10_001, size).astype(float)
    dfd = np.round(10 ** rng.uniform(0, 6, size))
    x = 10 ** rng.uniform(-6, 6, size)
    assert_close(d.f_sf(x, dfn, dfd), stats.f.sf(x, dfn, dfd))
    near_one = 1.0 + rng.normal(size=size) * 3.0 / np.sqrt(np.minimum(dfn, dfd))  # the F test's region
    assert_close(d.f_sf(np.abs(near_one), dfn, dfd), stats.f.sf(np.abs(near_one), dfn, dfd))
    q = 10 ** rng.uniform(-6, 0, size)
    q = np.where(rng.random(size) < 0.5, q, 1.0 - q)
    assert_close(d.f_ppf(q, dfn, dfd), stats.f.ppf(q, dfn, dfd))
    assert_close(d.f_ppf([0.025, 0.975], 999, 49_000), stats.f.ppf([0.025, 0.975], 999, 49_000))


def test_normal_is_scipy_stats() -> None:
    rng = np.random.default_rng(13)
    x = np.concatenate([np.linspace(-40, 40, 20_001), rng.normal(size=5000) * 10])
    assert_close(d.normal_cdf(x), stats.norm.cdf(x))
    q = np.concatenate(
        [10 ** rng.uniform(-300, 0, 5000), 1.0 - 10 ** rng.uniform(-16, 0, 5000), rng.random(5000)]
    )
    assert_close(d.normal_ppf(q), stats.norm.ppf(q))
    assert_close(d.normal_ppf([1e-300, 0.5, 1.0 - 1e-16]), stats.norm.ppf([1e-300, 0.5, 1.0 - 1e-16]))


def test_edges_are_scipys() -> None:
    nan, inf = np.nan, np.inf
    with np.errstate(all="ignore"):
        k = np.array([-3.0, -1.0, -0.5, 0.0, 2.5, 9.0, 10.0, 11.0, nan, inf, -inf])
        for n, p in [
            (10, 0.3),
            (10, 0.0),
            (10, 1.0),
            (10, -0.1),
            (10, 1.5),
            (10, nan),
            (0, 0.5),
            (10.5, 0.5),
        ]:
            assert_close(d.binom_cdf(k, n, p), stats.binom.cdf(k, n, p))
            assert_close(d.binom_sf(k, n, p), stats.binom.sf(k, n, p))
        q = np.array([0.0, 1.0, -0.1, 1.1, nan, 0.3])
        for a, b in [(1.0, 2.0), (0.0, 2.0), (-1.0, 2.0), (2.0, 0.0), (nan, 1.0), (inf, 2.0), (1.0, inf)]:
            assert_close(d.beta_ppf(q, a, b), special.betaincinv(a, b, q))
        for m, n in [(1.0, 2.0), (0.0, 2.0), (1.0, -1.0), (inf, 2.0), (1.0, inf), (nan, 1.0)]:
            assert_close(d.f_ppf(q, m, n), special.fdtri(m, n, q))
            x = np.array([-1.0, 0.0, 1e-300, 1.0, 1e300, inf, nan])
            assert_close(d.f_sf(x, m, n), special.fdtrc(m, n, x))
        x = np.array([-inf, -40.0, -38.5, 0.0, 8.3, 9.0, inf, nan])
        assert_close(d.normal_cdf(x), stats.norm.cdf(x))
        q = np.array([0.0, 1.0, -1.0, 2.0, nan, 5e-324, 1e-310])
        np.testing.assert_array_equal(d.normal_ppf(q)[:5], stats.norm.ppf(q)[:5])


def test_shapes_broadcast_and_scalars_stay_scalars() -> None:
    a = np.arange(1, 7, dtype=float).reshape(2, 3)
    got = d.beta_ppf(np.array([[0.1], [0.9]]), a, 5.0)
    assert got.shape == (2, 3)
    assert_close(got, special.betaincinv(a, 5.0, np.array([[0.1], [0.9]])))
    assert d.f_sf(np.ones((4, 1)), np.arange(1, 4), 7).shape == (4, 3)
    assert d.binom_cdf(np.arange(6).reshape(2, 3), 5, 0.5).shape == (2, 3)
    for value in (d.beta_ppf(0.5, 2, 3), d.f_sf(1.0, 2, 3), d.f_ppf(0.5, 2, 3), d.normal_cdf(0.3),
                  d.normal_ppf(0.3), d.binom_cdf(2, 5, 0.5), d.binom_sf(2, 5, 0.5)):  # fmt: skip
        assert isinstance(value, np.float64) and np.ndim(value) == 0


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


def _scipy_modules_after(module: str) -> list[str]:
    names = "sorted(m for m in sys.modules if m.split('.')[0] == 'scipy')"
    code = f"import json, sys\nimport {module}\nprint(json.dumps({names}))"
    env = tailscope_env()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


@pytest.mark.parametrize(
    "module", ["tailscope.verbs.workflow", "tailscope.analysis.summary", "tailscope.analysis.cluster"]
)
def test_analysis_does_not_import_scipy(module: str) -> None:
    # The point of the module (issue 11): analyze, report and check run without scipy's import cost.
    assert _scipy_modules_after(module) == []


def test_the_import_probe_sees_scipy_where_it_is_used() -> None:
    # The control: attribution still uses scipy.stats, and the probe above does see it.
    assert "scipy.stats" in _scipy_modules_after("tailscope.analysis.attribution")
