"""The distribution functions the analysis uses, in numpy and `math` only: scipy.stats' numbers, no scipy.

Importing scipy.special cost every `analyze`, `report` and `check` about 0.1 s and 13 MiB even at 10
nodes (issue 11); scipy stays a dependency of the modules that import it lazily (attribution, compare).
tests/analysis/test_distributions.py checks each function against scipy.stats over dense random and edge
grids (binomial n up to MAX_TRIALS = 10^6, beta shapes up to 10^6, F dfn <= 10^4 and dfd <= 10^6, x in
1e-6..1e6, normal q in 1e-300..1-1e-16) at relative 1e-10 wherever scipy's value is >= 1e-280, and the
binomial's deeper tails, where scipy's Boost underflows to 0 or loses digits (binom.sf(78, 100, 1e-4):
2.03763e-295, exact 2.03761e-295), against exact rational sums. Largest relative differences measured
(2026-11-24, scipy 1.17.1, ~500,000 points; mpmath at 50 digits said who was off):
  binom_cdf / binom_sf 1.1e-11 / 5.4e-12 vs scipy (the 1.1e-11 is scipy's: ours 6e-15 from mpmath;
    the rest in tails below 1e-200 at n = 10^6, the conditioning of p's last bit), 3.2e-13 vs the
    exact sums down to 1e-300;  beta_ppf 5.0e-12 (scipy's: ours 5e-16 from mpmath);  f_sf 3.0e-12
    (tails below 1e-250);  f_ppf 2.5e-13 (scipy's);  normal_cdf 5.7e-14;  normal_ppf 8.7e-16.
Results are numpy scalars for scalar arguments, arrays broadcast; edge cases (k < 0, k >= n, p or q at
0 or 1, invalid shapes, nan) give scipy's values.

- Regularized incomplete beta I_x(a, b) (`_ibeta`): the continued fraction of DiDonato & Morris (ACM
  TOMS 708, 1992, BFRAC; Boost's ibeta_fraction2), the even part of Abramowitz & Stegun 26.5.8 written
  with a y - b x, evaluated by the modified Lentz method (Numerical Recipes 3rd ed. section 5.2) below
  the mean a/(a+b); above it the same for I_{1-x}(b, a) = 1 - I_x(a, b), so both tails keep full
  relative accuracy. (Numerical Recipes' `betacf` form, with 1 - (a+b) x / (a+1), loses 1e-11 near the
  mean of Beta(10^6, 10^3).) Its factor x^a (1-x)^b / B(a, b) is computed in log space by Loader's
  saddle-point form ("Fast and accurate computation of binomial probabilities", 2000; R's dbinom):
  Stirling's error terms (math.lgamma below 15) and the deviance bd0, so that at a, b ~ 10^6 nothing
  cancels (the plain lgamma sum loses ~1e-9 there).
- Binomial cdf/sf: P(B <= k) = I_{1-p}(n-k, k+1) and P(B > k) its complement (as Boost's binomial,
  which scipy.stats.binom calls).
- Beta quantile (`_ibeta_inv`): Numerical Recipes' `invbetai` start (a normal or power-law guess), then
  Halley steps kept in a shrinking bracket (bisection when a step leaves it) to 1e-15 relative, solving
  for whichever of x and 1-x is below 1/2 so that both are accurate (the F quantile needs x / (1-x)).
- F sf and quantile through the incomplete beta as Boost's fisher_f (scipy.special.fdtrc / fdtri).
- Normal cdf: scipy's ndtr formula (0.5 erfc(-x/sqrt 2)) with `math.erf` / `math.erfc` per element.
- Normal quantile: Wichura's AS 241 PPND16 (Applied Statistics 37:477, 1988), about 1e-16 relative.
Speed: 100,002 binomial cdf+sf values at n = 50,000 in 18 ms (scipy 8 ms); a scalar beta or F quantile
about 1.5 ms; `analyze` of 1,000 nodes is as fast as with scipy (bench/bench_analyze.py).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

Floats = NDArray[np.float64]

_LN_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT1_2 = math.sqrt(0.5)
_TINY = 1e-300  # modified Lentz: a denominator of exactly zero is replaced by this
_CF_EPS = 2.0**-52  # the continued fraction stops when a step changes it by less than this
_CF_MAX_STEPS = 1_000_000  # far beyond the ~sqrt(max(a, b)) steps it takes at a, b ~ 10^6
_SCALAR_BELOW = 16  # fewer unfinished fractions than this: finish them one by one in plain Python
_INV_STEPS = 200  # Halley/bisection steps of the beta quantile (it takes about 5; bisection needs ~60)
_LOG_UNDERFLOW = -760.0  # exp() of less is 0 in double precision, even times a large fraction

_lgamma_ufunc = np.frompyfunc(math.lgamma, 1, 1)
_erf_ufunc = np.frompyfunc(math.erf, 1, 1)
_erfc_ufunc = np.frompyfunc(math.erfc, 1, 1)


def binom_cdf(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    """P(B <= k) for B ~ Binomial(n, p); 0 below 0 and 1 from n on (as scipy.stats.binom.cdf)."""
    return _binom(k, n, p, upper=False)


def binom_sf(k: ArrayLike, n: ArrayLike, p: ArrayLike) -> Any:
    """P(B > k) for B ~ Binomial(n, p); 1 below 0 and 0 from n on (as scipy.stats.binom.sf)."""
    return _binom(k, n, p, upper=True)


def beta_ppf(q: ArrayLike, a: ArrayLike, b: ArrayLike) -> Any:
    """Quantile q of Beta(a, b) (scipy.stats.beta.ppf): 0 at q = 0, 1 at q = 1, nan for a or b <= 0."""
    qq, aa, bb = _floats(q, a, b)
    out = np.full(qq.shape, np.nan)
    valid = (qq >= 0.0) & (qq <= 1.0) & (aa > 0.0) & (bb > 0.0)
    out[valid & (qq == 0.0)] = 0.0
    out[valid & (qq == 1.0)] = 1.0
    inner = valid & (qq > 0.0) & (qq < 1.0) & (aa < np.inf)  # scipy: nan for an infinite a
    out[inner & (bb == np.inf)] = 0.0  # all mass at 0, as scipy
    inner &= bb < np.inf
    if inner.any():
        out[inner] = _ibeta_inv(aa[inner], bb[inner], qq[inner])[0]
    return out[()]


def normal_cdf(x: ArrayLike) -> Any:
    """Standard normal distribution function (scipy.stats.norm.cdf), by scipy's ndtr formula."""
    z = np.asarray(x, dtype=float) * _SQRT1_2
    out = np.empty(z.shape)
    middle = np.abs(z) < _SQRT1_2
    out[middle] = 0.5 + 0.5 * _erf_ufunc(z[middle]).astype(float)
    tail = 0.5 * _erfc_ufunc(np.abs(z[~middle])).astype(float)
    out[~middle] = np.where(z[~middle] > 0.0, 1.0 - tail, tail)
    return out[()]


