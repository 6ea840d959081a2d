"""Hypothesis strategies over the tree verifier's input recipes (``equiv.ops.verify_tree``).

Plan. ``tree_recipes(constructions)`` draws family, V, the tree's size, depth and fan-out, the
batch, raggedness, the construction and the seed; every choice shrinks toward the simplest case
(``realistic``, V = 2, a root alone, one row, ``topk``), so a failure ends as the smallest tree
that still fails. V runs from 2 over tile edges to 129280; the batch is capped so one example
holds at most ``MAX_ELEMENTS`` floats (``2 B N V``).
"""
from __future__ import annotations

from hypothesis import strategies as st

from equiv.ops.verify_tree.recipes import CONSTRUCTIONS, FAMILIES

VOCABS = (2, 3, 33, 1025, 4097, 32000, 129280)
MAX_ELEMENTS = 2 ** 23


@st.composite
def tree_recipes(draw, constructions=CONSTRUCTIONS, *, max_nodes: int = 24, max_batch: int = 16,
                 max_elements: int = MAX_ELEMENTS):
    from equiv.ops.verify_tree.recipes import TreeRecipe

    family = draw(st.sampled_from(FAMILIES))
    vocab = draw(st.sampled_from(VOCABS))
    nodes = draw(st.integers(1, max_nodes))
    depth = draw(st.integers(0, 8))
    drafts = draw(st.sampled_from(tuple(constructions)))
    fanout = draw(st.integers(1, min(8, vocab)))
    batch = draw(st.integers(1, max(1, min(max_batch, max_elements // (2 * nodes * vocab)))))
    return TreeRecipe(family=family, vocab=vocab, nodes=nodes, depth=depth, fanout=fanout, batch=batch,
                      drafts=drafts, ragged=draw(st.integers(0, 1)), seed=draw(st.integers(0, 2 ** 16)))
