"""The distribution functions the analysis uses, from scipy.special: the same numbers as scipy.stats.

`import scipy.stats` costs about 0.5 s (its docstrings are parsed at import) against 0.1 s for
scipy.special, and every `analyze` paid it even at 10 nodes. scipy.stats' normal, beta and F
distributions and its binomial call these very special functions (Boost's), so the results are
bit-for-bit the same (tests/analysis/test_distributions.py compares them). The binomial's are private in
scipy.special (`_binom_cdf`, `_binom_sf`); when a scipy lacks them, scipy.stats is imported instead.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

try:  # the Boost binomial that scipy.stats.binom calls, without importing scipy.stats
    from scipy.special._ufuncs import _binom_cdf, _binom_sf
except ImportError:  # pragma: no cover - older scipy: the same numbers through scipy.stats, slower to import
    _binom_cdf = _binom_sf = None


def binom_cdf(k: ArrayLike, n: int, p: float) -> Any:
    """P(B <= k) for B ~ Binomial(n, p); 0 below 0 and 1 from n on (as scipy.stats.binom.cdf)."""
    if _binom_cdf is None:  # pragma: no cover
        from scipy.stats import binom

        return binom.cdf(k, n, p)
    kk = np.floor(np.asarray(k, dtype=float))
    inside = _binom_cdf(np.clip(kk, 0, n), n, p)
    return np.where(kk < 0, 0.0, np.where(kk >= n, 1.0, inside))[()]


def binom_sf(k: ArrayLike, n: int, p: float) -> Any:
    """P(B > k) for B ~ Binomial(n, p); 1 below 0 and 0 from n on (as scipy.stats.binom.sf)."""
    if _binom_sf is None:  # pragma: no cover
        from scipy.stats import binom

        return binom.sf(k, n, p)
    kk = np.floor(np.asarray(k, dtype=float))
    inside = _binom_sf(np.clip(kk, 0, n), n, p)
    return np.where(kk < 0, 1.0, np.where(kk >= n, 0.0, inside))[()]


def beta_ppf(q: ArrayLike, a: ArrayLike, b: ArrayLike) -> Any:
    """Quantile q of Beta(a, b) (scipy.stats.beta.ppf)."""
    return special.betaincinv(a, b, q)


def normal_cdf(x: ArrayLike) -> Any:
    """Standard normal distribution function (scipy.stats.norm.cdf)."""
    return special.ndtr(x)


def normal_ppf(q: ArrayLike) -> Any:
    """Standard normal quantile (scipy.stats.norm.ppf)."""
    return special.ndtri(q)


def f_sf(x: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> Any:
    """P(F > x) for F ~ F(dfn, dfd) (scipy.stats.f.sf)."""
    return special.fdtrc(dfn, dfd, x)


def f_ppf(q: ArrayLike, dfn: ArrayLike, dfd: ArrayLike) -> Any:
    """Quantile q of F(dfn, dfd) (scipy.stats.f.ppf)."""
    return special.fdtri(dfn, dfd, q)


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