def normal_ppf(q: ArrayLike) -> Any:
    """Standard normal quantile (scipy.stats.norm.ppf): -inf at 0, inf at 1, nan outside [0, 1]."""
    qq = np.asarray(q, dtype=float)
    out = np.full(qq.shape, np.nan)
    out[qq == 0.0] = -np.inf
    out[qq == 1.0] = np.inf
    inner = (qq > 0.0) & (qq < 1.0)
    out[inner] = _ppnd16(qq[inner])
    return out[()]


def f_sf(x: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> Any:
    """P(F > x) for F ~ F(dfn, dfd) (scipy.stats.f.sf): 1 at x = 0, 0 at x = inf, nan for x < 0."""
    xx, m, n = _floats(x, dfn, dfd)
    out = np.full(xx.shape, np.nan)
    valid = (xx >= 0.0) & (m > 0.0) & (n > 0.0) & (m < np.inf) & (n < np.inf)
    out[valid & (xx == 0.0)] = 1.0
    out[(xx == np.inf) & (m > 0.0) & (n > 0.0)] = 0.0  # an infinite df too, as scipy
    inner = valid & (xx > 0.0) & (xx < np.inf)
    if inner.any():
        mx, nn = m[inner] * xx[inner], n[inner]
        # X = m x / (n + m x) ~ Beta(m/2, n/2); both X and 1-X from their own quotient (Boost's fisher_f)
        out[inner] = _ibeta(m[inner] / 2.0, nn / 2.0, mx / (nn + mx), nn / (nn + mx))[1]
    return out[()]


def f_ppf(q: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> Any:
    """Quantile q of F(dfn, dfd) (scipy.stats.f.ppf): 0 at q = 0, inf at q = 1."""
    qq, m, n = _floats(q, dfn, dfd)
    out = np.full(qq.shape, np.nan)
    valid = (qq >= 0.0) & (qq <= 1.0) & (m > 0.0) & (n > 0.0) & (m < np.inf) & (n < np.inf)
    out[valid & (qq == 0.0)] = 0.0
    out[valid & (qq == 1.0)] = np.inf
    inner = valid & (qq > 0.0) & (qq < 1.0)
    if inner.any():
        x, y = _ibeta_inv(m[inner] / 2.0, n[inner] / 2.0, qq[inner])
        with np.errstate(divide="ignore", over="ignore"):
            out[inner] = (n[inner] * x) / (m[inner] * y)
    return out[()]


def bh_adjusted(p: ArrayLike) -> NDArray[np.float64]:
    """Benjamini-Hochberg adjusted p-values, as scipy.stats.false_discovery_control(p, method="bh").

    Sorted p(i) x m / i, then the running minimum from the largest down, back in input order, in [0, 1].
    """
    ps = np.asarray(p, dtype=float).ravel()
    if ps.size and not np.all((ps >= 0.0) & (ps <= 1.0)):
        raise ValueError("p-values must lie between 0 and 1")
    if ps.size <= 1:
        return ps.copy()
    m = ps.size
    order = np.argsort(ps)
    adjusted = ps[order] * (m / np.arange(1, m + 1, dtype=float))
    np.minimum.accumulate(adjusted[::-1], out=adjusted[::-1])
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return np.clip(out, 0.0, 1.0)


# --- the binomial -----------------------------------------------------------------------------------


def _binom(k: ArrayLike, n: ArrayLike, p: ArrayLike, *, upper: bool) -> Any:
    kk, nn, pp = _floats(k, n, p)
    kk = np.floor(kk)
    out = np.full(kk.shape, np.nan)
    valid = (pp >= 0.0) & (pp <= 1.0) & (nn >= 0.0) & (nn == np.floor(nn)) & (nn < np.inf) & ~np.isnan(kk)
    out[valid & (kk < 0.0)] = 1.0 if upper else 0.0
    out[valid & (kk >= nn)] = 0.0 if upper else 1.0
    inner = valid & (kk >= 0.0) & (kk < nn)
    out[inner & (pp == 0.0)] = 0.0 if upper else 1.0  # all mass at 0
    out[inner & (pp == 1.0)] = 1.0 if upper else 0.0  # all mass at n > k
    inner &= (pp > 0.0) & (pp < 1.0)
    if inner.any():
        ki, ni, pi = kk[inner], nn[inner], pp[inner]
        lower_tail, upper_tail = _ibeta(ni - ki, ki + 1.0, 1.0 - pi, pi)
        out[inner] = upper_tail if upper else lower_tail
    return out[()]


# --- the regularized incomplete beta function -------------------------------------------------------


def _floats(*args: ArrayLike) -> list[Floats]:
    """The arguments as float arrays of their common broadcast shape (writable copies)."""
    return [
        np.array(a, dtype=float) for a in np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in args))
    ]


