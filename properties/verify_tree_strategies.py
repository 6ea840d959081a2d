"""Hypothesis strategies over the tree verifier's input recipes (``equiv.ops.verify_tree``).

Plan. ``tree_recipes(constructions)`` draws family, V, the tree's size, depth and fan-out, the
batch, raggedness, absent nodes anywhere (``holes``), the construction, ``draft_probs = None``
and EAGLE-2 trees (``topk`` only) and the seed; every choice shrinks toward the simplest case
(``realistic``, V = 2, a root alone, one row, ``topk``), so a failure ends as the smallest tree
that still fails. No ceilings at engines' settings: depth to ``MAX_DEPTH``, fan-out to
``MAX_FANOUT``, up to 96 nodes; V runs from 2 over tile edges and (32768, 65536] to 152064; the
nodes and the batch are capped so one example holds about ``MAX_ELEMENTS`` floats (``2 B N V``).
"""
from __future__ import annotations

from hypothesis import strategies as st

from equiv.ops.verify_tree.recipes import CONSTRUCTIONS, FAMILIES, TreeRecipe

VOCABS = (2, 3, 33, 1025, 4097, 32000, 50257, 65024, 129280, 152064)
MAX_ELEMENTS = 2 ** 23
MAX_DEPTH = 20                   # past what engines configure (EAGLE: 5-8; a chain of 16)
MAX_FANOUT = 20                  # past EAGLE's top-k of 10


@st.composite
def tree_recipes(draw, constructions=CONSTRUCTIONS, *, max_nodes: int = 96, max_batch: int = 16,
                 max_elements: int = MAX_ELEMENTS):
    family = draw(st.sampled_from(FAMILIES))
    vocab = draw(st.sampled_from(VOCABS))
    nodes = min(draw(st.integers(1, max_nodes)), max(1, max_elements // (2 * vocab)))
    depth = draw(st.integers(0, MAX_DEPTH))
    drafts = draw(st.sampled_from(tuple(constructions)))
    fanout = draw(st.integers(1, min(MAX_FANOUT, vocab)))
    batch = draw(st.integers(1, max(1, min(max_batch, max_elements // (2 * nodes * vocab)))))
    topk = drafts == "topk"                      # EAGLE trees and draft_probs=None are topk's
    return TreeRecipe(family=family, vocab=vocab, nodes=nodes, depth=depth, fanout=fanout, batch=batch,
                      drafts=drafts, ragged=draw(st.integers(0, 1)), seed=draw(st.integers(0, 2 ** 16)),
                      holes=draw(st.integers(0, 1)), probs=draw(st.sampled_from((1, 0))) if topk else 1,
                      eagle=draw(st.integers(0, 1)) if topk else 0)
