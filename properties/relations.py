"""The metamorphic relations: how a follow-up input is made, and what its answer must satisfy.

Plan
----
A relation compares the subject with itself, never with the reference's top-k: a path that is
wrong the same way on both inputs (a second-best index, a hardcoded 1.0) passes a relation and
is caught by the equivalence properties instead, so each property names one kind of bug.
The reference is used only to say which answers are *equally good*: two indices are equivalent
when their exact probabilities are within the tolerance's ``rtol`` (the near-tie width) or both
under the output format's subnormal resolution (``subnormal_atol``), and two
probabilities agree when they differ by at most the sum of their tolerance allowances.

Follow-up inputs (all exact, so softmax of the follow-up is known exactly from the first):
- ``snap``: round onto the grid of ``strategies.SHIFT_GRID`` so that ``x + c`` is exact;
- ``permute_vocab``: reverse, roll or a seeded random permutation of the columns;
- ``poison_rows``: insert NaN / +inf / two +inf / all -inf rows between healthy ones;
- ``raise_logits``: per row, raise the top logit, or a lower one to half-way to the max.
"""
from __future__ import annotations

import numpy as np
import torch

from equiv import reference
from equiv.ops.draft_topk.strategies import SHIFT_GRID
from equiv.properties.runner import to_numpy

POISON_CYCLE = ("nan", "posinf", "two_posinf", "all_neginf")


def snap(x, dtype: str):
    """``x`` rounded onto the exact-shift grid of ``dtype`` and clipped to its range."""

    g, x_max, _ = SHIFT_GRID[dtype]
    y = torch.round(x.float() / g) * g
    y = torch.where(torch.isneginf(x.float()), x.float(), y.clamp(-x_max, x_max))
    return y.to(x.dtype)


def permutation(kind: str, seed: int, vocab: int) -> np.ndarray:
    if kind == "reverse":
        return np.arange(vocab)[::-1].copy()
    if kind == "roll":
        return np.roll(np.arange(vocab), 1 + seed % max(vocab, 1))
    return np.random.default_rng(seed).permutation(vocab)


def permute_vocab(x, perm: np.ndarray):
    """``y[:, j] = x[:, perm[j]]``: an index ``i`` of y is index ``perm[i]`` of x."""
    return x.index_select(1, torch.as_tensor(perm, device=x.device))


def poison_rows(x, seed: int, n: int):
    """``x`` with ``n`` poisoned rows inserted at seeded positions; returns (y, healthy_rows_of_y)."""
    rng = np.random.default_rng(seed)
    batch, vocab = x.shape
    total = batch + n
    poisoned = np.sort(rng.choice(total, size=n, replace=False))
    healthy = np.setdiff1d(np.arange(total), poisoned)
    y = torch.empty((total, vocab), dtype=x.dtype, device=x.device)
    y[torch.as_tensor(healthy, device=x.device)] = x
    for i, r in enumerate(poisoned):
        kind = POISON_CYCLE[i % len(POISON_CYCLE)]
        row = torch.zeros(vocab, dtype=x.dtype, device=x.device)
        j = int(rng.integers(vocab))
        if kind == "all_neginf":
            row[:] = -float("inf")
        else:
            row[j] = float("nan") if kind == "nan" else float("inf")
            if kind == "two_posinf":
                row[(j + 1) % vocab] = float("inf")
        y[int(r)] = row
    return y, healthy


def raise_logits(x, ref, mode: str, seed: int):
    """Per healthy row, raise one logit; returns the new tensor and the raised index per row.

    ``top``: the canonical top logit goes up by max(1, |x|/8) (rounded in the dtype, so it stays
    above every other logit by a margin far wider than any near-tie). ``other``: a seeded
    lower logit goes half-way to the row max, staying strictly below it (unchanged when the
    dtype has no value in between)."""
    rng = np.random.default_rng(seed)
    y = x.clone()
    raised = np.full(x.shape[0], -1, dtype=np.int64)
    rows = np.asarray(ref.rows, dtype=np.float64)
    for b in np.flatnonzero(~ref.poisoned):
        top = int(ref.topk_index[b, 0])
        m = rows[b, top]
        if mode == "top":
            j, target = top, m + max(1.0, abs(m) / 8)
        else:
            lower = np.flatnonzero(np.isfinite(rows[b]) & (rows[b] < m))
            if lower.size == 0:
                continue
            j = int(rng.choice(lower))
            target = rows[b, j] + (m - rows[b, j]) / 2
        new = torch.tensor(target, dtype=torch.float64).to(x.dtype)
        if not (rows[b, j] < float(new) and (mode == "top" or float(new) < m)) or not torch.isfinite(new):
            continue
        y[b, j] = new.to(x.device)
        raised[b] = j
    return y, raised


FLOAT32_UNDERFLOW = 2.0 ** -150          # half the smallest float32 subnormal: rounds to 0.0


def equally_good(pa, pb, tol):
    """Exact probabilities no output can tell apart: within the near-tie width ``rtol``, or both
    under the output format's resolution (float16 rounds everything under 3e-8 to 0, float32
    everything under 7e-46)."""
    floor = max(tol.subnormal_atol, FLOAT32_UNDERFLOW)
    return np.abs(pa - pb) <= tol.rtol * np.maximum(pa, pb) + floor


def prob_at(ref, rows, idx):
    """Exact probabilities of ``idx[i]`` in row ``rows[i]`` of ``ref`` (``[n, k]`` float64)."""
    full = np.zeros((ref.batch, idx.shape[1]), dtype=np.int64)
    full[rows] = idx
    return ref.prob_of(full)[rows]


