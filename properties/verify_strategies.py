"""Hypothesis strategies over the verifier's input recipes (``equiv.ops.verify.VerifyRecipe``).

Plan. ``verify_recipes()`` draws family first, then V, n, batch, problems, draft kind, noise,
padding and seed; every choice shrinks toward the simplest case (``realistic``, V = 2, n = 1, one
row, one problem, a probability-vector draft, noise 1, no padding, seed 0), so a failure at
V = 129280 and n = 8 ends as the smallest recipe that still fails. V comes from the tile edges up
to the real vocabulary 129280; the batch is capped so one example holds at most ``MAX_ELEMENTS``
floats (B * (2n + 1) * V).
"""
from __future__ import annotations

from hypothesis import strategies as st

from equiv.ops.verify.recipes import DRAFTS, FAMILIES, VerifyRecipe

VOCABS = (2, 3, 33, 1025, 4097, 32000, 129280, 1)
NOISES = (1.0, 0.0, 0.3, 3.0)
PADS = (0, 1, 7)
MAX_ELEMENTS = 2 ** 23
_TWO_TOKENS = ("disjoint", "tiny_q")


@st.composite
def verify_recipes(draw, families=FAMILIES, *, max_n: int = 8, max_batch: int = 16,
                   max_elements: int = MAX_ELEMENTS):
    family = draw(st.sampled_from(tuple(families)))
    vocab = draw(st.sampled_from([v for v in VOCABS if v >= 2 or family not in _TWO_TOKENS]))
    n = draw(st.integers(1, max_n))
    batch = draw(st.integers(1, max(1, min(max_batch, max_elements // (vocab * (2 * n + 1))))))
    return VerifyRecipe(family=family, vocab=vocab, n=n, batch=batch,
                        problems=draw(st.integers(1, min(4, batch))),
                        draft=draw(st.sampled_from(DRAFTS)),
                        noise=draw(st.sampled_from(NOISES)),
                        ties=draw(st.integers(2, 5)) if family == "ties" else 2,
                        pad=draw(st.sampled_from(PADS)),
                        seed=draw(st.integers(0, 2 ** 16)))
