"""Input checks shared by the statistics (a test raises on malformed input, never returns NaN);
the chi-square and Student t functions the tests need (``chi2_sf``, ``t_cdf``, ``t_sf``,
``t_ppf``), from ``scipy.special``; and ``scipy_stats()``: the one place that imports
``scipy.stats`` (the binomial test), on a test's first use."""
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
