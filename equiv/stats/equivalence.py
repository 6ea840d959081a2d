"""Equivalence of acceptance, and identity of greedy text: is a path's downstream outcome the baseline's?

Plan. Two tests, each a function returning a frozen result with ``to_json()``; each raises
``InvalidArgument`` on malformed input (wrong shapes, NaN, too few samples) instead of
returning NaN for a caller to compare.

- ``equivalence_test(values, reference, margin)``: paired TOST (Schuirmann 1987) on per-sequence
  accept lengths of a path and of ``softmax_topk`` on the same seeds. The difference
  ``d = path - reference`` has a two-sided ``1 - 2 alpha`` (90 %) Student-t interval; the path is
  *equivalent* when that interval lies inside ``(-margin, +margin)`` (two one-sided tests at
  ``alpha = 0.05``). The default margin, ``ACCEPT_LENGTH_MARGIN = 0.05`` tokens per verify, is
  about 1.5 % of an accept length of 3.3: the throughput change an engine would notice.
  Identical outcomes give a zero-width interval. Calibration: docs/mtp.md.
- ``greedy_identity(tokens, lengths, reference)``: every emitted token equals plain target-only
  greedy decoding, position by position; the first mismatch is reported (exact, no error rate).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.stats.values import finite_1d, rounded, t_cdf, t_ppf, t_sf

ACCEPT_LENGTH_MARGIN = 0.05
EQUIVALENCE_ALPHA = 0.05


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
        return rounded(self)


def equivalence_test(values, reference, margin: float = ACCEPT_LENGTH_MARGIN,
                     alpha: float = EQUIVALENCE_ALPHA) -> EquivalenceResult:
    """Paired two one-sided tests: is ``mean(values - reference)`` inside ``(-margin, margin)``?"""
    x, y = finite_1d("values", values), finite_1d("reference", reference)
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
        t = t_ppf(1 - alpha, n - 1)
        lo, hi = mean - t * se, mean + t * se
        p_low = t_sf((mean + margin) / se, n - 1)      # H0: d <= -margin
        p_high = t_cdf((mean - margin) / se, n - 1)    # H0: d >= +margin
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