def _stirlerr(m: Floats) -> Floats:
    """log(m!) - log(sqrt(2 pi m) (m/e)^m) for m > 0, the error of Stirling's formula (Loader 2000).

    Above 15 the asymptotic series (its next term is below 2e-16 there); below it, from math.lgamma.
    """
    out = np.empty(m.shape)
    big = m > 15.0
    mb = m[big]
    r = 1.0 / (mb * mb)
    out[big] = (1.0 / 12 - (1.0 / 360 - (1.0 / 1260 - (1.0 / 1680 - r / 1188) * r) * r) * r) / mb
    small = ~big
    if small.any():
        ms = m[small]
        out[small] = _lgamma_ufunc(ms + 1.0).astype(float) - (ms + 0.5) * np.log(ms) + ms - _LN_SQRT_2PI
    return out


def _bd0(x: Floats, mean: Floats) -> Floats:
    """The deviance term x log(x/mean) + mean - x >= 0 (Loader 2000), by a series where x ~ mean."""
    diff = x - mean
    total = x + mean
    near = np.abs(diff) < 0.1 * total
    out = np.empty(x.shape)
    far = ~near
    xf, mf = x[far], mean[far]
    out[far] = xf * np.log(xf / mf) + mf - xf
    v = diff[near] / total[near]  # |v| < 0.1: each term of the series is 100 times smaller
    s = diff[near] * v
    term = 2.0 * x[near] * v
    v2 = v * v
    for j in range(1, 10):
        term = term * v2
        s = s + term / (2 * j + 1)
    out[near] = s
    return out