def disagreement(a, b, ref, tol, *, rows=None, b_rows=None, b_index_map=None,
                 values: str = "equal") -> str | None:
    """Why ``b`` is not the same answer as ``a`` on healthy rows of ``ref`` (None: it is).

    Row ``rows[i]`` of ``a`` (and of ``ref``) is row ``b_rows[i]`` of ``b``; ``b_index_map`` maps
    b's indices onto ref's columns. ``values``: ``"equal"`` (within the sum of both allowances),
    ``"b_not_lower"`` or ``"b_not_higher"`` (one-sided, same allowance)."""
    rows = np.arange(ref.batch) if rows is None else np.asarray(rows)
    b_rows = rows if b_rows is None else np.asarray(b_rows)
    keep = ~ref.poisoned[rows]
    rows, b_rows = rows[keep], b_rows[keep]
    if rows.size == 0:
        return None
    ia, pa = a.idx[rows], a.p[rows]
    ib, pb = b.idx[b_rows], b.p[b_rows]
    if b_index_map is not None:
        ib = b_index_map[ib]
    exact_a, exact_b = prob_at(ref, rows, ia), prob_at(ref, rows, ib)
    top1 = ref.topk_p[rows, :1]
    same_index = equally_good(exact_a, exact_b, tol)
    slack = tol.allowed(exact_a, top1) + tol.allowed(exact_b, top1)
    with np.errstate(invalid="ignore"):
        diff = pb - pa
        if values == "b_not_lower":
            ok_value = diff >= -slack
        elif values == "b_not_higher":
            ok_value = diff <= slack
        else:
            ok_value = np.abs(diff) <= slack
    ok_value |= np.isnan(pa) & np.isnan(pb)
    bad = ~(same_index & ok_value)
    if not bad.any():
        return None
    i, r = np.argwhere(bad)[0]
    what = "index" if not same_index[i, r] else "value"
    return (f"{int(bad.any(axis=1).sum())} / {rows.size} healthy rows differ; first at row {int(rows[i])} "
            f"rank {int(r)} ({what}): first answer index {int(ia[i, r])} p={pa[i, r]:.9g} "
            f"(exact {exact_a[i, r]:.9g}), second answer index {int(ib[i, r])} p={pb[i, r]:.9g} "
            f"(exact {exact_b[i, r]:.9g}); allowed: equally good indices (rel diff <= {tol.rtol:.3g} "
            f"or both <= {tol.subnormal_atol:.3g}) "
            f"and |p diff| <= {slack[i, r]:.3g}" + ("" if values == "equal" else f" ({values})"))


def monotonicity_problem(a, b, ref_b, raised, mode: str, tol) -> str | None:
    """After ``raise_logits``: raising the top logit may not lower p_top1 and must keep it on
    top; raising a lower one (still under the max) may not raise p_top1 nor move the top."""
    rows = np.flatnonzero(raised >= 0)
    if rows.size == 0:
        return None
    anchor = raised[rows, None] if mode == "top" else a.idx[rows, :1]
    exact_anchor, exact_b = prob_at(ref_b, rows, anchor), prob_at(ref_b, rows, b.idx[rows, :1])
    same_index = equally_good(exact_anchor, exact_b, tol)
    top1 = ref_b.topk_p[rows, :1]
    slack = 2 * tol.allowed(np.maximum(exact_anchor, exact_b), top1)
    pa, pb = a.p[rows, :1], b.p[rows, :1]
    with np.errstate(invalid="ignore"):
        ok_value = (pb >= pa - slack) if mode == "top" else (pb <= pa + slack)
    bad = ~(same_index & ok_value)[:, 0]
    if not bad.any():
        return None
    i = int(np.flatnonzero(bad)[0])
    r = int(rows[i])
    rule = ("raising the top logit keeps it on top and does not lower p_top1" if mode == "top" else
            "raising a lower logit (still under the max) neither moves the top nor raises p_top1")
    return (f"{int(bad.sum())} / {rows.size} rows break '{rule}'; first row {r}, raised index "
            f"{int(raised[r])}: before index {int(a.idx[r, 0])} p={pa[i, 0]:.9g}, after index "
            f"{int(b.idx[r, 0])} p={pb[i, 0]:.9g} (exact after: {exact_b[i, 0]:.9g}; allowance "
            f"{slack[i, 0]:.3g})")


def bounds_problem(out, ref, tol) -> str | None:
    """Healthy rows: 1/V <= p_top1 <= 1, every p in [0, 1], sum of the top-k <= 1 (+ allowance)."""
    vocab = ref.vocab
    rows = np.flatnonzero(~ref.poisoned)
    if rows.size == 0:
        return None
    p = out.p[rows]
    lo = 1.0 / vocab - tol.allowed(1.0 / vocab, 1.0)
    hi = 1.0 + tol.allowed(1.0, 1.0)
    k = p.shape[1]
    with np.errstate(invalid="ignore"):
        bad = ~((p[:, 0] >= lo) & (p <= hi).all(axis=1) & (p >= 0).all(axis=1)
                & (p.sum(axis=1) <= 1.0 + k * tol.allowed(1.0, 1.0)))
    if not bad.any():
        return None
    i = int(np.flatnonzero(bad)[0])
    return (f"{int(bad.sum())} / {rows.size} healthy rows out of bounds; first row {int(rows[i])}: "
            f"topk_p={p[i].tolist()} (allowed: {lo:.9g} <= p_top1, every p in [0, {hi:.9g}], "
            f"sum <= {1.0 + k * tol.allowed(1.0, 1.0):.9g}; V={vocab})")


def reference_of(x, k: int):
    return reference.softmax_topk(to_numpy(x), k)
