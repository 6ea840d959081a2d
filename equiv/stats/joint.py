"""Tests of joint laws: a table of whole outcomes against its exact law, and shared randomness.

Plan
----
- ``table_test(codes, probabilities)``: Pearson's chi-square of the counts of outcome codes
  (``codes[i]`` in ``[0, C)``) against ``len(codes) * probabilities`` -- every cell of an
  enumerable joint law (a verifier's emitted block at small V has ``V**(n+1)`` of them). Cells
  are ordered by expected count before the tail cells are merged to expect >= 5
  (``fit.cells_test``), so merging only ever joins the rarest outcomes. Source: Pearson (1900);
  the chi-square approximation with expected counts >= 5 is the textbook rule (Cochran 1954).
- ``margin_tables(codes, probabilities, V, width)``: the same test on every pair of positions'
  two-way margin (``V**2`` cells): fewer degrees of freedom, so more power where a deviation ties
  two positions together.
- ``swap_sign_test(same, crossed)``: shared randomness between two sources with identical laws.
  Take four outputs ``a, b`` (one call) and ``a', b'`` (another call, its own generator); under
  independence with identical laws they are exchangeable, and swapping ``b <-> b'`` maps the
  pairing ``{(a, b), (a', b')}`` (``same``: the matches it shows, 0..2) onto the pairing
  ``{(a, b'), (a', b)}`` (``crossed``). So ``P(same > crossed) = P(same < crossed)`` exactly,
  whatever the law, and the units where they differ give an exact two-sided sign (binomial)
  test. Rows that share uniforms match more often than crossed rows (or less: antithetic
  uniforms); calls that share a state likewise, with the pairing chosen across calls. Source:
  the sign test of a randomisation (swap) symmetry (Fisher 1935, "The Design of Experiments",
  ch. 21; Lehmann & Romano, "Testing Statistical Hypotheses", sec. 15.2).

Calibration: the chain verifier's independence and joint-law tests (exact
levels on correct samplers), and docs/verify.md ("Rows, calls and the joint law": false
positives over 1000 seeds, power at total variation 0.02 / 0.05 / 0.1).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from equiv.stats.fit import cells_test
from equiv.stats.values import binom_test


@dataclass(frozen=True)
class TableTest:
    """Chi-square of one table: ``n`` outcomes, ``cells`` after merging, the plug-in TV."""

    label: str
    n: int
    chi2: float
    df: int
    p_value: float
    tvd: float

    def to_json(self) -> dict:
        return asdict(self)


def table_test(label: str, codes, probabilities) -> TableTest | None:
    """``codes`` ``[N]`` ints in ``[0, C)``, ``probabilities`` ``[C]`` their exact law (module
    docstring); None when fewer than two merged cells remain."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    if probabilities.ndim != 1 or not np.isfinite(probabilities).all() or (probabilities < 0).any():
        raise ValueError(f"probabilities must be a finite non-negative [C] vector, got shape {probabilities.shape}")
    total = probabilities.sum()
    if not total > 0:
        raise ValueError("probabilities sum to 0: no law to test against")
    codes = np.asarray(codes)
    observed = np.bincount(codes, minlength=probabilities.size).astype(np.float64)
    if observed.size > probabilities.size:
        raise ValueError(f"a code is >= {probabilities.size}, outside the table")
    order = np.argsort(-probabilities, kind="stable")
    got = cells_test(observed[order], codes.size * probabilities[order] / total)
    if got is None:
        return None
    chi2, df, p, tvd = got
    return TableTest(label, int(codes.size), chi2, df, p, tvd)


def margin_tables(label: str, sequences, laws) -> list:
    """Every pair ``(j, k)`` of positions of ``sequences [N, L]`` (tokens in ``[0, V)``) against
    the product ``laws[j] x laws[k]`` (``laws [L, V]``)."""
    laws = np.asarray(laws, dtype=np.float64)
    V = laws.shape[1]
    out = []
    for j in range(sequences.shape[1]):
        for k in range(j + 1, sequences.shape[1]):
            t = table_test(f"{label}:positions {j},{k}", sequences[:, j] * V + sequences[:, k],
                           np.outer(laws[j], laws[k]).ravel())
            if t is not None:
                out.append(t)
    return out


@dataclass(frozen=True)
class SwapSignTest:
    """The swap sign test (module docstring): ``units`` compared, ``more``/``fewer`` the units
    whose tested pairing matched more / fewer times than the crossed one; ``rate_gap`` the
    difference of the match rates (the effect size)."""

    label: str
    units: int
    more: int
    fewer: int
    same_rate: float
    crossed_rate: float
    p_value: float

    @property
    def rate_gap(self) -> float:
        return self.same_rate - self.crossed_rate

    def to_json(self) -> dict:
        return {**asdict(self), "rate_gap": self.rate_gap}


def swap_sign_test(label: str, same, crossed) -> SwapSignTest:
    """``same``, ``crossed``: ``[U]`` match counts (0..2) of the tested and the crossed pairing
    per unit; the exact two-sided sign test of their symmetry."""
    same, crossed = np.asarray(same), np.asarray(crossed)
    if same.shape != crossed.shape or same.ndim != 1:
        raise ValueError(f"same {same.shape} and crossed {crossed.shape} must be equal [U] vectors")
    more, fewer = int((same > crossed).sum()), int((same < crossed).sum())
    p = binom_test(more, more + fewer, 0.5) if more + fewer else 1.0
    units = max(int(same.size), 1)
    return SwapSignTest(label, int(same.size), more, fewer, float(same.sum()) / (2 * units),
                        float(crossed.sum()) / (2 * units), p)