def _log_beta_front(a: Floats, b: Floats, x: Floats, y: Floats) -> Floats:
    """log(x^a y^b / B(a, b)) with x + y = 1, by Loader's saddle-point form of the binomial term.

    x^a y^b / B(a, b) = (a b / (a+b)) C(a+b, a) x^a y^b, and the binomial term is
    exp(stirlerr(n) - stirlerr(a) - stirlerr(b) - bd0(a, n x) - bd0(b, n y)) sqrt(n / (2 pi a b)).
    """
    n = a + b
    return (
        _stirlerr(n)
        - _stirlerr(a)
        - _stirlerr(b)
        - _bd0(a, n * x)
        - _bd0(b, n * y)
        + 0.5 * np.log(a * b / n)
        - _LN_SQRT_2PI
    )


def _ibeta(a: Floats, b: Floats, x: Floats, y: Floats) -> tuple[Floats, Floats]:
    """(I_x(a, b), 1 - I_x(a, b)) for a, b > 0 finite and 0 < x < 1 with y = 1 - x given accurately.

    Each comes out with full relative accuracy: the continued fraction gives the tail below the mean
    a / (a+b) (of x, or of y with a and b swapped), and the complement of a value above ~1/2 loses nothing.
    """
    lower_tail, upper_tail, _ = _ibeta_and_front(a, b, x, y)
    return lower_tail, upper_tail


def _ibeta_and_front(a: Floats, b: Floats, x: Floats, y: Floats) -> tuple[Floats, Floats, Floats]:
    """`_ibeta`, and the log of its front factor x^a y^b / B(a, b) (flattened), which the quantile's Newton
    steps need too: computed once per step, not twice (its Stirling terms are most of a step)."""
    a, b, x, y = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(a, b, x, y))
    shape = a.shape
    a, b, x, y = a.ravel(), b.ravel(), x.ravel(), y.ravel()
    log_front = _log_beta_front(a, b, x, y)
    # x below the mean a/(a+b): the fraction for I_x(a, b); above it, the one for I_y(b, a). Boost's test,
    # each side computed from the smaller of x and y so that it keeps its sign near the mean.
    lower = np.where(a < b, a - (a + b) * x, (a + b) * y - b) >= 0.0
    fa, fb, fx, fy = (
        np.where(lower, a, b),
        np.where(lower, b, a),
        np.where(lower, x, y),
        np.where(lower, y, x),
    )
    small = np.zeros(a.shape)  # the tail that the fraction gives
    live = log_front > _LOG_UNDERFLOW
    if live.any():
        fraction = _ibeta_fraction(fa[live], fb[live], fx[live], fy[live])
        small[live] = np.exp(log_front[live] - np.log(fraction))
    big = 1.0 - small
    lower_tail = np.where(lower, small, big)
    upper_tail = np.where(lower, big, small)
    return lower_tail.reshape(shape), upper_tail.reshape(shape), log_front


