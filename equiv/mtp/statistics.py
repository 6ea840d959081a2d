"""The statistics behind the verdicts: equivalence of acceptance, and losslessness.

Plan. Three tests, each a function returning a frozen result with ``to_json()``; each raises
``InvalidArgument`` on malformed input (wrong shapes, NaN, too few samples) instead of
returning NaN for a caller to compare.

- ``equivalence_test(values, reference, margin)``: paired TOST on per-sequence accept lengths of
  a path and of ``softmax_topk`` on the same seeds. The difference ``d = path - reference`` has a
  two-sided ``1 - 2 alpha`` (90 %) Student-t interval; the path is *equivalent* when that interval
  lies inside ``(-margin, +margin)`` (two one-sided tests at ``alpha = 0.05``). The default margin,
  ``ACCEPT_LENGTH_MARGIN = 0.05`` tokens per verify, is about 1.5 % of an accept length of 3.3:
  the throughput change an engine would notice. Identical outcomes give a zero-width interval.
- ``greedy_identity(tokens, lengths, reference)``: every emitted token equals plain target-only
  greedy decoding, position by position; the first mismatch is reported.
- ``sampling_fit(pit_values, groups)``: emitted tokens follow the target's law. The caller maps
  each emitted token to its randomized probability integral transform
  ``u = F(rank - 1) + U * p(rank)`` under the exact target law after its context (``pit``);
  under losslessness every ``u`` is uniform on [0, 1) and independent of the past, whatever the
  context, so all tokens pool into one exact test. ``u`` is binned into ``PIT_BINS`` equal bins
  and tested with Pearson's chi-square: once pooled, and once per group (the token's offset in
  its verify round: accepted draft positions and the bonus/resample slot), Bonferroni-corrected
  to a family-wise ``alpha = 0.001`` (a gate that runs on every change must not be flaky).
  A test fails only when it is significant AND the binned histogram is at least
  ``TVD_FLOOR = 0.01`` from uniform in total variation: significance keeps noise from failing a
  small sample, the floor keeps a negligible shift from failing a huge one. The measured
  false-positive rate and the smallest shift detected are in docs/mtp.md.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from equiv.errors import InvalidArgument

ACCEPT_LENGTH_MARGIN = 0.05
EQUIVALENCE_ALPHA = 0.05
SAMPLING_ALPHA = 0.001
TVD_FLOOR = 0.01
PIT_BINS = 20
MIN_EXPECTED = 5.0             # Pearson's rule: a test needs >= 5 expected tokens per bin


def _finite_1d(name, values):
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise InvalidArgument(f"{name} must be 1-D, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        bad = int(np.flatnonzero(~np.isfinite(arr))[0])
        raise InvalidArgument(f"{name}[{bad}]={arr[bad]} is not finite: statistics need finite values")
    return arr


@dataclass(frozen=True)
class EquivalenceResult:
    """Paired TOST of ``path - reference``: fields are the inputs' size, the mean difference,
    its ``ci_level`` interval, the margin and the verdict."""

    n: int
    mean_difference: float
    ci_low: float
    ci_high: float
    ci_level: float
    margin: float
    p_value: float
    equivalent: bool

    def to_json(self) -> dict:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


def equivalence_test(values, reference, margin: float = ACCEPT_LENGTH_MARGIN,
                     alpha: float = EQUIVALENCE_ALPHA) -> EquivalenceResult:
    """Paired two one-sided tests: is ``mean(values - reference)`` inside ``(-margin, margin)``?"""
    from scipy import stats

    x, y = _finite_1d("values", values), _finite_1d("reference", reference)
    if x.shape != y.shape:
        raise InvalidArgument(f"values and reference must pair up: {x.shape} vs {y.shape}")
    if x.size < 2:
        raise InvalidArgument(f"equivalence needs >= 2 paired sequences, got {x.size}")
    if not (margin > 0 and math.isfinite(margin)):
        raise InvalidArgument(f"margin={margin!r} is invalid: it must be a finite number > 0")
    if not 0 < alpha < 0.5:
        raise InvalidArgument(f"alpha={alpha!r} is invalid: it must be in (0, 0.5)")
    d = x - y
    n, mean = d.size, float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    if se == 0.0:
        lo = hi = mean
        p = 0.0 if abs(mean) < margin else 1.0
    else:
        t = float(stats.t.ppf(1 - alpha, n - 1))
        lo, hi = mean - t * se, mean + t * se
        p_low = float(stats.t.sf((mean + margin) / se, n - 1))      # H0: d <= -margin
        p_high = float(stats.t.cdf((mean - margin) / se, n - 1))    # H0: d >= +margin
        p = max(p_low, p_high)
    return EquivalenceResult(n, mean, lo, hi, 1 - 2 * alpha, margin, p,
                             bool(-margin < lo and hi < margin))


@dataclass(frozen=True)
class GreedyIdentityResult:
    """Emitted tokens vs target-only greedy decoding. ``first_mismatch`` is
    ``{"sequence", "position", "emitted", "greedy"}`` or None."""

    sequences: int
    tokens_compared: int
    mismatched_sequences: int
    first_mismatch: dict | None
    identical: bool

    def to_json(self) -> dict:
        return asdict(self)


def greedy_identity(tokens, lengths, reference) -> GreedyIdentityResult:
    """Is ``tokens[b, :lengths[b]] == reference[b, :lengths[b]]`` for every sequence ``b``?"""
    tokens, reference = np.asarray(tokens), np.asarray(reference)
    lengths = np.asarray(lengths)
    if tokens.ndim != 2 or reference.ndim != 2 or tokens.shape[0] != reference.shape[0]:
        raise InvalidArgument(f"tokens {tokens.shape} and reference {reference.shape} must be "
                              f"[sequences, length] with the same number of sequences")
    if lengths.shape != (tokens.shape[0],) or (lengths < 0).any() or (lengths > tokens.shape[1]).any():
        raise InvalidArgument(f"lengths must be [sequences] within 0..{tokens.shape[1]}")
    if lengths.size and lengths.max() > reference.shape[1]:
        raise InvalidArgument(f"reference has {reference.shape[1]} tokens per sequence, "
                              f"fewer than the {int(lengths.max())} emitted")
    first, bad_rows = None, 0
    for b, n in enumerate(lengths.tolist()):
        diff = np.flatnonzero(tokens[b, :n] != reference[b, :n])
        if diff.size:
            bad_rows += 1
            if first is None:
                j = int(diff[0])
                first = {"sequence": b, "position": j, "emitted": int(tokens[b, j]),
                         "greedy": int(reference[b, j])}
    return GreedyIdentityResult(int(lengths.size), int(lengths.sum()), bad_rows, first, bad_rows == 0)


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
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


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
    from scipy import stats

    observed = np.bincount(np.minimum((u * bins).astype(np.int64), bins - 1), minlength=bins)
    expected = u.size / bins
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    p = float(stats.chi2.sf(chi2, bins - 1))
    tvd = float(0.5 * np.abs(observed / u.size - 1.0 / bins).sum())
    return group, int(u.size), bins, chi2, p, tvd


def sampling_fit(pit_values, groups=None, *, alpha: float = SAMPLING_ALPHA,
                 tvd_floor: float = TVD_FLOOR, bins: int = PIT_BINS) -> SamplingFitResult:
    """Do the PIT values look uniform? (module docstring). ``groups[i]`` labels token ``i``."""
    u = _finite_1d("pit_values", pit_values)
    if u.size and (u.min() < 0 or u.max() >= 1):
        raise InvalidArgument("pit_values must lie in [0, 1): map tokens with pit() first")
    if not 0 < alpha < 1:
        raise InvalidArgument(f"alpha={alpha!r} is invalid: it must be in (0, 1)")
    if u.size < MIN_EXPECTED * bins:
        raise InvalidArgument(f"sampling_fit needs >= {int(MIN_EXPECTED * bins)} tokens for "
                              f"{bins} bins, got {u.size}: decode more sequences or rounds")
    raw = [_pit_test("pooled", u, bins)]
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != u.shape:
            raise InvalidArgument(f"groups {groups.shape} must match pit_values {u.shape}")
        for g in np.unique(groups):
            sel = u[groups == g]
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
