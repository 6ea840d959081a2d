"""The ``children`` score of a fixed (``topk``) tree: is the token after a node one of its children
as often as the target says?

Plan. Under a lossless verifier the token that follows a tree node ``i`` (accepted child or drawn
token, whichever the text holds there) has the target law ``p_i``, so it is one of the node's
child tokens ``C_i`` with probability exactly ``p_i(C_i)``, whatever the verifier does inside.
Per token whose prefix is a tree node with children: ``s = 1[y in C] - p(C)``, variance
``p(C) (1 - p(C))``, range 1 -- the judge's Bernstein score test (equiv/ops/verify/lossless.py)
pools it per family over the positions from ``m`` on (``SUFFIX_SCORES``), so every node of a deep
tree adds to one sum. A residual that forgets the rejected children (or keeps part of them), or
an acceptance that takes a child too often or too rarely, moves it by the total variation at the
node itself, with a range of 1: where the ``residual`` score's range is set by the nodes whose
children hold nearly all the mass (``1 / (1 - p(C))``), this one keeps its power on confident
EAGLE trees at any vocabulary. Only a fixed tree's children are known before the call, so for
``iid`` / ``wor`` trees the score is 0 (the judge's rule for tree-dependent scores).
"""
from __future__ import annotations

import numpy as np

from equiv.memo import memo


@memo(32)                                   # made ahead in another thread (judge.run_judge)
def child_mass(recipe) -> np.ndarray:
    """``[B, N]``: the target mass of each node's distinct child tokens (0: no children)."""
    t, m = recipe.trees(), recipe.model()
    kids = t.children
    B = kids.shape[0]
    tok = np.where(kids >= 0, t.tokens[np.arange(B)[:, None, None], np.maximum(kids, 0)], -1)
    s = np.sort(tok, axis=-1)
    first = (s >= 0) & np.concatenate([np.ones_like(s[..., :1], dtype=bool), s[..., 1:] != s[..., :-1]], -1)
    mass = np.where(first, m.target[t.index[..., None], np.maximum(s, 0)], 0.0).sum(-1)
    return np.minimum(mass, 1.0)


def children_score(recipe, at, is_child, rows, nodes) -> tuple:
    """``(s - mean, var, max s)`` per token (flattened) for tokens whose prefix is tree node
    ``nodes`` (``at``: inside the tree), ``is_child`` whether the token is one of its children."""
    if recipe.drafts != "topk":
        zero = np.zeros(is_child.size)
        return zero, zero, zero
    pc = child_mass(recipe)[rows, np.maximum(nodes, 0)]
    live = at & (pc > 0)
    dev = np.where(live, is_child.astype(np.float64) - pc, 0.0)
    return dev.ravel(), np.where(live, pc * (1.0 - pc), 0.0).ravel(), live.astype(np.float64).ravel()