def _ibeta_fraction(a: Floats, b: Floats, x: Floats, y: Floats) -> Floats:
    """The continued fraction F with I_x(a, b) = x^a y^b / (B(a, b) F), for x <= a / (a+b).

    DiDonato & Morris' form (ACM TOMS 708, 1992, BFRAC; Boost's ibeta_fraction2): the even part of
    A&S 26.5.8, whose terms use a y - b x + 1 rather than 1 - (a+b) x / (a+1), which near the mean of a
    Beta(10^6, 10^3) would lose 1e-11. Evaluated by the modified Lentz method; vectorised, elements leave
    the iteration as they converge, and the last few finish in plain Python.
    """
    out = np.empty(a.shape)
    idx = np.arange(a.size)
    lam = a * y - b * x + 1.0
    f = a * lam / (a + 1.0)  # b_0
    f = np.where(f == 0.0, _TINY, f)
    c = f.copy()
    d = np.zeros(a.shape)
    m = 1
    while idx.size >= _SCALAR_BELOW and m < _CF_MAX_STEPS:
        den = a + (2 * m - 1)
        an = (a + (m - 1)) * (a + b + (m - 1)) * (m * (b - m)) * x * x / (den * den)
        bn = m + m * (b - m) * x / den + (a + m) * (lam + m * (2.0 - x)) / (den + 2.0)
        d = bn + an * d
        d = 1.0 / np.where(d == 0.0, _TINY, d)
        c = bn + an / c
        c = np.where(c == 0.0, _TINY, c)
        delta = c * d
        f *= delta
        m += 1
        done = np.abs(delta - 1.0) <= _CF_EPS
        if done.any():
            out[idx[done]] = f[done]
            keep = ~done
            idx, a, b, x, lam, c, d, f = (v[keep] for v in (idx, a, b, x, lam, c, d, f))
    for j, i in enumerate(idx.tolist()):
        state = (float(a[j]), float(b[j]), float(x[j]), float(lam[j]), float(c[j]), float(d[j]), float(f[j]))
        out[i] = _ibeta_fraction_rest(*state, m)
    return out


def _ibeta_fraction_rest(
    a: float, b: float, x: float, lam: float, c: float, d: float, f: float, m: int
) -> float:
    """The same fraction as _ibeta_fraction for one element, from its state at step m, in plain floats."""
    while m < _CF_MAX_STEPS:
        den = a + (2 * m - 1)
        an = (a + (m - 1)) * (a + b + (m - 1)) * (m * (b - m)) * x * x / (den * den)
        bn = m + m * (b - m) * x / den + (a + m) * (lam + m * (2.0 - x)) / (den + 2.0)
        d = bn + an * d
        d = 1.0 / (d or _TINY)
        c = bn + an / c
        c = c or _TINY
        delta = c * d
        f *= delta
        m += 1
        if abs(delta - 1.0) <= _CF_EPS:
            break
    return f


# --- the beta quantile --------------------------------------------------------------------------------


def _ibeta_inv(a: Floats, b: Floats, q: Floats) -> tuple[Floats, Floats]:
    """(x, 1 - x) with I_x(a, b) = q, for a, b > 0 finite and 0 < q < 1 (1-d arrays).

    Solves for whichever of x and 1 - x the start puts below 1/2 (swapping a and b and the tails for
    1 - x), so that the small one is found to full relative accuracy and the other is 1 minus it.
    """
    guess, guess_c = _ibeta_inv_start(a, b, q)
    swap = guess > 0.5
    s = _solve_side(a, b, q, swap, np.where(swap, guess_c, guess))
    wrong = s > 0.5  # the start was on the wrong side of 1/2: solve again for the other one
    if wrong.any():
        swap[wrong] = ~swap[wrong]
        s[wrong] = _solve_side(a[wrong], b[wrong], q[wrong], swap[wrong], 1.0 - s[wrong])
    s_c = 1.0 - s
    return np.where(swap, s_c, s), np.where(swap, s, s_c)


