"""Goodness of fit of drawn tokens to an exact law: randomized PIT, binned chi-square, Bernstein.

Plan. ``pit(rank_probabilities, levels, ranks, rng)`` maps each token to its randomized
probability integral transform ``u = F(rank - 1) + U * p(rank)`` under the exact law of its level
(Brockwell 2007, "Universal residuals"): under the right law every ``u`` is uniform on [0, 1) and
independent of the past, whatever the context, so tokens of every context pool into one exact test.
``sampling_fit(u, groups)`` bins ``u`` into ``PIT_BINS`` equal bins and tests with Pearson's
chi-square, pooled and per group, Bonferroni-corrected to a family-wise ``alpha = 0.001``;
a test fails only when it is significant AND the binned histogram is at least ``TVD_FLOOR = 0.01``
from uniform in total variation: significance keeps noise from failing a small sample, the floor
keeps a negligible shift from failing a huge one. The measured false-positive rate and the
smallest shift detected are in docs/mtp.md (``python -m equiv.mtp.calibration``).

``cells_test(observed, expected)`` is Pearson's chi-square of counts against exact expected
counts with the tail cells merged until each expects >= 5 (Cochran's rule); ``bernstein_p`` is
Bernstein's inequality for a sum of bounded independent terms, valid at every sample size and
skew (the verifier's score tests, calibrated in docs/verify.md).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.stats.labels import Labels
from equiv.stats.values import chi2_sf, finite_1d, rounded

SAMPLING_ALPHA = 0.001
TVD_FLOOR = 0.01
PIT_BINS = 20
MIN_EXPECTED = 5.0             # Pearson's rule: a test needs >= 5 expected tokens per bin


@dataclass(frozen=True)
class PitTest:
    """One chi-square test of binned PIT values against uniform."""

    group: str
    n: int
    bins: int
    chi2: float
    p_value: float
    tvd: float
    significant: bool
    failed: bool

    def to_json(self) -> dict:
        return rounded(self)


@dataclass(frozen=True)
class SamplingFitResult:
    """Pooled and per-group PIT tests; ``passed`` is False when any test is significant at the
    Bonferroni level ``alpha / tests`` AND its TVD exceeds ``tvd_floor``."""

    tokens: int
    alpha: float
    tvd_floor: float
    tests: tuple
    passed: bool

    @property
    def max_tvd(self) -> float:
        return max(t.tvd for t in self.tests)

    @property
    def min_p_value(self) -> float:
        return min(t.p_value for t in self.tests)

    def to_json(self) -> dict:
        return {"tokens": self.tokens, "alpha": self.alpha, "tvd_floor": self.tvd_floor,
                "passed": self.passed, "max_tvd": round(self.max_tvd, 6),
                "min_p_value": round(self.min_p_value, 6),
                "tests": [t.to_json() for t in self.tests]}


def _pit_test(group: str, u, bins: int) -> tuple:
    observed = np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1), minlength=bins)
    expected = u.size / bins
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    p = chi2_sf(chi2, bins - 1)
    tvd = float(0.5 * np.abs(observed / u.size - 1.0 / bins).sum())
    return group, int(u.size), bins, chi2, p, tvd


def sampling_fit(pit_values, groups=None, *, alpha: float = SAMPLING_ALPHA,
                 tvd_floor: float = TVD_FLOOR, bins: int = PIT_BINS) -> SamplingFitResult:
    """Do the PIT values look uniform? (module docstring). ``groups[i]`` labels token ``i``."""
    u = finite_1d("pit_values", pit_values)
    if u.size and (u.min() < 0 or u.max() >= 1):
        raise InvalidArgument("pit_values must lie in [0, 1): map tokens with pit() first")
    if not 0 < alpha < 1:
        raise InvalidArgument(f"alpha={alpha!r} is invalid: it must be in (0, 1)")
    if u.size < MIN_EXPECTED * bins:
        raise InvalidArgument(f"sampling_fit needs >= {int(MIN_EXPECTED * bins)} tokens for "
                              f"{bins} bins, got {u.size}: decode more sequences or rounds")
    raw = [_pit_test("pooled", u, bins)]
    if groups is not None:
        labels = Labels.of(groups)
        if labels.shape != u.shape:
            raise InvalidArgument(f"groups {labels.shape} must match pit_values {u.shape}")
        for g in labels.present():
            sel = u[labels.mask(g)]
            if sel.size >= MIN_EXPECTED * bins:
                raw.append(_pit_test(f"offset {g}", sel, bins))
    level = alpha / len(raw)
    tests = tuple(PitTest(g, n, b, c, p, t, p < level, p < level and t > tvd_floor)
                  for g, n, b, c, p, t in raw)
    return SamplingFitResult(int(u.size), alpha, tvd_floor, tests, not any(t.failed for t in tests))


def pit(rank_probabilities, levels, ranks, rng):
    """Randomized PIT ``F(rank - 1) + U * p(rank)`` of each token under its level's exact law.

    ``rank_probabilities`` is ``[L, V]`` float64 (rows sum to 1), ``levels`` and ``ranks`` are
    integer arrays of one length, ``rng`` a ``numpy.random.Generator`` (seeded by the caller)."""
    probs = np.asarray(rank_probabilities, dtype=np.float64)
    levels, ranks = np.asarray(levels, dtype=np.int64), np.asarray(ranks, dtype=np.int64)
    if probs.ndim != 2 or not np.allclose(probs.sum(1), 1.0, atol=1e-9):
        raise InvalidArgument("rank_probabilities must be [levels, V] with rows summing to 1")
    if levels.shape != ranks.shape:
        raise InvalidArgument(f"levels {levels.shape} and ranks {ranks.shape} must match")
    if levels.size and (levels.min() < 0 or levels.max() >= probs.shape[0]):
        raise InvalidArgument(f"levels must be in [0, {probs.shape[0]})")
    if ranks.size and (ranks.min() < 0 or ranks.max() >= probs.shape[1]):
        raise InvalidArgument(f"ranks must be in [0, {probs.shape[1]}); a rank of -1 is an "
                              f"emitted token outside the vocabulary")
    below = np.cumsum(probs, axis=1) - probs          # F(rank - 1)
    u = below[levels, ranks] + rng.random(levels.shape) * probs[levels, ranks]
    return np.clip(u, 0.0, np.nextafter(1.0, 0.0))


def cells_test(observed, expected):
    """Pearson's chi-square of counts against expected counts, the tail cells merged until each
    expects >= 5; ``(chi2, df, p, tvd)`` or None when fewer than two cells are left."""
    obs, exp, acc_o, acc_e = [], [], 0.0, 0.0
    for o, e in zip(observed[::-1], expected[::-1]):
        acc_o, acc_e = acc_o + o, acc_e + e
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if obs:
        obs[-1] += acc_o
        exp[-1] += acc_e
    if len(obs) < 2:
        return None
    obs, exp = np.array(obs), np.array(exp)
    stat = float(((obs - exp) ** 2 / exp).sum())
    return stat, len(obs) - 1, chi2_sf(stat, len(obs) - 1), float(0.5 * np.abs(obs - exp).sum() / obs.sum())


def bernstein_p(total: float, var: float, bound: float) -> float:
    """Two-sided tail bound of a sum of independent zero-mean terms ``|X_i| <= bound`` with total
    variance ``var``: ``P(|sum| >= |total|) <= 2 exp(-t^2 / (2 (var + bound t / 3)))``."""
    t = abs(total)
    if t == 0.0:
        return 1.0
    return float(min(1.0, 2.0 * np.exp(-t * t / (2.0 * (var + bound * t / 3.0)))))


@dataclass(frozen=True)
class BoundTest:
    """Accepted drafts against the most a lossless verifier can accept on the same drafts: each
    term ``accepted - optimum`` has conditional mean <= 0 under losslessness and lies in a range of
    width ``span``, so Azuma-Hoeffding bounds ``P(sum >= excess) <= exp(-2 excess^2 / (n span^2))``."""

    rounds: int
    accepted: float
    optimum: float
    p_value: float
    alpha: float
    passed: bool

    def to_json(self) -> dict:
        return {"test": "accepted drafts <= lossless optimum (Azuma-Hoeffding)", "rounds": self.rounds,
                "mean_accepted": round(self.accepted, 6), "mean_optimum": round(self.optimum, 6),
                "p_value": float(f"{self.p_value:.6g}"), "alpha": self.alpha, "passed": self.passed}


def above_bound(observed, bound, span: float, alpha: float = SAMPLING_ALPHA) -> BoundTest:
    """``BoundTest`` of ``observed`` (per round: what was accepted) against ``bound`` (per round:
    the expected count of the optimal lossless rule on the same drafts), terms in ``[-span, span]``
    wide ``span``. Fails only when the excess is significant at ``alpha``: a lossless verifier
    fails with probability <= alpha whatever its efficiency, since its mean is at or below the bound."""
    obs, opt = np.asarray(observed, dtype=np.float64), np.asarray(bound, dtype=np.float64)
    n = int(obs.size)
    excess = float((obs - opt).sum())
    p = 1.0 if n == 0 or excess <= 0 else float(np.exp(-2.0 * excess * excess / (n * span * span)))
    return BoundTest(n, float(obs.mean()) if n else 0.0, float(opt.mean()) if n else 0.0, p, alpha,
                     p >= alpha)
