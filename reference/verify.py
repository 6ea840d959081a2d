"""The float64 NumPy law of a speculative-decoding verifier (a rejection sampler).

The operation: ``draft_token_ids d [B, n]``, ``draft_probs q [B, n, V]`` (or None: a one-hot
draft, ``q_j = 1`` at ``d_j``), ``target_probs p [B, n+1, V]`` -> ``out [B, n+1]``.

Plan
----
The law of ``out`` is written down exactly, row by row, from the float32 inputs upcast to
float64 (exact), and never by mirroring a sampler:

1. *Acceptance.* Position ``j < n`` accepts its draft with probability
   ``alpha_j = min(1, p_j(d_j) / q_j(d_j))``, given that every earlier position accepted. The
   ratio uses the values as given (engines do not renormalise before it).
2. *The drawn token.* At the first rejection ``j`` the output holds a token drawn from the
   residual ``max(0, p_j - q_j)`` renormalised; if all ``n`` drafts are accepted, position
   ``n`` holds a bonus token drawn from ``p_n`` renormalised. Renormalising makes the law
   independent of the ~1e-7 by which a float32 vector fails to sum to 1. After the drawn token
   every position holds ``-1``.
3. *The marginal of each position* (``emission_laws``): with ``reach_j = prod_{i<j} alpha_i``,
   ``P(out_j = -1) = 1 - reach_j``, ``P(out_j = d_j) += reach_j alpha_j`` and
   ``P(out_j = x) += reach_j (1 - alpha_j) r_j(x)`` (``reach_n p_n(x)`` at the bonus slot).

Inputs outside the contract raise ``ValueError`` naming the row and position: a non-finite or
negative probability, a draft token outside ``[0, V)``, a draft token with ``q = 0`` (it cannot
have been drawn from ``q``), a rejection of positive probability whose residual has no mass (the
inputs are not probability vectors), an all-zero ``p_n``.

``sample`` draws from this very law (inverse CDF, float64); it is the reference *sampler*, a
built-in path whose only job is to check the statistics of the judge (a judge that fails it is
flaky); the law itself is checked against exact fractions in tests/ops/verify/test_verify_reference.py.
"""
from __future__ import annotations

import numpy as np

_CHUNK_ELEMENTS = 1 << 24          # rows of [V] float64 handled at once by ``sample`` (128 MB)


def _as_arrays(draft_token_ids, draft_probs, target_probs):
    d = np.asarray(draft_token_ids)
    p = np.asarray(target_probs)
    q = None if draft_probs is None else np.asarray(draft_probs)
    if d.ndim != 2 or p.ndim != 3 or p.shape[:2] != (d.shape[0], d.shape[1] + 1):
        raise ValueError(f"shapes d {d.shape}, p {p.shape}: need d [B, n] and p [B, n+1, V]")
    if q is not None and q.shape != (d.shape[0], d.shape[1], p.shape[2]):
        raise ValueError(f"draft_probs has shape {q.shape}, need {(d.shape[0], d.shape[1], p.shape[2])}")
    if not np.issubdtype(d.dtype, np.integer):
        raise ValueError(f"draft_token_ids has dtype {d.dtype}, need an integer dtype")
    for name, arr in (("target_probs", p), ("draft_probs", q)):
        if arr is not None and not np.issubdtype(arr.dtype, np.floating):
            raise ValueError(f"{name} has dtype {arr.dtype}, need a floating dtype")
    vocab = p.shape[2]
    for name, arr in (("target_probs", p), ("draft_probs", q)):
        if arr is None:
            continue
        if arr.size and arr.min() >= 0 and np.isfinite(arr.max()):
            continue                           # two reductions, no temporaries; NaN fails min >= 0
        bad = ~np.isfinite(arr) | (arr < 0)
        if bad.any():
            b, j, x = (int(v[0]) for v in np.nonzero(bad))
            raise ValueError(f"{name}[{b}, {j}, {x}] = {float(arr[b, j, x])!r}: probabilities must be finite and >= 0")
    out = (d < 0) | (d >= vocab)
    if out.any():
        b, j = (int(v[0]) for v in np.nonzero(out))
        raise ValueError(f"draft_token_ids[{b}, {j}] = {int(d[b, j])} is outside [0, {vocab})")
    return d.astype(np.int64), q, p


def _at(probs, d):
    """``probs[b, j, d[b, j]]`` for every row and draft position, in float64."""
    return np.take_along_axis(probs[:, : d.shape[1]], d[..., None], axis=2)[..., 0].astype(np.float64)


