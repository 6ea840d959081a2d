"""The losslessness judge: does the emitted text have the target model's law?

Plan. Losslessness is what users rely on, and it is a property of the verifier *with drafts
drawn from the draft law*: so the judge's statistical cases use ``drafts=sampled`` recipes
(every row draws its own drafts from ``draft_probs``, or from the hidden draft law of a one-hot
drafter; recipes.py). The judge reads each output row up to its last emitted token (the first
``-1`` or the end) and continues it past that token with fresh draws from the target, in this
(the verdict) process with its own seeded generator. The judge's targets are context-free, so a
lossless verifier makes every continued row ``[n+1]`` a draw of the product law ``p_0 x p_1 x
... x p_n`` of its problem. Any verifier with that property passes -- token-level rejection
sampling, block verification, an exponential race -- whatever it accepts per draft.

Checks (the exact ones per call; the statistical ones pooled over the plan):

- ``support`` (exact): no emitted token has target probability 0 at its position;
- ``greedy`` (exact): on one-hot targets every emitted token is the target's argmax (a lossless
  verifier may emit fewer tokens than greedy decoding; the efficiency column shows that);
- ``marginal`` (chi-square): every position's tokens against ``p_j``, as the token law's
  ``distribution`` check does for drawn tokens (randomized PIT in ``PIT_BINS`` bins and rank
  cells, pooled and per (family, position));
- ``joint`` (chi-square): the randomized PITs of neighbouring positions ``(j, j+1)`` binned
  ``JOINT_BINS x JOINT_BINS``: uniform on the square when the positions are independent with the
  right marginals; it sees a verifier whose positions are each right but tied together;
- ``tail`` (Poisson): repeats among tail draws of each position's law (tail.py).

Family-wise error (``judge.FAMILY_ALPHA = 1e-4`` per judge run): a quarter each to the
marginal PIT tests, the marginal rank-cell tests, the joint tests and the tail tests, Bonferroni
inside each; a test fails only when significant AND its effect passes its floor (binned total
variation ``> judge.TVD_FLOOR = 0.01``; for the tail, ``tail.TAIL_RATIO_FLOOR``).
"""
from __future__ import annotations

import functools

import numpy as np

JOINT_BINS = 4


@functools.lru_cache(maxsize=16)
def target_table(recipe):
    """Each ``p_{i,j}`` (level ``i (n+1) + j``) normalised and sorted by decreasing probability,
    each token's rank, each rank cell's mass, and the CDF in vocabulary order (continuations)."""
    from equiv.ops.verify.laws import sorted_table

    P, n, V = recipe.n_problems, recipe.n, recipe.vocab
    laws = recipe.make_problems().target.astype(np.float64).reshape(P * (n + 1), V)
    laws = laws / laws.sum(1, keepdims=True)
    sorted_laws, rank_of, cell_mass = sorted_table(laws)
    return sorted_laws, rank_of, cell_mass, np.cumsum(laws, axis=1)


def _emitted(recipe, outputs):
    from equiv.ops.verify.laws import _stops

    stop = _stops(recipe, outputs)
    return stop, np.arange(recipe.n + 1)[None, None, :] <= stop[..., None]


def support_problem(recipe, outputs) -> tuple | None:
    """``(call, row, message)`` of the first emitted token of target probability 0, else None."""
    _, emitted = _emitted(recipe, outputs)
    pr = recipe.make_problems()
    prob = np.broadcast_to(recipe.rows()[None, :, None], outputs.shape)
    pos = np.broadcast_to(np.arange(recipe.n + 1), outputs.shape)
    p_tok = pr.target[prob, pos, np.where(emitted, outputs, 0)]
    bad = emitted & ~(p_tok > 0)
    if bad.any():
        c, b, j = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {j} emitted token {outputs[c, b, j]} whose target probability is 0: "
                      f"no lossless verifier emits it")
    return None