def _solve_side(a: Floats, b: Floats, q: Floats, swap: NDArray[np.bool_], start: Floats) -> Floats:
    """x with I_x(a, b) = q where not swap, 1 - x where swap (I_s(b, a) = 1 - q), from start."""
    sa, sb = np.where(swap, b, a), np.where(swap, a, b)
    target = np.where(swap, 1.0 - q, q)  # I_s(sa, sb) = target
    target_c = np.where(swap, q, 1.0 - q)  # 1 - I_s(sa, sb) = target_c; the exact one is q itself
    return _halley(sa, sb, target, target_c, np.clip(start, _TINY, 0.5))


def _ibeta_inv_start(a: Floats, b: Floats, q: Floats) -> tuple[Floats, Floats]:
    """A first guess of the beta quantile and its complement (Numerical Recipes 3rd ed., invbetai)."""
    x = np.empty(a.shape)
    xc = np.empty(a.shape)
    normal = (a >= 1.0) & (b >= 1.0)
    if normal.any():  # from a normal quantile with a skewness correction
        an, bn, qn = a[normal], b[normal], q[normal]
        pp = np.where(qn < 0.5, qn, 1.0 - qn)
        t = np.sqrt(-2.0 * np.log(pp))
        z = (2.30753 + t * 0.27061) / (1.0 + t * (0.99229 + t * 0.04481)) - t
        z = np.where(qn < 0.5, z, -z)
        al = (z * z - 3.0) / 6.0
        h = 2.0 / (1.0 / (2.0 * an - 1.0) + 1.0 / (2.0 * bn - 1.0))
        w = z * np.sqrt(al + h) / h - (1.0 / (2.0 * bn - 1.0) - 1.0 / (2.0 * an - 1.0)) * (
            al + 5.0 / 6.0 - 2.0 / (3.0 * h)
        )
        e = bn * np.exp(np.minimum(2.0 * w, 700.0))
        x[normal] = an / (an + e)
        xc[normal] = e / (an + e)
    power = ~normal
    if power.any():  # from the power-law behaviour of either tail
        ap, bp, qp = a[power], b[power], q[power]
        t = np.exp(ap * np.log(ap / (ap + bp))) / ap
        u = np.exp(bp * np.log(bp / (ap + bp))) / bp
        w = t + u
        low = qp < t / w
        lo_x = (ap * w * qp) ** (1.0 / ap)
        hi_xc = (bp * w * (1.0 - qp)) ** (1.0 / bp)
        x[power] = np.where(low, lo_x, 1.0 - hi_xc)
        xc[power] = np.where(low, 1.0 - lo_x, hi_xc)
    return x, xc