def acceptance_probabilities(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """``alpha [B, n]``: the probability that position ``j`` accepts, given it is reached."""
    d, q, p = _as_arrays(draft_token_ids, draft_probs, target_probs)
    p_d = _at(p, d)
    if q is None:
        return np.minimum(1.0, p_d)
    q_d = _at(q, d)
    zero = q_d == 0
    if zero.any():
        b, j = (int(v[0]) for v in np.nonzero(zero))
        raise ValueError(f"draft_probs[{b}, {j}, {int(d[b, j])}] = 0 at the draft token: it cannot have "
                         f"been drawn from q")
    return np.minimum(1.0, p_d / q_d)


def _normalised(rows):
    total = rows.sum(axis=-1, keepdims=True)
    return np.divide(rows, total, out=np.zeros_like(rows), where=total > 0), total[..., 0]


def residual(draft_token_ids, draft_probs, target_probs, rows=None) -> np.ndarray:
    """``max(0, p_j - q_j)`` (unnormalised) ``[B', n, V]`` for the given rows (default all)."""
    d, q, p = _as_arrays(draft_token_ids, draft_probs, target_probs)
    rows = slice(None) if rows is None else rows
    pr = p[rows, :-1].astype(np.float64)
    if q is None:
        np.put_along_axis(pr, d[rows][..., None], 0.0, axis=2)
        return pr
    return np.maximum(0.0, pr - q[rows])


def drawn_laws(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """``[B, n+1, V]``: the law of the token drawn at each position (residual; ``p_n`` last).

    A residual row is all zero where it is never drawn (``alpha_j == 1``)."""
    d, q, p = _as_arrays(draft_token_ids, draft_probs, target_probs)
    alpha = acceptance_probabilities(d, q, p)
    laws = np.empty(p.shape)
    laws[:, :-1], mass = _normalised(residual(d, q, p))
    empty = (mass == 0) & (alpha < 1)
    if empty.any():
        b, j = (int(v[0]) for v in np.nonzero(empty))
        raise ValueError(f"row {b} position {j}: rejection has probability {1 - alpha[b, j]:.3g} but "
                         f"max(0, p - q) has no mass: p and q are not probability vectors")
    laws[:, -1], bonus_mass = _normalised(p[:, -1].astype(np.float64))
    if (bonus_mass == 0).any():
        b = int(np.flatnonzero(bonus_mass == 0)[0])
        raise ValueError(f"target_probs[{b}, n] is all zero: the bonus token has no law")
    return laws


def reach_probabilities(alpha) -> np.ndarray:
    """``[B, n+1]``: the probability that no rejection happened before position ``j``."""
    alpha = np.asarray(alpha, dtype=np.float64)
    ones = np.ones((alpha.shape[0], 1))
    return np.concatenate([ones, np.cumprod(alpha, axis=1)], axis=1)


def emission_laws(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """``[B, n+1, V+1]``: the marginal law of ``out[b, j]``; column 0 is the outcome ``-1``,
    column ``x + 1`` the token ``x``."""
    d, q, p = _as_arrays(draft_token_ids, draft_probs, target_probs)
    B, n = d.shape
    alpha = acceptance_probabilities(d, q, p)
    reach = reach_probabilities(alpha)
    laws = drawn_laws(d, q, p)
    out = np.zeros((B, n + 1, p.shape[2] + 1))
    out[:, :, 0] = 1.0 - reach
    out[:, :n, 1:] = (reach[:, :n] * (1.0 - alpha))[..., None] * laws[:, :n]
    out[:, n, 1:] = reach[:, n, None] * laws[:, n]
    rows, cols = np.meshgrid(np.arange(B), np.arange(n), indexing="ij")
    out[rows, cols, d + 1] += reach[:, :n] * alpha
    return out


def deterministic_output(draft_token_ids, draft_probs, target_probs) -> np.ndarray:
    """The one possible ``out [B, n+1]`` when every position's law is a point mass (one-hot
    targets: greedy verification); ``ValueError`` names a position that is random."""
    laws = emission_laws(draft_token_ids, draft_probs, target_probs)
    top = laws.max(axis=2)
    random = top < 1.0
    if random.any():
        b, j = (int(v[0]) for v in np.nonzero(random))
        raise ValueError(f"row {b} position {j} is random (largest outcome probability {top[b, j]:.6g})")
    return laws.argmax(axis=2).astype(np.int64) - 1


def sample(draft_token_ids, draft_probs, target_probs, rng) -> np.ndarray:
    """Draw ``out [B, n+1]`` from the law above with ``rng`` (a ``numpy.random.Generator``)."""
    d, q, p = _as_arrays(draft_token_ids, draft_probs, target_probs)
    B, n = d.shape
    V = p.shape[2]
    alpha = acceptance_probabilities(d, q, p)
    accept = rng.random((B, n)) < alpha
    stop = np.cumprod(accept, axis=1).sum(axis=1)            # first rejection, n when none
    u = rng.random(B)
    out = np.full((B, n + 1), -1, dtype=np.int64)
    cols = np.arange(n + 1)
    keep = cols[None, :] < stop[:, None]
    out[:, :n][keep[:, :n]] = d[keep[:, :n]]
    step = max(1, _CHUNK_ELEMENTS // max(V, 1))
    for lo in range(0, B, step):
        rows = np.arange(lo, min(lo + step, B))
        s = stop[rows]
        law = p[rows, s].astype(np.float64)
        rejected = s < n
        if rejected.any():
            rr = rows[rejected]
            sj = s[rejected]
            if q is None:
                law[rejected, d[rr, sj]] = 0.0
            else:
                law[rejected] = np.maximum(0.0, law[rejected] - q[rr, sj])
        cdf = np.cumsum(law, axis=1)
        total = cdf[:, -1]
        if (total <= 0).any():
            bad = int(rows[np.flatnonzero(total <= 0)[0]])
            raise ValueError(f"row {bad}: the law drawn from at position {int(stop[bad])} has no mass")
        for i, row in enumerate(rows):             # cdf is non-decreasing: binary searches
            tok = np.searchsorted(cdf[i], u[row] * total[i], side="right")   # first cdf > u * total
            last = np.searchsorted(cdf[i], total[i], side="left")   # the last token of mass > 0:
            out[row, s[i]] = min(tok, last)                        # u * total == total rounds there
    return out
