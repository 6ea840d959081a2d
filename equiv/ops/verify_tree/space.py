"""The input space of the tree verifier, by named dimension: its classes and what a run judged.

Plan. Each data dimension of a tree verifier's inputs (docs/draft_topk.md, the input space)
has classes (``UNIVERSE``): the vocabulary (sizes by range, with the real sizes, primes and
powers of two; the ``(32768, 65536]`` class is GPT-2's, NeoX's, Yi's and Falcon's), the tree's
depth, fan-out and node count (past what engines configure: depth 12+, fan-out 16+, 64+ nodes),
its shape (full rows, ``ragged``: absent nodes at the end, ``holes``: absent nodes anywhere,
every row the root alone, EAGLE-2's tree), ``draft_probs`` (given, or None), the construction,
the family and the batch. ``reach(statistical, exact)`` is where each class was judged
(``equiv.verdict.judged``): by a statistical case of the plan, by exact checks only (the contract
plan's cases, run by the property suite: contract, support, greedy), or not at all;
``table_lines`` prints it (the gate's coverage; ``calling`` lines beside it are the run layer's).
"""
from __future__ import annotations

from equiv.ops.verify import space as chain_space
from equiv.ops.verify_tree.recipes import CONSTRUCTIONS, FAMILIES, extent
from equiv.run.calling import SPLIT_FROM
from equiv.verdict import judged, judged_lines

VOCAB_CLASSES = ("2-1024", "1025-32768", "(32768, 65536]", "65537-100000", "past 100000", "past 2**17", "real",
                 "prime", "power of two")
UNIVERSE = {
    "vocab": VOCAB_CLASSES,
    "depth": ("0", "1", "2-4", "5-8", "9-11", "12-16", "past 16"),
    "fanout": ("1", "2-4", "5-10", "11-16", "past 16"),
    "nodes": ("1", "2-16", "17-63", "64-256", "past 256"),
    "shape": ("full rows", "ragged (absent at the end)", "holes (absent anywhere)", "every row the root alone",
              "EAGLE-2 tree"),
    "draft_probs": ("given", "None"),
    "construction": CONSTRUCTIONS,
    "family": FAMILIES,
    "batch": ("1", "2-63", "64-1024", "past 1024", "multiple of 32", "rows after the last multiple of 32"),
}


def _span(v: int, edges) -> str:
    """The class of ``v`` among ``edges`` ``((high, name), ...)`` (the first ``high >= v``)."""
    return next(name for high, name in edges if v <= high)


def vocab_classes(v: int) -> tuple:
    out = [_span(v, ((1024, "2-1024"), (32768, "1025-32768"), (65536, "(32768, 65536]"),
                     (100000, "65537-100000"), (float("inf"), "past 100000")))]
    if v > 2 ** 17:
        out.append("past 2**17")
    if v in chain_space.REAL_VOCABS or v in (50277, 50432, 64000, 65024):
        out.append("real")
    if chain_space.is_prime(v):
        out.append("prime")
    if v & (v - 1) == 0:
        out.append("power of two")
    return tuple(out)


def classes(recipe) -> dict:
    """Every class ``recipe`` is in, per dimension (depth and fan-out: the deepest node and the
    widest node its trees reach, not the bounds the recipe allows)."""
    r = recipe
    depth, fanout = extent(r)
    shape = ["EAGLE-2 tree" if r.eagle else "full rows"]
    if r.holes and not r.eagle:
        shape = ["holes (absent anywhere)"]
    elif r.ragged and not r.eagle:
        shape = ["ragged (absent at the end)"]
    if depth == 0:
        shape.append("every row the root alone")
    return {"vocab": vocab_classes(r.vocab),
            "depth": (_span(depth, ((0, "0"), (1, "1"), (4, "2-4"), (8, "5-8"), (11, "9-11"), (16, "12-16"),
                                      (float("inf"), "past 16"))),),
            "fanout": (_span(fanout, ((1, "1"), (4, "2-4"), (10, "5-10"), (16, "11-16"),
                                        (float("inf"), "past 16"))),),
            "nodes": (_span(r.nodes, ((1, "1"), (16, "2-16"), (63, "17-63"), (256, "64-256"),
                                      (float("inf"), "past 256"))),),
            "shape": tuple(shape), "draft_probs": ("given" if r.probs else "None",),
            "construction": (r.drafts,), "family": (r.family,),
            "batch": (_span(r.batch, ((1, "1"), (63, "2-63"), (1024, "64-1024"), (float("inf"), "past 1024"))),
                      "multiple of 32" if r.batch % 32 == 0 else "rows after the last multiple of 32")}


def reach(statistical, exact) -> dict:
    """``{"judged": {dimension: {where: classes}}, "vocab values": .., "largest input": ..}`` of
    the statistical cases and the exact-only ones (module docstring)."""
    seen: tuple = ({}, {})
    for k, cases in enumerate((statistical, exact)):
        for c in cases:
            for dim, got in classes(c.recipe).items():
                seen[k].setdefault(dim, set()).update(got)
            if c.recipe.batch >= SPLIT_FROM:     # its last rows go as calls of 1 and 2-4 rows (calls.py):
                seen[1].setdefault("batch", set()).update(("1", "2-63"))   # exact checks, no power of their own
    every = list(statistical) + list(exact)
    out: dict = {"vocab values": sorted({c.recipe.vocab for c in every})}
    if every:
        big = max(every, key=lambda c: c.recipe.batch * c.recipe.nodes * c.recipe.vocab)
        r = big.recipe
        out["largest input"] = (f"target_probs [{r.batch}, {r.nodes}, {r.vocab}] "
                                f"({r.batch * r.nodes * r.vocab / 2 ** 20:.1f} M elements)")
    out["judged"] = judged(seen[0], seen[1], UNIVERSE)
    return out


def table_lines(coverage: dict) -> list:
    """The coverage table: plain entries as they are, ``judged`` one line a dimension."""
    table = coverage.get("judged", {})
    width = max([len(k) for k in coverage] + [len(k) for k in table], default=0) + 2
    return [f"{dim:<{width}}{v if isinstance(v, str) else ', '.join(map(str, v)) or 'none'}"
            for dim, v in coverage.items() if dim != "judged"] + judged_lines(table, width)
