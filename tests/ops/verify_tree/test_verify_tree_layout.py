"""``paths.tree_layout`` (the built-in tree verifiers' children, fan-out and depth, one
synchronisation on a GPU) against a plain walk of the parents: absent nodes anywhere, children
before their parents, single roots, empty trees."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from equiv.ops.verify_tree.paths import _zero, tree_layout


def _plain(parents: np.ndarray):
    B, N = parents.shape
    kids = [[[i for i in range(N) if parents[b, i] == j] for j in range(N)] for b in range(B)]
    F = max([len(k) for row in kids for k in row] + [1])
    children = np.full((B, N, F), -1, dtype=np.int64)
    depth = np.zeros((B, N), dtype=np.int64)
    for b in range(B):
        for j in range(N):
            children[b, j, :len(kids[b][j])] = kids[b][j]
            i, d = j, 0
            while parents[b, i] >= 0:
                i, d = parents[b, i], d + 1
            depth[b, j] = d - (parents[b, i] == -2)
    return children, F, int(depth.max()) if N else 0


def _trees(rng, B, N):
    parents = np.full((B, N), -1, dtype=np.int64)
    for b in range(B):
        for i in range(1, N):
            parents[b, i] = rng.integers(0, i) if rng.random() > 0.15 else -2
        if N > 3 and rng.random() < 0.3:          # the same tree, its nodes in another order
            perm = np.concatenate([[0], rng.permutation(np.arange(1, N))])
            inv = np.argsort(perm)
            old = parents[b][perm]
            parents[b] = np.where(old >= 0, inv[np.clip(old, 0, None)], old)
    return parents


@pytest.mark.parametrize("seed", range(6))
def test_the_layout_is_the_plain_walks(seed):
    rng = np.random.default_rng(seed)
    for B, N in ((1, 1), (3, 2), (5, 9), (4, 33), (2, 70)):
        parents = _trees(rng, B, N)
        children, F, D = tree_layout(torch.from_numpy(parents))
        want_children, want_F, want_D = _plain(parents)
        assert (F, D) == (want_F, want_D)
        assert np.array_equal(children.numpy(), want_children)


def test_a_deep_chain_reaches_its_full_depth():
    N = 70                                        # 69 edges: 7 doubling steps, not 6
    parents = np.arange(-1, N - 1, dtype=np.int64)[None]
    _, F, D = tree_layout(torch.from_numpy(parents))
    assert (F, D) == (1, N - 1)


def test_zeroing_keeps_the_zero_when_an_unused_slot_names_the_same_token():
    w = torch.tensor([[0.1, 0.2, 0.3, 0.4]], dtype=torch.float64)
    tok = torch.tensor([[2, 2, 1]])
    mask = torch.tensor([[True, False, False]])    # slot 1 repeats token 2 and is not masked
    assert _zero(w, tok, mask).tolist() == [[0.1, 0.2, 0.0, 0.4]]
    assert w.tolist() == [[0.1, 0.2, 0.3, 0.4]]     # a copy
