"""What the tree verifier's gate runs: the contract plan and the statistical plan, per construction.

Plan. ``contract_cases(constructions)``: small batches that reach the edges of the contract, one
call each (and its replay), exact checks only: a root alone (``nodes=1``), chains (fan-out 1,
depth 8), a wide level (depth 1, fan-out 8), 64 nodes at depth 8, past every old ceiling (300
nodes reaching depth 18; 80 children of one node), every row the root alone with absent nodes
after it, absent nodes in the middle (``holes``), ``draft_probs = None``, an EAGLE-2 tree at
V = 152064, ``B = 4096``, V from 2 to 262144 (50257 and 65024 in (32768, 65536]), ragged batches,
every family. ``for_construction``: EAGLE trees and ``probs=0`` are ``topk``'s; an ``iid`` /
``wor`` declaration gets random trees with ``q`` in their place. ``statistical_cases(budget, drafts, seed)``:
**drawn per seed from named dimensions**, not listed (as the chain verifier's plan,
equiv/ops/verify/space.py): each slot of ``_slots`` names what it is for (``Case.purpose``,
``SLOTS``) and draws its recipe with its own generator ``[seed, _PLAN_SALT, slot]``:
``deep exact`` (flat, V 2-3, depth 5-8: the whole text law enumerable), ``peaked`` (top
probability in [0.9, 1), children's mass in (0, 0.05)), ``wide`` (fan-out 5-16), ``deep`` (depth
4-16, 8-70 nodes at V 100-600, ragged truncated or realistic with absent nodes anywhere),
``small batches`` (1-63 rows, 8-64 calls, ``draft_probs = None`` on half the seeds), ``wide
vocab`` (V past 100000, ~4500 rows over several calls: ``ROWS_PAST_100K``), ``far`` (flat_far,
many rejections), ``greedy`` (one-hot targets), ``eagle`` (the engines' operating point: EAGLE-2
trees of top-k 4-10, depth 5-8, 16-32 nodes, at a real vocabulary past 100000 --
``EAGLE_VOCABS`` --, ``sparse`` laws, ``draft_probs = None``; ``EAGLE_ROWS`` rows: 400 on a CPU,
6000 on a GPU), ``mid vocab`` (V in (32768, 65536]: GPT-2, NeoX, Yi, Falcon or a prime; small
trees with absent nodes in the middle), ``roots`` (every row the root alone, 2-8 nodes); ``full``
doubles the rows and adds ``tail`` (V ~ 32000-50257, ~4000 rows: the tail test). Batches are never multiples of 32. For ``iid``/``wor``
every row drafts its own tree, so a call averages over drafts as losslessness asks. Each
construction of the declaration gets every slot (``any``: all three). docs/verify_tree.md has
the table.
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify import space
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
    "realistic:batch=3,vocab=2048,nodes=300,depth=24,fanout=3",           # past the old ceilings: 300 nodes,
    "realistic:batch=3,vocab=2048,nodes=81,depth=1,fanout=80",            # depth 18 reached, 80 children
    "flat:batch=8,vocab=4,nodes=8,depth=0,fanout=1",                       # every row the root alone
    "realistic:batch=4,vocab=50257,nodes=8,depth=3,fanout=3,holes=1,probs=0",
    "truncated:batch=16,vocab=65024,nodes=12,depth=4,fanout=4,holes=1",
    "sparse:batch=2,vocab=152064,nodes=40,depth=8,fanout=10,eagle=1,probs=0",
)


def for_construction(r: TreeRecipe, c: str) -> TreeRecipe:
    """``r`` drafted by ``c``: EAGLE trees and ``draft_probs = None`` are ``topk``'s (an ``iid`` /
    ``wor`` tree is drawn from ``q``, which its verifier reads), so other constructions get
    random trees with ``q``; ``wor`` siblings are distinct, so at most ``V`` of them."""
    if c == "topk":
        return r
    return r.with_(eagle=0, probs=1, drafts=c, fanout=min(r.fanout, r.vocab) if c == "wor" else r.fanout)


def contract_cases(drafts: str = "topk", seed: int = 0) -> list:
    out = []
    for c in constructions_of(drafts):
        for text in _CONTRACT:
            # a generator seed each, so each case gets its own calling classes (calls.calling_of)
            out.append(Case(for_construction(TreeRecipe.parse(text).with_(seed=seed), c), 1, seed + len(out)))
    return out


_PLAN_SALT = 0x7EE5
MAX_FANOUT = 16                                   # the wide slot's fan-out: 5..16
MAX_DEPTH = 16                                    # the deep slot's depth: 4..16
DEEP_NODE_ROWS = 48000                            # the deep slot's batch x nodes at most (V 100-600)
ROWS_PAST_100K = 4500                             # the wide vocab slot's rows, over calls of 65-127
PAST_100K = tuple(v for v in space.REAL_VOCABS if v > 100000)
# (vocab, depth) whose whole text law is enumerable: V ** (depth + 1) <= EXHAUSTIVE_MAX_CELLS
_EXACT_DEEP = ((3, 5), (3, 6), (2, 6), (2, 7), (2, 8))
# (32768, 65536]: GPT-2, GPT-NeoX / Pythia (tokenizer, embedding rows), Yi, Falcon
MID_VOCABS = (50257, 50277, 50432, 64000, 65024)
# the EAGLE slot: engines' vocabularies past 100000 (Gemma's 256000 / 262144 cost twice as much a row)
EAGLE_VOCABS = tuple(v for v in PAST_100K if v <= 152064)
# the EAGLE slot's rows (calls x rows per call) and rows per call by device: a CPU affords a few
# hundred at V ~ 150000 (docs/verify_tree.md: the power this buys)
EAGLE_ROWS = {"cpu": 400, "cuda": 6000}
EAGLE_BATCH = {"cpu": (13, 20), "cuda": (65, 71)}
SLOTS = ("deep exact", "peaked", "wide", "deep", "small batches", "wide vocab", "far", "greedy", "eagle",
         "mid vocab", "roots")                    # full: + "tail"


def _draw_batch(rng, low: int, high: int) -> int:
    """A batch in ``[low, high]`` with rows past its last multiple of 32 (and so of 64)."""
    b = int(rng.integers(low, high + 1))
    return b + int(rng.integers(1, 32)) if b % 32 == 0 else b


def _cap(b: int) -> int:
    """``b``, or one row less when it is a multiple of 32 (batches keep rows past their last block)."""
    return b - 1 if b % 32 == 0 else b


def _slots(rng_of, scale: int, device: str = "cpu") -> list:
    """``(purpose, recipe fields, calls)`` of each statistical slot, each drawn from the named
    dimensions with its own generator ``rng_of(i)`` (module docstring)."""
    out = []
    r = rng_of(0)   # deep trees whose whole text law is enumerable: every position, exactly
    v, d = _EXACT_DEEP[int(r.integers(len(_EXACT_DEEP)))]
    out.append(("deep exact", dict(family="flat", vocab=v, depth=d, fanout=2, nodes=int(r.integers(d + 2, 2 * d + 2)),
                                   batch=_draw_batch(r, 16000, 20000) * scale), 1))
    r = rng_of(1)   # top probability in [0.9, 1); children's mass in (0, 0.05)
    v = int(r.integers(6, 9))          # topk trees of one child are a function of the root: V of them
    d = int(r.integers(2, 4))
    out.append(("peaked", dict(family="peaked", vocab=v, depth=d, fanout=1,     # one child: its mass is the law's
                               nodes=int(r.integers(d + 1, 2 * d + 2)), batch=_draw_batch(r, 16000, 20000) * scale), 1))
    r = rng_of(2)   # wide levels: fan-out 5..8
    f = int(r.integers(5, MAX_FANOUT + 1))
    out.append(("wide", dict(family="realistic", vocab=space.draw_vocab(r, 100, 600), depth=1, fanout=f,
                             nodes=f + 1, batch=min(_draw_batch(r, 3000, 4000), _cap(36000 // (f + 1))) * scale), 1))
    r = rng_of(3)   # deep trees at a realistic vocabulary: ragged truncated ones, or realistic with holes
    d = int(r.integers(4, MAX_DEPTH + 1))
    fam = "truncated" if r.random() < 0.5 else "realistic"
    n = int(r.integers(2 * d, max(4 * d, 64) + 7))  # 8 to 70 nodes: rows reach most of the depth
    out.append(("deep", dict(family=fam, vocab=space.draw_vocab(r, 100, 600), depth=d, fanout=int(r.integers(2, 4)),
                             nodes=n, ragged=int(fam == "truncated"), holes=int(fam == "realistic"),
                             batch=min(_draw_batch(r, 3000, 4000), _draw_batch(r, DEEP_NODE_ROWS // n - 31,
                                                                                DEEP_NODE_ROWS // n)) * scale), 1))
    r = rng_of(4)   # small batches, rows past the last block of 32: many calls
    b = int(r.integers(1, 64))
    b += int(r.integers(1, 16)) if b % 32 == 0 else 0
    out.append(("small batches", dict(family="realistic", vocab=space.draw_vocab(r, 100, 600),
                                      depth=int(r.integers(1, 4)), fanout=int(r.integers(1, 4)), nodes=int(r.integers(2, 9)),
                                      batch=b, probs=int(r.random() < 0.5)), max(8, min(64, 2000 // b)) * scale))
    r = rng_of(5)   # a vocabulary past 100000 with enough rows to see the residual's tail
    v = int(r.choice(PAST_100K)) if r.random() < 0.75 else space.draw_prime(r, 100001, 262144)
    b = _draw_batch(r, 65, 127)
    out.append(("wide vocab", dict(family="realistic", vocab=v, depth=1, fanout=1, nodes=2, batch=b),   # one child:
                max(1, ROWS_PAST_100K // b) * scale))               # most rows rejected, rows are cheap
    r = rng_of(6)   # drafts far from the target: many rejections, the residual's law exhaustively
    out.append(("far", dict(family="flat_far", vocab=int(r.integers(3, 6)), depth=2, fanout=int(r.integers(1, 4)),
                            nodes=int(r.integers(3, 8)), batch=_draw_batch(r, 8000, 10000) * scale), 1))
    r = rng_of(7)   # temperature 0: greedy decoding's text, exactly
    d = int(r.integers(2, 7))
    out.append(("greedy", dict(family="onehot_target", vocab=space.draw_vocab(r, 100, 1100), depth=d,
                               fanout=int(r.integers(2, 5)), nodes=int(r.integers(d + 1, 17)),
                               batch=_draw_batch(r, 700, 1100)), 1))
    r = rng_of(9)   # the engines' operating point: EAGLE trees at a real vocabulary past 100000, sparse laws
    b = int(r.integers(EAGLE_BATCH[device][0], EAGLE_BATCH[device][1] + 1))
    out.append(("eagle", dict(family="sparse", vocab=int(r.choice(EAGLE_VOCABS)), depth=int(r.integers(5, 9)),
                              fanout=int(r.integers(4, 11)), nodes=int(r.integers(16, 33)), eagle=1, probs=0,
                              batch=b), max(1, EAGLE_ROWS[device] // b) * scale))
    r = rng_of(10)  # a vocabulary in (32768, 65536], small trees with absent nodes in the middle
    v = int(r.choice(MID_VOCABS)) if r.random() < 0.75 else space.draw_prime(r, 32769, 65536)
    b = _draw_batch(r, 100, 160)
    out.append(("mid vocab", dict(family="realistic", vocab=v, depth=int(r.integers(1, 3)), fanout=int(r.integers(1, 4)),
                                  nodes=int(r.integers(3, 6)), holes=1, batch=b), 2 * scale))
    r = rng_of(11)  # every row the root alone (absent nodes after it): the text is one draw of the root's law
    out.append(("roots", dict(family="realistic", vocab=space.draw_vocab(r, 100, 1100), depth=0, fanout=1,
                              nodes=int(r.integers(2, 9)), batch=_draw_batch(r, 1500, 2000) * scale), 1))
    if scale > 1:   # full only: a residual's tail squeezed onto few tokens needs ~4000 rows at V ~ 50000 (tail test)
        r = rng_of(8)
        out.append(("tail", dict(family="realistic", vocab=int(r.choice((32000, 32064, 32768, 50257))), depth=1,
                                 fanout=1, nodes=2, batch=_draw_batch(r, 2000, 2100)), 2))
    return out


def same_inputs_as(r: TreeRecipe) -> TreeRecipe:
    """The recipe of another construction whose calls are ``r``'s, bit for bit (the same inputs
    built, the same generators): trees of the root alone have no child to draft, so every
    construction's are ``topk``'s; a node's only child is drawn from ``q`` alike with or without
    replacement, so ``wor`` trees of fan-out 1 are ``iid``'s. ``r`` itself otherwise. A verifier
    that declares ``any`` is not called twice for the same inputs (tests/ops/verify_tree:
    the recipes build equal tensors)."""
    if r.depth == 0:
        return r.with_(drafts="topk")
    if r.fanout == 1 and r.drafts == "wor":
        return r.with_(drafts="iid")
    return r


def statistical_cases(budget: str = "quick", drafts: str = "topk", seed: int = 0, targets: str = "any",
                      device: str = "cpu") -> list:
    """The statistical cases of a budget, drawn per ``seed`` from the named dimensions (module
    docstring); on a CUDA ``device`` the EAGLE slot holds ``EAGLE_ROWS["cuda"]`` rows."""
    scale = 1 if budget == "quick" else 2
    device = "cuda" if str(device).startswith("cuda") else "cpu"

    def rng_of(i):
        return np.random.default_rng([seed, _PLAN_SALT, i])

    out = []
    for i, (purpose, fields, calls) in enumerate(_slots(rng_of, scale, device)):
        made = set()
        for c in constructions_of(drafts):
            r = for_construction(TreeRecipe(seed=seed, **fields), c)
            if targets == "onehot" and r.family != "onehot_target":
                r = r.with_(family="onehot_target")
            if same_inputs_as(r) in made:
                continue        # an earlier construction's cases of this slot: the same calls again
            made.add(r)
            if c in ("iid", "wor") and calls > 1:
                # drawn trees: the law holds on average over the drafts, so every call gets trees
                # of its own (a part of its own, over the same bank: recipes.py); one recipe called
                # again would judge the law given one draw of trees, which a lossless iid / wor
                # verifier need not keep
                out += [Case(r.with_(part=k) if k else r, 1, 1000 * seed + 100 * i + k, statistical=True,
                             purpose=purpose, replay=k in (0, calls - 1)) for k in range(calls)]
                continue
            out.append(Case(r, calls, 1000 * seed + 100 * i, statistical=True, purpose=purpose))
    return out