def greedy_problem(recipe, outputs) -> tuple | None:
    """One-hot targets: ``(call, row, message)`` of an emitted token that is not the argmax."""
    _, emitted = _emitted(recipe, outputs)
    argmax = recipe.make_problems().target.argmax(-1)[recipe.rows()]           # [B, n+1]
    bad = emitted & (outputs != argmax[None])
    if bad.any():
        c, b, j = (int(v[0]) for v in np.nonzero(bad))
        return c, b, (f"position {j} emitted {outputs[c, b, j]} where the one-hot target allows only "
                      f"{argmax[b, j]} (temperature 0: greedy decoding's token)")
    return None


def continued(recipe, outputs, rng) -> tuple:
    """``(sequences [C*B, n+1], levels [C*B, n+1])``: each row continued past its last emitted
    token with draws from the target (module docstring)."""
    n = recipe.n
    stop, emitted = _emitted(recipe, outputs)
    _, _, _, cdf = target_table(recipe)
    seq = outputs.copy()
    level = np.broadcast_to(recipe.rows()[None, :, None] * (n + 1) + np.arange(n + 1), outputs.shape)
    need = ~emitted
    for lv in np.unique(level[need]):
        at = need & (level == lv)
        u = rng.random(int(at.sum())) * cdf[lv, -1]
        last = int(np.flatnonzero(np.diff(cdf[lv], prepend=0.0) > 0)[-1])
        seq[at] = np.minimum(np.searchsorted(cdf[lv], u, side="right"), last)
    return seq.reshape(-1, n + 1), np.ascontiguousarray(level).reshape(-1, n + 1)


def lossless_values(recipe, outputs, rng) -> dict:
    """The continued rows mapped to what the tests need (PITs, groups, rank cells, joint cells,
    tail repeats)."""
    from equiv.mtp.statistics import pit
    from equiv.ops.verify.laws import RANK_EDGES
    from equiv.ops.verify.tail import level_repeats

    sorted_laws, rank_of, cell_mass, _ = target_table(recipe)
    seq, level = continued(recipe, outputs, rng)
    rank = rank_of[level, seq]
    u = pit(sorted_laws, level.ravel(), rank.ravel(), rng).reshape(seq.shape)
    pos = np.broadcast_to(np.arange(recipe.n + 1), seq.shape)
    groups = np.char.add(f"{recipe.family}:position", pos.astype(str))
    k = np.minimum((u * JOINT_BINS).astype(np.int64), JOINT_BINS - 1)
    joint = {f"{recipe.family}:positions {j},{j + 1}": k[:, j] * JOINT_BINS + k[:, j + 1]
             for j in range(recipe.n)}
    return {"u": u.ravel(), "groups": groups.ravel(), "joint": joint,
            "cells": (np.searchsorted(np.array(RANK_EDGES), rank.ravel(), side="right") - 1),
            "expected": cell_mass[level.ravel()],
            "tail": level_repeats(sorted_laws, level.ravel(), rank.ravel())}


def joint_tests(joint: dict, alpha: float, floor: float) -> list:
    """Chi-square of each neighbouring pair's binned PITs against the uniform square, pooled and
    per group, Bonferroni over the tests."""
    from equiv.ops.verify.laws import _cells_test

    cells = JOINT_BINS * JOINT_BINS
    pooled = {"pooled": np.concatenate(list(joint.values()))} if joint else {}
    raw = []
    for label, got in {**pooled, **joint}.items():
        if got.size < 5 * cells:
            continue
        res = _cells_test(np.bincount(got, minlength=cells).astype(float), np.full(cells, got.size / cells))
        if res is not None:
            raw.append((label, int(got.size)) + res)
    level = alpha / max(len(raw), 1)
    return [{"group": g, "n": n, "chi2": c, "df": df, "p_value": p, "tvd": t, "level": level,
             "failed": p < level and t > floor} for g, n, c, df, p, t in raw]