def _halley(a: Floats, b: Floats, target: Floats, target_c: Floats, x: Floats) -> Floats:
    """Solve I_x(a, b) = target by Halley steps kept inside a shrinking bracket, bisecting when they leave it.

    The residual is taken on the smaller tail (target or target_c), so it keeps its relative accuracy.
    """
    out = np.empty(a.shape)
    idx = np.arange(a.size)
    lo, hi = np.zeros(a.shape), np.ones(a.shape)
    use_lower = target <= 0.5
    for _ in range(_INV_STEPS):
        y = 1.0 - x
        low_tail, up_tail, log_front = _ibeta_and_front(a, b, x, y)
        f = np.where(use_lower, low_tail - target, target_c - up_tail)  # I_x - target, increasing in x
        lo = np.where(f < 0.0, x, lo)
        hi = np.where(f > 0.0, x, hi)
        pdf = np.exp(log_front) / (x * y)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            u = f / pdf
            bend = np.clip(u * ((a - 1.0) / x - (b - 1.0) / y), -1.0, 1.0)  # Halley's, at most a 2x change
            step = u / (1.0 - 0.5 * bend)
            new = x - step
        outside = ~((new > lo) & (new < hi)) | ~np.isfinite(new)
        geometric = (lo > 0.0) & (hi > 4.0 * lo)
        mid = np.where(geometric, np.sqrt(lo * hi), np.where(lo > 0.0, 0.5 * (lo + hi), 0.5 * hi))
        new = np.where(outside, mid, new)
        done = (f == 0.0) | (np.abs(new - x) <= 1e-15 * x) | (hi - lo <= 1e-15 * lo)
        x = new
        if done.any():
            out[idx[done]] = x[done]
            keep = ~done
            idx, a, b, target, target_c, x, lo, hi, use_lower = (
                v[keep] for v in (idx, a, b, target, target_c, x, lo, hi, use_lower)
            )
            if idx.size == 0:
                break
    out[idx] = x
    return out


# --- the normal quantile --------------------------------------------------------------------------------

# Wichura (1988) AS 241 PPND16, coefficients from the constant term up.
_A = (
    3.3871328727963666080e0,
    1.3314166789178437745e2,
    1.9715909503065514427e3,
    1.3731693765509461125e4,
    4.5921953931549871457e4,
    6.7265770927008700853e4,
    3.3430575583588128105e4,
    2.5090809287301226727e3,
)
_B = (
    1.0,
    4.2313330701600911252e1,
    6.8718700749205790830e2,
    5.3941960214247511077e3,
    2.1213794301586595867e4,
    3.9307895800092710610e4,
    2.8729085735721942674e4,
    5.2264952788528545610e3,
)
_C = (
    1.42343711074968357734e0,
    4.63033784615654529590e0,
    5.76949722146069140550e0,
    3.64784832476320460504e0,
    1.27045825245236838258e0,
    2.41780725177450611770e-1,
    2.27238449892691845833e-2,
    7.74545014278341407640e-4,
)
_D = (
    1.0,
    2.05319162663775882187e0,
    1.67638483018380384940e0,
    6.89767334985100004550e-1,
    1.48103976427480074590e-1,
    1.51986665636164571966e-2,
    5.47593808499534494600e-4,
    1.05075007164441684324e-9,
)
_E = (
    6.65790464350110377720e0,
    5.46378491116411436990e0,
    1.78482653991729133580e0,
    2.96560571828504891230e-1,
    2.65321895265761230930e-2,
    1.24266094738807843860e-3,
    2.71155556874348757815e-5,
    2.01033439929228813265e-7,
)
_F = (
    1.0,
    5.99832206555887937690e-1,
    1.36929880922735805310e-1,
    1.48753612908506148525e-2,
    7.86869131145613259100e-4,
    1.84631831751005468180e-5,
    1.42151175831644588870e-7,
    2.04426310338993978564e-15,
)


def _poly(coef: tuple[float, ...], r: Floats) -> Floats:
    acc = np.full(r.shape, coef[-1])
    for c in coef[-2::-1]:
        acc = acc * r + c
    return acc


def _ppnd16(p: Floats) -> Floats:
    """AS 241 PPND16 for 0 < p < 1: z with Phi(z) = p, about 1 part in 1e16."""
    q = p - 0.5
    out = np.empty(p.shape)
    central = np.abs(q) <= 0.425
    qc = q[central]
    r = 0.180625 - qc * qc
    out[central] = qc * _poly(_A, r) / _poly(_B, r)
    tail = ~central
    qt = q[tail]
    r = np.sqrt(-np.log(np.where(qt < 0.0, p[tail], 1.0 - p[tail])))
    near = r <= 5.0
    val = np.where(near, _poly(_C, r - 1.6) / _poly(_D, r - 1.6), _poly(_E, r - 5.0) / _poly(_F, r - 5.0))
    out[tail] = np.where(qt < 0.0, -val, val)
    return out
