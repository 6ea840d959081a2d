"""The float64 NumPy oracle for softmax-then-top-k.

Plan
----
1. Upcast the input exactly to float64 (float16, bfloat16-as-float32 and float32 all embed
   exactly), row by row, so memory stays O(V) beyond the input itself.
2. Classify each row. A row is *poisoned* when it holds NaN, holds +inf, or is all -inf; the
   only acceptable probability there is NaN, except that a row with exactly one +inf (and no NaN)
   has the limit distribution: probability 1.0 at the +inf entry, 0.0 elsewhere.
3. For a healthy row: ``m = max(x)``, ``log_sum = log(sum(exp(x - m)))`` in float64 (pairwise
   sum, error ~1e-15 relative), and ``p_j = exp((x_j - m) - log_sum)``. The two terms are never
   folded into one ``lse = m + log_sum``: at |m| above ~1e11 the float64 rounding of that sum
   swallows ``log_sum`` (the row [2**41, 2**41] would get p = 0.49989, [3.4e38, 3.4e38] p = 1.0;
   the truth is 0.5). Kept apart, ``p`` is exact to ~1e-14 relative at every finite value of
   float32, bfloat16 and float16 (tested against mpmath up to each dtype's max): ``x_j - m`` is
   exact whenever ``p_j`` is above float64's underflow (Sterbenz, once |m| > 1490; below that,
   its rounding costs at most 745 * 2**-53 relative). ``-inf`` entries get probability 0.
   Nothing here mirrors a kernel: no online rescaling, no blocking.
4. Order the row by (probability descending, index ascending): the first k are the canonical
   answer, ties broken by the lowest index.
5. Tie sets are answered on demand from the stored float64 row, never materialised for the whole
   batch: an index j may stand at rank r when ``|p_j - p_(r)| <= tie_rtol * p_(r) + tie_atol``;
   with both 0 these are the exact ties of the input.

The result keeps a reference to the input rows (no copy) so that the exact probability of any
index a path returned can be looked up afterwards (``prob_of``).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

THREADED_ELEMENTS = 2 ** 21       # larger batches are judged row by row in threads (rows are independent)

HEALTHY = "healthy"
POISON_NAN = "nan"
POISON_POSINF = "posinf"          # one +inf: limit distribution exists (1.0 at that index)
POISON_MULTI_POSINF = "multi_posinf"
POISON_ALL_NEGINF = "all_neginf"
POISON_KINDS = (POISON_NAN, POISON_POSINF, POISON_MULTI_POSINF, POISON_ALL_NEGINF)


def _threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(8, cores))


def _row_kind(row: np.ndarray) -> str:
    if np.isnan(row).any():
        return POISON_NAN
    n_pos = int(np.count_nonzero(row == np.inf))
    if n_pos == 1:
        return POISON_POSINF
    if n_pos > 1:
        return POISON_MULTI_POSINF
    if row.size == 0 or np.all(row == -np.inf):
        return POISON_ALL_NEGINF
    return HEALTHY


def _max_and_log_sum(row: np.ndarray) -> tuple[float, float]:
    # float64 pairwise summation: relative error below log2(V) * 2**-53 (~2e-15 at V = 129280),
    # nine orders of magnitude under a float32 ULP, so the oracle's own error never matters.
    m = float(row.max())
    return m, float(np.log(np.sum(np.exp(row - m))))


def _probs(x: np.ndarray, m: float, log_sum: float) -> np.ndarray:
    # (x - m) first: folding m and log_sum into one number loses log_sum at large |m| (plan, 3).
    return np.exp((x - m) - log_sum)


def _top_order(key: np.ndarray, k: int) -> np.ndarray:
    """First k indices of ``key`` by (value descending, index ascending)."""
    if k < key.size:
        threshold = np.partition(key, key.size - k)[key.size - k]
        candidates = np.flatnonzero(key >= threshold)   # every tie at the threshold is kept
    else:
        candidates = np.arange(key.size)
    order = np.argsort(-key[candidates], kind="stable")
    return candidates[order[:k]]


@dataclass(frozen=True)
class ReferenceResult:
    """Exact top-k of softmax(logits) per row.

    Fields
    ------
    k: number of ranks.
    topk_p: ``[B, k]`` float64, exact probabilities at the canonical indices (the limit for a
        single-+inf row, NaN for other poisoned rows).
    topk_index: ``[B, k]`` int64, canonical indices (ties to the lowest index).
    kind: per row, ``"healthy"`` or one of ``POISON_KINDS``.
    row_max: ``[B]`` float64 maximum of each healthy row (NaN for poisoned rows).
    log_sum: ``[B]`` float64 ``log(sum(exp(x - row_max)))`` of each healthy row (NaN for poisoned
        rows); ``p_j = exp((x_j - row_max) - log_sum)``.
    """

    k: int
    topk_p: np.ndarray
    topk_index: np.ndarray
    kind: tuple
    row_max: np.ndarray
    log_sum: np.ndarray
    rows: np.ndarray = field(repr=False)

    @property
    def batch(self) -> int:
        return self.topk_p.shape[0]

    @property
    def vocab(self) -> int:
        return self.rows.shape[1]

    @property
    def poisoned(self) -> np.ndarray:
        return np.array([k != HEALTHY for k in self.kind], dtype=bool)

    def row_probs(self, row: int) -> np.ndarray:
        """All V exact probabilities of one row, float64 (limit or NaN for poisoned rows)."""
        x = np.asarray(self.rows[row], dtype=np.float64)
        kind = self.kind[row]
        if kind == HEALTHY:
            return _probs(x, self.row_max[row], self.log_sum[row])
        if kind == POISON_POSINF:
            return (x == np.inf).astype(np.float64)
        return np.full(x.shape, np.nan)

    def prob_of(self, indices: np.ndarray) -> np.ndarray:
        """Exact probability of ``indices[b, r]`` in row b; same shape, float64.

        Out-of-range indices give NaN (the caller's contract check reports them)."""
        indices = np.asarray(indices)
        out = np.full(indices.shape, np.nan, dtype=np.float64)
        for b in range(indices.shape[0]):
            idx = indices[b]
            ok = (idx >= 0) & (idx < self.vocab)
            x = np.asarray(self.rows[b][idx[ok]], dtype=np.float64)
            kind = self.kind[b]
            if kind == HEALTHY:
                out[b, ok] = _probs(x, self.row_max[b], self.log_sum[b])
            elif kind == POISON_POSINF:
                out[b, ok] = (x == np.inf).astype(np.float64)
        return out

    def tie_set(self, row: int, rank: int, tie_rtol: float = 0.0, tie_atol: float = 0.0) -> np.ndarray:
        """Every index that may legally stand at ``rank`` of ``row``, ascending.

        Exact ties of the input, plus near-ties within ``tie_rtol * p + tie_atol`` of the exact
        probability ``p`` at that rank (``tie_atol``: the output format's underflow, below which
        every probability rounds to 0). A poisoned row admits any index (its value is what is
        judged)."""
        if self.kind[row] != HEALTHY:
            return np.arange(self.vocab, dtype=np.int64)
        p = self.row_probs(row)
        target = self.topk_p[row, rank]
        return np.flatnonzero(np.abs(p - target) <= tie_rtol * target + tie_atol).astype(np.int64)

    def in_tie_set(self, indices: np.ndarray, tie_rtol: float = 0.0, tie_atol: float = 0.0) -> np.ndarray:
        """``[B, k]`` bool: is ``indices[b, r]`` in the tie set of rank r of row b.

        Equivalent to membership in ``tie_set`` but computed from ``prob_of`` (no sets built)."""
        p = self.prob_of(indices)
        target = self.topk_p[:, : indices.shape[1]]
        ok = np.abs(p - target) <= tie_rtol * target + tie_atol
        ok[self.poisoned] = True
        in_range = (np.asarray(indices) >= 0) & (np.asarray(indices) < self.vocab)
        return ok & in_range


def softmax_topk(logits, k: int = 1) -> ReferenceResult:
    """Exact softmax-then-top-k of a ``[B, V]`` array-like (any float dtype NumPy can read).

    Raises ``ValueError`` for a non-2-D input or ``k`` outside ``[1, V]``."""
    rows = np.asarray(logits)
    if rows.ndim != 2:
        raise ValueError(f"logits must be 2-D [B, V], got shape {rows.shape}")
    if not np.issubdtype(rows.dtype, np.floating):
        raise ValueError(f"logits must be floating point, got dtype {rows.dtype}")
    batch, vocab = rows.shape
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= max(vocab, 1) or vocab == 0:
        raise ValueError(f"k={k} must be an integer in [1, V={vocab}]")
    topk_p = np.empty((batch, k), dtype=np.float64)
    topk_index = np.empty((batch, k), dtype=np.int64)
    row_max = np.full(batch, np.nan)
    log_sum = np.full(batch, np.nan)
    kinds = [HEALTHY] * batch

    def one(b: int) -> None:                     # a row's work touches row b's slots only
        x = np.asarray(rows[b], dtype=np.float64)
        kind = kinds[b] = _row_kind(x)
        if kind == HEALTHY:
            row_max[b], log_sum[b] = _max_and_log_sum(x)
            key = x                      # exp is monotone: order by logit, not by rounded p
        elif kind == POISON_POSINF:
            key = (x == np.inf).astype(np.float64)
        else:
            key = np.zeros_like(x)
        order = _top_order(key, k)
        topk_index[b] = order
        if kind == HEALTHY:
            topk_p[b] = _probs(x[order], row_max[b], log_sum[b])
        elif kind == POISON_POSINF:
            topk_p[b] = key[order]
        else:
            topk_p[b] = np.nan

    threads = _threads() if batch > 1 and batch * vocab >= THREADED_ELEMENTS else 1
    if threads == 1:
        for b in range(batch):
            one(b)
    else:                                        # NumPy lets go of the GIL inside exp, sum, partition
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(batch), chunksize=max(1, batch // (4 * threads))))
    return ReferenceResult(k=int(k), topk_p=topk_p, topk_index=topk_index, kind=tuple(kinds),
                           row_max=row_max, log_sum=log_sum, rows=rows)
