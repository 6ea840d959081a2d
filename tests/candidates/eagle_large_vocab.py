"""Tree verifiers wrong only where engines run: past V = 100000, at depth >= 2 (issue 43, part 3).

Plan. Each is ``target_only`` of equiv/ops/verify_tree/paths.py with one defect in a
large-vocabulary code path, live only when ``V > LARGE_V`` and the walk is at depth ``>= 2``:

- ``stale_mask``: the residual after the children were rejected keeps them (the mask of tried
  children is not applied): the emitted law at such a node moves by ``(1 - p(C)) p(C)`` in total
  variation, ``C`` the node's children (~0.05-0.11 at the nodes the gate's EAGLE slot reaches);
- ``leaky_mask``: the same on a ``LEAK`` share of the rows only (a mask read stale now and then):
  ``LEAK (1 - p(C)) p(C)``, ~0.05 at those nodes (``node_tv`` gives the exact figure of a recipe).

Everywhere else each is the built-in, so a gate sees them only if an EAGLE-shaped tree at a real
vocabulary past 100000 is judged for its law, with enough texts through its deeper nodes.
"""
import numpy as np
import torch

from equiv.ops.verify_tree.paths import _sample, _walk, _zero, target_only_rule

LARGE_V = 100000
LEAK = 0.6


def _masked_deep(share):
    def verifier(parents, draft_token_ids, draft_probs, target_probs, generator):
        V = target_probs.shape[-1]

        def draw(s, kid_tok, valid, stop):
            if V > LARGE_V and s["depth"] >= 2:
                stale = torch.rand(valid.shape[0], generator=generator, device=valid.device) < share
                valid = valid & ~stale[:, None]
            return _sample(_zero(s["p"], kid_tok, valid), generator)
        return _walk(parents, draft_token_ids, None, target_probs, generator, target_only_rule(generator), draw)
    verifier.drafts = "topk"
    return verifier


stale_mask = _masked_deep(1.0)
leaky_mask = _masked_deep(LEAK)


def node_tv(recipe, share: float = 1.0) -> tuple:
    """``(tv, visits)``: the total variation of the emitted law at the nodes of depth >= 2 with
    children, against the target's, averaged over the texts that reach them (weights: the target
    probability of the node's path), and how many such nodes a text passes on average, for a
    verifier whose mask is stale on a ``share`` of the rows (module docstring)."""
    t, m = recipe.trees(), recipe.model()
    B, N = t.parents.shape
    rows = np.arange(B)
    reach = np.zeros((B, N))
    reach[:, 0] = 1.0
    for i in range(1, N):
        par = np.maximum(t.parents[:, i], 0)
        reach[:, i] = np.where(t.parents[:, i] >= 0,
                               reach[rows, par] * m.target[t.index[rows, par], t.tokens[:, i]], 0.0)
    kids = t.children
    tv, w = [], []
    for b, i in zip(*np.nonzero((t.depth >= 2) & (kids[..., 0] >= 0))):
        c = kids[b, i][kids[b, i] >= 0]
        pc = m.target[t.index[b, i], t.tokens[b, c]].sum()
        tv.append(share * (1.0 - pc) * pc)
        w.append(reach[b, i])
    tv, w = np.array(tv), np.array(w)
    return float((tv * w).sum() / w.sum()), float(w.sum() / B)
