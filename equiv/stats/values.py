"""Input checks shared by the statistics (a test raises on malformed input, never returns NaN);
the chi-square and Student t functions the tests need (``chi2_sf``, ``t_cdf``, ``t_sf``,
``t_ppf``) and the exact two-sided binomial test (``binom_test``), from ``scipy.special``; and
``scipy_stats()``: the one place that imports ``scipy.stats``, on first use (the calibration
scripts' beta quantiles; ``binom_test`` where scipy.special lacks the binomial's functions)."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from equiv.errors import InvalidArgument


def finite_1d(name, values):
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgument(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InvalidArgument(f"{name}[{bad}]={arr[bad]} is not finite: statistics need finite values")
    return arr


def rounded(result) -> dict:
    """A result dataclass as JSON, its floats rounded to 6 digits."""
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(result).items()}


def scipy_stats():
    """``scipy.stats``, imported here on first use: every command that imports the statistics
    (the gates, ``equiv report``) would otherwise pay for it at start."""
    from scipy import stats   # 2.0 s measured (python3 -X importtime, numpy loaded; 6.4 s when the 2-core CPU is busy)

    return stats


# scipy.stats computes these with the same scipy.special functions (chi2_gen._sf is chdtrc, t_gen's
# _cdf / _sf / _ppf are stdtr / stdtr(df, -x) / stdtrit: scipy/stats/_continuous_distns.py), so the
# values are the same bits (tests/test_stats_special.py); importing scipy.special takes ~0.3 s where
# scipy.stats takes 0.8-2.5 s, most of it parsing docstrings while holding the GIL, which the draft
# gate's tolerance stage felt through the thread that imported it beside it
def _special():
    from scipy import special

    return special


def chi2_sf(x: float, df: int) -> float:
    """``scipy.stats.chi2.sf(x, df)``."""
    return float(_special().chdtrc(df, x))


def t_cdf(x: float, df: int) -> float:
    """``scipy.stats.t.cdf(x, df)``."""
    return float(_special().stdtr(df, x))


def t_sf(x: float, df: int) -> float:
    """``scipy.stats.t.sf(x, df)``."""
    return float(_special().stdtr(df, -x))


def t_ppf(q: float, df: int) -> float:
    """``scipy.stats.t.ppf(q, df)``."""
    return float(_special().stdtrit(df, q))


def binom_test(k: int, n: int, p: float) -> float:
    """``scipy.stats.binomtest(k, n, p).pvalue`` (two-sided): the probability, under Binomial(n,
    p), of every count no more likely than ``k`` (within a relative 1e-7). The binomial's pmf, cdf
    and sf are the ufuncs scipy.stats' ``binom`` calls, from ``scipy.special`` (~0.3 s to import
    where scipy.stats takes 0.8-2.5 s at the end of a verifier's verdict), so the values are the
    same bits (tests/test_stats_special.py); a scipy without them (before 1.12) gets scipy.stats."""
    k, n, p = int(k), int(n), float(p)
    if not (0 <= k <= n and n >= 1 and 0.0 <= p <= 1.0):
        raise InvalidArgument(f"binom_test(k={k}, n={n}, p={p}): needs 0 <= k <= n, n >= 1 and 0 <= p <= 1")
    u = getattr(_special(), "_ufuncs", None)
    if not all(hasattr(u, f) for f in ("_binom_pmf", "_binom_cdf", "_binom_sf")):
        return float(scipy_stats().binomtest(k, n, p).pvalue)

    def pmf(x):
        return float(u._binom_pmf(x, n, p)) if 0 <= x <= n else 0.0

    def cdf(x):                                   # P(X <= x)
        return 0.0 if x < 0 else 1.0 if x >= n else float(u._binom_cdf(x, n, p))

    def sf(x):                                    # P(X > x)
        return 1.0 if x < 0 else 0.0 if x >= n else float(u._binom_sf(x, n, p))

    mean = p * n
    if k == mean:
        return 1.0
    limit = pmf(k) * (1 + 1e-7)
    if k < mean:
        # the pmf falls from ceil(mean) to n: the first count there no more likely than k
        lo, hi = int(np.ceil(mean)), n + 1
        while lo < hi:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if pmf(mid) <= limit else (mid + 1, hi)
        return min(1.0, cdf(k) + sf(lo - 1))
    # the pmf rises from 0 to floor(mean): the last count there no more likely than k
    lo, hi = -1, int(np.floor(mean))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if pmf(mid) <= limit else (lo, mid - 1)
    return min(1.0, cdf(lo) + sf(k - 1))
