"""What the tree verifier's gate runs: the contract plan and the statistical plan, per construction.

Plan. ``contract_cases(constructions)``: small batches that reach the edges of the contract, one
call each (and its replay), exact checks only: a root alone (``nodes=1``), chains (fan-out 1,
depth 8), a wide level (depth 1, fan-out 8), 64 nodes at depth 8, ``B = 4096``, V from 2 to
262144, ragged batches (absent nodes), every family. ``statistical_cases(budget, constructions)``:
one call (and its replay) of large batches per recipe -- for ``iid``/``wor`` every row drafts its
own tree, so a call averages over drafts as losslessness asks:
- ``flat`` at V = 4 and depth 2: the whole text's law is compared cell by cell (exhaustive);
  ``flat_far`` the same with a draft far from the target (many rejections);
- ``realistic`` and ``truncated`` (ragged) at V = 256: PIT, score and joint tests, many rows;
- ``realistic`` at V = 129280 (few rows: the inputs are ``B x N x V`` floats);
- ``onehot_target``: greedy decoding's text, exactly.
``full`` doubles the rows and adds seeds. Each construction of the declaration gets its cases
(``any``: all three).
"""
from __future__ import annotations

from equiv.ops.verify_tree.judge import Case
from equiv.ops.verify_tree.recipes import CONSTRUCTIONS, TreeRecipe

BUDGETS = ("quick", "full")


def constructions_of(drafts: str) -> tuple:
    return CONSTRUCTIONS if drafts == "any" else (drafts,)


_CONTRACT = (
    "realistic:batch=4,vocab=1024,nodes=1,depth=0,fanout=1",
    "realistic:batch=4,vocab=33,nodes=9,depth=8,fanout=1",
    "realistic:batch=4,vocab=1025,nodes=9,depth=1,fanout=8",
    "realistic:batch=4,vocab=1025,nodes=64,depth=8,fanout=8",
    "truncated:batch=4096,vocab=33,nodes=8,depth=3,fanout=3,ragged=1",
    "realistic:batch=2,vocab=262144,nodes=8,depth=3,fanout=3",
    "flat:batch=64,vocab=2,nodes=6,depth=3,fanout=2,ragged=1",
    "truncated:batch=16,vocab=32000,nodes=12,depth=4,fanout=4,ragged=1",
    "onehot_target:batch=64,vocab=1024,nodes=12,depth=4,fanout=3",
    "onehot_target:batch=8,vocab=129280,nodes=6,depth=2,fanout=3",
)


def contract_cases(drafts: str = "topk", seed: int = 0) -> list:
    out = []
    for c in constructions_of(drafts):
        for text in _CONTRACT:
            r = TreeRecipe.parse(text).with_(seed=seed, drafts=c)
            if c == "wor" and r.fanout > r.vocab:
                continue
            out.append(Case(r, 1, seed))
    return out


_STATISTICAL = (
    ("flat:vocab=4,nodes=6,depth=2,fanout=2", 20000),
    ("flat_far:vocab=4,nodes=6,depth=2,fanout=3", 10000),
    ("realistic:vocab=256,nodes=10,depth=3,fanout=3", 4000),
    ("truncated:vocab=256,nodes=10,depth=3,fanout=4,ragged=1", 4000),
    ("realistic:vocab=129280,nodes=6,depth=2,fanout=3", 8),
    ("onehot_target:vocab=512,nodes=8,depth=3,fanout=3", 1024),
)


def statistical_cases(budget: str = "quick", drafts: str = "topk", seed: int = 0, targets: str = "any") -> list:
    scale, seeds = (1, 1) if budget == "quick" else (2, 3)
    out = []
    for c in constructions_of(drafts):
        for text, batch in _STATISTICAL:
            r = TreeRecipe.parse(text).with_(drafts=c, batch=batch * scale)
            if targets == "onehot" and r.family != "onehot_target":
                r = r.with_(family="onehot_target")
            for s in range(seeds):
                out.append(Case(r.with_(seed=seed + s), 1, seed + s, statistical=True))
    return out
