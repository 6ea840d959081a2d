"""The tree verifier's independence cases: rows of one tree and targets, called twice.

Plan. A tree verifier's marginal law can be exact while rows of one call share uniforms (row
``2k+1`` reading row ``2k``'s coins: a wrong stride) or while successive calls replay one random
state (a private generator of fixed seed, a captured graph): two identical requests in one batch,
or one request sent twice, then get identical texts. ``independence_cases`` adds, for each
construction judged, one recipe whose ``B = 1000`` rows all copy one tree and its targets
(``problems=1``, the small ``flat`` family at V = 4, depth 2, where two independent texts match
often, so shared coins move the match rate far), called with two generator seeds (and the replay).
The judge (judge.py, check ``independence``) runs the chain verifier's exact swap sign tests on
them (equiv/ops/verify/independence.py: adjacent rows, rows half a batch apart, one row across the
two calls) and names the cause: ``shared randomness between rows`` / ``between calls``. A verifier
of one-hot targets (``targets = "onehot"``) draws nothing, so it gets none. Calibration:
docs/verify_tree.md ("Independence"), scripts/verify_tree_independence_calibration.py.
"""
from __future__ import annotations

from equiv.ops.verify_tree.judge import Case
from equiv.ops.verify_tree.plans import constructions_of
from equiv.ops.verify_tree.recipes import TreeRecipe

INDEPENDENCE_RECIPE = "flat:batch=1000,vocab=4,nodes=6,depth=2,fanout=2,problems=1"
CALLS = 2


def independence_cases(drafts: str = "topk", seed: int = 0, targets: str = "any") -> list:
    """One case per construction of ``drafts`` (module docstring); none for one-hot targets."""
    if targets == "onehot":
        return []
    base = TreeRecipe.parse(INDEPENDENCE_RECIPE)
    return [Case(base.with_(drafts=c, seed=seed), CALLS, seed) for c in constructions_of(drafts)]
