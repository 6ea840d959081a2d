"""Input recipes of the tree verifier: a path-dependent target, a draft model and drafted trees.

Plan. A ``TreeRecipe`` (family, seed, batch, vocab, nodes, depth, fanout, drafts, ragged, probs,
problems, holes, eagle, part)
is what ``REPRO:`` lines carry (``realistic:seed=3,batch=64,vocab=129280,nodes=8,depth=3``);
``build(device)`` turns it into the verifier's four inputs ``(parents [B, N] int64,
draft_token_ids [B, N] int64, draft_probs [B, N, V] float32 or None, target_probs [B, N, V]
float32)``.

*The models.* The target and the draft are seeded functions of the whole prefix (the root token
and every token after it): a rolling hash of the prefix picks one of ``BANK`` laws of the
family (``law_index``), the target's and the draft's law of the same index being correlated as a
draft model's are with its target's. So ``target_probs[b, i]`` is the target law after the path
to node ``i``, and the law after node ``i``'s parent or sibling is another law (the same one
with probability ``1 / BANK``): a verifier that reads the wrong row is seen. The judge continues
emitted text past the tree with the same function (``TreeModel.index``), so the law of the
continued text is exact for any prefix.

Families (``FAMILIES``), each bank law from Zipf-like logits ``-s log(rank + 1)`` over a random
permutation (``s`` in [1.05, 1.8]) plus noise; the draft law adds ``N(0, 0.7)`` to the logits:
- ``realistic``: target = softmax of the logits;
- ``truncated``: the target keeps only its top ``m`` tokens (``m`` from 1 to 10: top-k / top-p sampling on a confident step),
  renormalised as engines do after the cut, the draft does not: children land on tokens of
  target probability 0;
- ``onehot_target``: the target is one-hot at its argmax (temperature 0);
- ``flat``: Dirichlet(1) targets and drafts half the target, half another Dirichlet (small V);
- ``flat_far``: Dirichlet(1) targets and independent Dirichlet(0.5) drafts: many rejections, so a
  rule that assumes another construction (SpecInfer on ``wor`` trees) moves the text's law far;
- ``peaked``: a confident step: the target's top token has probability in [0.9, 1) (the rest
  Dirichlet(1)). On even bank laws the draft is more confident still (``q(top) > p(top) >= 0.9``:
  a "threshold_single" shortcut accepts it outright); on odd ones the draft's top token is one of
  target probability in [0.02, 0.05), at most half of what the top token leaves, the rest of the
  tokens sharing the other half (its ``topk`` children's mass lies in (0, 0.05): the residual
  is nearly the whole target, where a "skip the small residual" shortcut lives).
- ``sparse``: each law's mass on ``SPARSE_SUPPORT`` (200-400) tokens drawn over the whole id range
  (at V = 152064 most past 2**16 and 2**17), Zipf-like (``s`` in [2.5, 3.5]: confident, the top
  token's probability ~0.75-0.9, so EAGLE trees are walked deep: ~2.7 nodes of depth >= 2 with
  children a row), exactly 0 elsewhere; the draft on the same tokens with ``N(0, 0.3)`` noise: a
  real vocabulary's code paths with laws whose tables are cheap.

*Trees.* Row ``b`` has a random shape of at most ``nodes`` nodes (exactly ``nodes`` unless
``ragged=1``; absent nodes are ``-2`` at the end), depth at most ``depth``, at most ``fanout``
children per node, parents before children, siblings in node order. No ceilings: any depth,
fan-out (``<= V`` unless ``iid``) and node count (``depth=0``: every row the root alone, the other
nodes absent). ``holes=1``: each row's size is drawn as with ``ragged`` and its nodes move, in
order, to drawn places among the ``nodes`` (node 0 stays the root): absent nodes anywhere, as
``equiv mtp`` sends them; the contract is ``parents[i] < i`` for every present node, its parent
present, ``-2`` for absent ones. ``eagle=1`` (``topk`` only): EAGLE-2's tree, from the draft
law: level by level (to ``depth``) the ``fanout`` nodes of the largest draft path probability
each get their ``fanout`` most probable tokens, then the ``nodes - 1`` candidates of the largest
path probability are kept, in level order (``_eagle_trees``; full rows, so ``holes`` and
``ragged`` do not apply). Node 0 holds the root token
(uniform). Each node's children get tokens from the draft law ``q`` after the node, by
``drafts`` (``CONSTRUCTIONS``): ``topk`` the top tokens of ``q`` in order (deterministic, ties to
the lowest index); ``iid`` drawn from ``q`` with replacement (SpecInfer); ``wor`` drawn without
replacement (recursive rejection sampling). ``probs=0`` passes ``draft_probs = None`` (a
deterministic drafter's call). ``problems=P`` (0: every row its own) makes row ``b`` a copy of row
``b % P`` (tree, tokens and targets): rows of identical inputs, for the independence check.
``part=K`` (0: none) draws the trees (shapes, tokens, holes) afresh over the same models: the
bank is ``(family, seed, vocab)``'s whatever the part, so the calls of an ``iid`` / ``wor``
slot, each of its own trees (the law holds on average over them), share one bank and its
judge's tables instead of making one each (the quick plan of a verifier that declares ``drafts
= "any"`` made 132 banks, 70 s of its 250 s on the 2-core CPU).

*The input contract* (docs/trust.md), which every family keeps (``OUTSIDE_CONTRACT`` is empty;
tests/test_input_contract.py audits every recipe the gate draws): each row of ``target_probs``
and ``draft_probs`` is a distribution within float32 rounding -- every bank law is normalised in
float64 (``truncated`` after its cut) and rounded once to float32, so ``|sum - 1| <= 2**-24 +
V * 2**-50`` --, finite and non-negative; node 0 is the root, every present node's parent is an
earlier present node, absent nodes are -2; tokens lie in ``[0, V)``, and every drafted child has
positive draft probability under its parent's law. The judge's exact laws (``TreeModel.target``,
``.draft``) are those float32 rows normalised in float64: the laws of what the verifier is given.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from equiv import disk_cache
from equiv.memo import memo
from equiv.ops.verify.recipes import cdf_draw
from equiv.errors import InvalidArgument
from equiv.recipe_text import RecipeText, choice, integer

FAMILIES = ("realistic", "truncated", "onehot_target", "flat", "flat_far", "peaked", "sparse")
CONSTRUCTIONS = ("topk", "iid", "wor")
# Families that break the input contract on purpose (module docstring), family -> why: none.
OUTSIDE_CONTRACT: dict = {}
BANK = 16
# the banks kept in memory, counted as made (their CDFs and orders, made on use, about double it):
# at V = 151936 a bank is 56 MiB, and the quick plan of a verifier that declares ``drafts =
# "any"`` (every construction) reads 132 banks
MODEL_BYTES = 192 * 2 ** 20
# the disk cache of the banks (equiv.disk_cache): what draws them and the family's names
CACHE_TAG, CACHE_SOURCES = "verify_tree", ("equiv.ops.verify_tree.recipes",)
# and of the drawn trees (not EAGLE's): node by node in Python, 6 s of a GPU plan's wor trees on
# one thread, 20 s of its gate where the judge's threads made them at once; cdf_draw draws them
TREES_TAG, TREES_SOURCES = "verify_tree_trees", ("equiv.ops.verify_tree.recipes", "equiv.ops.verify.recipes")
_TREE_FIELDS = ("parents", "tokens", "index", "state", "depth")
_P = 2 ** 31 - 1
_M = 1000003
_MIX = 2654435761
_SALT_SHAPE, _SALT_TOKENS, _SALT_BANK, _SALT_HOLES, _SALT_PART = 101, 103, 107, 109, 113
SPARSE_SUPPORT = (200, 401)                # the sparse family's tokens per law: a draw in [200, 400]


@dataclass(frozen=True)
class TreeRecipe(RecipeText):
    """A replayable description of the tree verifier's inputs (module docstring)."""

    ALWAYS = ("seed", "batch", "vocab", "nodes", "depth", "fanout", "drafts")
    WHAT = "verify_tree recipe"
    family: str = choice("realistic", FAMILIES)
    seed: int = integer(0, min=0)
    batch: int = integer(8, min=1)
    vocab: int = integer(1024, min=2)
    nodes: int = integer(8, min=1)                   # no ceilings: memory bounds a recipe, not a list
    depth: int = integer(3, min=0)
    fanout: int = integer(3, min=1, max=lambda r: None if r.drafts == "iid" else r.vocab)
    drafts: str = choice("topk", CONSTRUCTIONS)
    ragged: int = integer(0, min=0, max=1)
    probs: int = integer(1, min=0, max=1)
    problems: int = integer(0, min=0)
    holes: int = integer(0, min=0, max=1)
    eagle: int = integer(0, min=0, max=1)
    part: int = integer(0, min=0)

    def __post_init__(self):
        super().__post_init__()
        if self.eagle and self.drafts != "topk":
            raise InvalidArgument(f"eagle=1 with drafts={self.drafts} is invalid: an EAGLE tree is drafted "
                                  f"top-k (drafts=topk), or use eagle=0 for {self.drafts} trees")

    @property
    def n_problems(self) -> int:
        return self.batch if not self.problems else min(self.problems, self.batch)

    def rows(self) -> np.ndarray:
        """The problem (distinct tree and targets) each row copies: ``[batch]`` int64."""
        return np.arange(self.batch, dtype=np.int64) % self.n_problems

    def model(self) -> "TreeModel":
        return tree_model(self.family, self.seed, self.vocab)

    def trees(self) -> "Trees":
        return make_trees(self)

    def build(self, device="cpu", rows=None, table_rows: bool = False):
        """``(parents, draft_token_ids, draft_probs or None, target_probs)`` as torch tensors;
        ``rows = (start, stop)`` builds those rows of the batch alone, each as it is in the whole
        batch (a call of a window of rows under the memory budget: draws.run_draws);
        ``table_rows``: the laws as ``equiv.run.table_rows.TableRows`` of the bank, gathered where
        the guard band writes them (the judge's calls: calls.draw)."""
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch  # lazy: recipes are parsed and judged without torch

        t = self.trees()
        a, b = (0, self.batch) if rows is None else (int(rows[0]), int(rows[1]))
        target_laws, draft_laws = _laws_on((self.family, self.seed, self.vocab), str(device))
        index = torch.from_numpy(t.index[a:b]).to(target_laws.device)
        if table_rows:
            from equiv.run.table_rows import TableRows
            target, draft = TableRows(target_laws, index), TableRows(draft_laws, index) if self.probs else None
        else:
            target = target_laws[index]                   # [B, N, V]: gathered where the call runs
            draft = draft_laws[index] if self.probs else None
        return (torch.from_numpy(t.parents[a:b].copy()).to(device), torch.from_numpy(t.tokens[a:b].copy()).to(device),
                draft, target)

    def bytes_per_row(self) -> int:
        """The input bytes of one row: ``target_probs`` and ``draft_probs`` ``[N, V]`` float32 (the
        latter where given), ``parents`` and ``draft_token_ids`` ``[N]`` int64 (what
        ``equiv.memory.rows_per_call`` divides)."""
        return 4 * self.nodes * self.vocab * (1 + int(bool(self.probs))) + 16 * self.nodes


@dataclass(frozen=True)
class TreeModel:
    """``BANK`` target and draft laws (float64 normalised, and the float32 the verifier reads)."""

    family: str
    seed: int
    vocab: int
    target: np.ndarray
    draft: np.ndarray
    target32: np.ndarray
    draft32: np.ndarray

    def start(self, roots) -> np.ndarray:
        """The hash state after the root token of each row."""
        return step(np.full(np.shape(roots), (self.seed * _M + 12345) % _P, dtype=np.int64), roots)

    @staticmethod
    def index(state) -> np.ndarray:
        return law_index(state)

    @functools.cached_property
    def target_cdf(self) -> np.ndarray:
        return np.cumsum(self.target, axis=1)

    @functools.cached_property
    def draft_cdf(self) -> np.ndarray:
        return np.cumsum(self.draft, axis=1)

    @functools.cached_property
    def draft_order(self) -> np.ndarray:
        """``[BANK, V]``: each draft law's tokens by decreasing probability (ties: lowest index)."""
        return np.argsort(-self.draft, axis=1, kind="stable")

    def draft_top(self, m: int) -> np.ndarray:
        """``[BANK, min(m, V)]``: the first columns of ``draft_order``, the same values, without
        sorting whole rows (a tree drafts its top ``fanout`` children; sorting the bank's rows
        whole took 1.5 s of the tree suite's 9-10 s on a GPU host): per row the ``m``-th largest
        probability, every token above it and the lowest-index tokens equal to it, sorted. Kept
        for the largest ``m`` asked."""
        m = min(int(m), self.vocab)
        kept = self.__dict__.get("_draft_top")
        if kept is not None and kept.shape[1] >= m:
            return kept[:, :m]
        if "draft_order" in self.__dict__ or 4 * m >= self.vocab:
            top = self.draft_order[:, :m]
        else:
            p = self.draft
            cut = -np.partition(-p, m - 1, axis=1)[:, m - 1:m]            # [BANK, 1]: the m-th largest
            above = p > cut
            tie = p == cut
            take = above | (tie & (np.cumsum(tie, axis=1) <= m - above.sum(1, keepdims=True)))
            rows, cols = np.nonzero(take)                                 # m a row, by index
            top = cols[np.lexsort((cols, -p[rows, cols], rows))].reshape(p.shape[0], m)
        self.__dict__["_draft_top"] = top
        return top


def step(state, tokens) -> np.ndarray:
    """The rolling hash of a prefix extended by ``tokens`` (int64, no overflow: state < 2**31)."""
    return (np.asarray(state, dtype=np.int64) * _M + np.asarray(tokens, dtype=np.int64) + 1) % _P


def law_index(state) -> np.ndarray:
    return ((np.asarray(state, dtype=np.int64) * _MIX) >> 17) % BANK


def _zipf_logits(rng, K, V):
    logits = np.empty((K, V))
    for k in range(K):
        s = rng.uniform(1.05, 1.8)
        logits[k, rng.permutation(V)] = -s * np.log(np.arange(V) + 1.0)
    return logits + 0.3 * rng.standard_normal((K, V))


def _softmax(x):
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _peaked(rng, K, V):
    """The ``peaked`` family's laws (module docstring)."""
    target, draft = np.zeros((K, V)), np.zeros((K, V))
    for k in range(K):
        perm = rng.permutation(V)
        top, low, others = perm[0], perm[1], perm[2:]
        t = rng.uniform(0.9, 0.995)
        c = rng.uniform(0.02, 0.05) if V > 2 else 1.0 - t
        c = min(c, 0.5 * (1.0 - t))            # the others keep mass: a wor tree of 3+ siblings exists
        target[k, top], target[k, low] = t, c
        if others.size:
            target[k, others] = (1.0 - t - c) * rng.dirichlet(np.ones(others.size))
        else:
            target[k, top] = 1.0 - c
        if k % 2 == 0:                         # more confident than the target
            draft[k] = 0.4 * target[k]
            draft[k, top] += 0.6
        else:                                  # confident on a token the target barely allows
            draft[k] = 0.1 * target[k] + 0.05 / V
            draft[k, low] += 1.0 - draft[k].sum()
    return target, draft


def _sparse(rng, K, V):
    """The ``sparse`` family's laws (module docstring): Zipf-like on ``SPARSE_SUPPORT`` tokens
    spread over the whole id range, exactly 0 elsewhere; the draft on the same tokens."""
    target, draft = np.zeros((K, V)), np.zeros((K, V))
    for k in range(K):
        ids = rng.choice(V, size=min(V, int(rng.integers(*SPARSE_SUPPORT))), replace=False)
        logits = -rng.uniform(2.5, 3.5) * np.log(np.arange(ids.size) + 1.0) + 0.3 * rng.standard_normal(ids.size)
        target[k, ids] = _softmax(logits[None])[0]
        draft[k, ids] = _softmax(logits[None] + 0.3 * rng.standard_normal((1, ids.size)))[0]
    return target, draft


@memo(24, max_bytes=MODEL_BYTES)            # a calibration cycles 3 seeds x 6 families
def tree_model(family: str, seed: int, vocab: int) -> TreeModel:
    """The bank of ``(family, seed, vocab)``: its float32 laws from the disk cache
    (``equiv.disk_cache``: 1-2 s of NumPy a plan, in the gate's process and again in its
    property suite's) or drawn (``_bank_laws``); the exact laws are the float32 inputs,
    normalised in float64 (what a verifier is given)."""
    def make():
        target, draft = _bank_laws(family, seed, vocab)
        return {"target32": target.astype(np.float32), "draft32": draft.astype(np.float32)}

    got = disk_cache.arrays(CACHE_TAG, CACHE_SOURCES, f"{family} seed={seed} vocab={vocab}", make,
                            {"target32": ((BANK, vocab), np.float32), "draft32": ((BANK, vocab), np.float32)})
    target32, draft32 = got["target32"], got["draft32"]
    t64 = target32.astype(np.float64)
    d64 = draft32.astype(np.float64)
    return TreeModel(family, seed, vocab, t64 / t64.sum(1, keepdims=True), d64 / d64.sum(1, keepdims=True),
                     target32, draft32)


@memo(4)
def _laws_on(bank: tuple, device: str):
    """The float32 laws of ``bank = (family, seed, vocab)`` as tensors on ``device`` (``[BANK, V]``
    each, 19 MiB at V = 152064 and both), kept for the next recipe: ``build`` gathers its ``[B, N,
    V]`` inputs from them on the device, not on the host and through the bus (an ``iid`` / ``wor``
    slot builds one recipe a call: the EAGLE slot alone 88 builds of 2.6 GB on a GPU)."""
    import torch

    m = tree_model(*bank)
    return torch.from_numpy(np.array(m.target32)).to(device), torch.from_numpy(np.array(m.draft32)).to(device)


def _bank_laws(family: str, seed: int, vocab: int):
    """``BANK`` target and draft laws of the family (float64, module docstring)."""
    rng = np.random.default_rng([seed, _SALT_BANK, FAMILIES.index(family)])
    K, V = BANK, vocab
    if family == "flat":
        target = rng.dirichlet(np.ones(V), size=K)
        draft = 0.5 * target + 0.5 * rng.dirichlet(np.ones(V), size=K)
    elif family == "flat_far":
        target = rng.dirichlet(np.ones(V), size=K)
        draft = rng.dirichlet(np.full(V, 0.5), size=K)
    elif family == "peaked":
        target, draft = _peaked(rng, K, V)
    elif family == "sparse":
        target, draft = _sparse(rng, K, V)
    else:
        logits = _zipf_logits(rng, K, V)
        target = _softmax(logits)
        draft = _softmax(logits + 0.7 * rng.standard_normal((K, V)))
        if family == "truncated":
            order = np.argsort(-target, axis=1, kind="stable")
            for k in range(K):
                target[k, order[k, int(rng.integers(1, min(V, 10) + 1)):]] = 0.0
            target /= target.sum(1, keepdims=True)        # renormalised, as engines do after top-k / top-p
        elif family == "onehot_target":
            hot = np.zeros((K, V))
            hot[np.arange(K), target.argmax(1)] = 1.0
            target = hot
    return target, draft


@dataclass(frozen=True)
class Trees:
    """The drafted trees of a recipe, NumPy: ``parents``, ``tokens`` and ``index`` (each node's
    bank law) ``[B, N]``, ``state`` (each node's prefix hash) ``[B, N]``, ``depth`` ``[B, N]``
    (-1 absent) and ``max_depth`` (``D``: outputs are ``[B, D+1]``)."""

    parents: np.ndarray
    tokens: np.ndarray
    index: np.ndarray
    state: np.ndarray
    depth: np.ndarray
    max_depth: int

    @functools.cached_property
    def children(self) -> np.ndarray:
        """``[B, N, F]`` int64: each node's children in node order, -1 padding."""
        B, N = self.parents.shape
        slot = np.zeros((B, N), dtype=np.int64)
        kids = np.zeros((B, N), dtype=np.int64)
        rows = np.arange(B)
        for i in range(1, N):
            here = self.parents[:, i] >= 0
            par = np.where(here, self.parents[:, i], 0)
            slot[:, i] = kids[rows, par]
            kids[rows[here], par[here]] += 1
        out = np.full((B, N, max(int(kids.max()), 1)), -1, dtype=np.int64)
        b, i = np.nonzero(self.parents >= 0)
        keep = i > 0
        out[b[keep], self.parents[b[keep], i[keep]], slot[b[keep], i[keep]]] = i[keep]
        return out

    @functools.cached_property
    def duplicates(self) -> np.ndarray:
        """``[B]`` bool: rows where two siblings share a token (``iid`` trees)."""
        kids = self.children
        tok = np.where(kids >= 0, self.tokens[np.arange(kids.shape[0])[:, None, None], np.maximum(kids, 0)], -1)
        s = np.sort(tok, axis=2)
        return ((s[:, :, 1:] == s[:, :, :-1]) & (s[:, :, 1:] >= 0)).any((1, 2))


def _rng(r: TreeRecipe, *salt) -> np.random.Generator:
    """The generator of one draw of ``r``'s trees: ``[seed, *salt]``, or ``[seed, _SALT_PART,
    part, *salt]`` where ``part`` asks for trees of their own (module docstring; a part after the
    salt would meet ``[seed, salt, n, 0]``: NumPy's seeds ignore trailing zeros)."""
    return np.random.default_rng([r.seed, _SALT_PART, r.part, *salt] if r.part else [r.seed, *salt])


def _shape(rng, n_nodes, depth, fanout):
    parents = [-1]
    depths = [0]
    kids = [0]
    for _ in range(1, n_nodes):
        open_ = [j for j in range(len(parents)) if depths[j] < depth and kids[j] < fanout]
        if not open_:
            break
        w = np.array([depths[j] + 1.0 for j in open_])
        j = open_[int(rng.choice(len(open_), p=w / w.sum()))]
        parents.append(j)
        depths.append(depths[j] + 1)
        kids[j] += 1
        kids.append(0)
    return parents, depths


def _row_shapes(r: TreeRecipe) -> tuple:
    """The shape of each row's tree as drafted (not ``eagle``), before ``holes`` places it:
    ``parents`` and ``depth`` ``[B, N]``, absent nodes at the end (-2 and -1)."""
    B, N = r.batch, r.nodes
    rng = _rng(r, _SALT_SHAPE)
    parents = np.full((B, N), -2, dtype=np.int64)
    depth = np.full((B, N), -1, dtype=np.int64)
    shapes: dict = {}
    for b in range(B):
        n_b = int(rng.integers(1, N + 1)) if r.ragged or r.holes else N
        key = (n_b, int(rng.integers(0, 4)))       # a few shapes per size, shared by rows: fast
        if key not in shapes:
            shapes[key] = _shape(_rng(r, _SALT_SHAPE, *key), n_b, r.depth, r.fanout)
        p, d = shapes[key]
        parents[b, :len(p)] = p
        depth[b, :len(d)] = d
    return parents, depth


def extent(r: TreeRecipe) -> tuple:
    """``(depth, fanout)``: the deepest node's depth and the most children of one node in the
    recipe's trees (at least 1), what ``make_trees(r)`` would give. Without drafting tokens
    where the shape does not depend on them (every tree but EAGLE-2's): the coverage record reads
    this for cases this process never builds (the contract plan's, run by the property suite),
    and their family models and draft orders took ~2 s of the tree gate's end on a GPU host."""
    if r.n_problems < r.batch:                       # the rows copy the problems: the same extent
        return extent(r.with_(batch=r.n_problems, problems=0))
    if r.eagle:
        t = make_trees(r)
        return t.max_depth, max(int((t.children >= 0).sum(-1).max()), 1)
    parents, depth = _row_shapes(r)
    b, i = np.nonzero(parents >= 0)
    kids = np.bincount(b * r.nodes + parents[b, i], minlength=1)
    return int(depth.max()), max(int(kids.max()), 1)


# shared by threads, each recipe's trees made once: the judge's table threads and the calls ask for
# the same recipe at once (with functools.lru_cache each made it: four times an iid / wor part)
@memo(32)
def make_trees(r: TreeRecipe) -> Trees:
    if r.n_problems < r.batch:                       # row b copies problem b % problems
        one = make_trees(r.with_(batch=r.n_problems, problems=0))
        b = r.rows()
        return Trees(one.parents[b], one.tokens[b], one.index[b], one.state[b], one.depth[b], one.max_depth)
    if r.eagle:
        return _placed(_eagle_trees(r, r.model()), r)
    B, N = r.batch, r.nodes
    got = disk_cache.arrays(TREES_TAG, TREES_SOURCES, f"trees {r.with_(probs=1)}",
                            lambda: _fields(_placed(_drawn_trees(r), r)),
                            {name: ((B, N), np.int64) for name in _TREE_FIELDS})
    return Trees(*(got[name] for name in _TREE_FIELDS), int(got["depth"].max()))


def _fields(t: Trees) -> dict:
    return {name: getattr(t, name) for name in _TREE_FIELDS}


def _drawn_trees(r: TreeRecipe):
    """The trees of a recipe that is not EAGLE's, node by node (``drafts``: the top-k, i.i.d. or
    without-replacement children of each node's draft law): compact ``(parents, tokens, state,
    depth)``."""
    m = r.model()
    B, N, V = r.batch, r.nodes, r.vocab
    parents, depth = _row_shapes(r)
    trng = _rng(r, _SALT_TOKENS)
    tokens = np.full((B, N), V - 1, dtype=np.int64)
    tokens[:, 0] = trng.integers(0, V, B)
    state = np.zeros((B, N), dtype=np.int64)
    state[:, 0] = m.start(tokens[:, 0])
    slot = np.zeros((B, N), dtype=np.int64)
    kids = np.zeros((B, N), dtype=np.int64)
    rows = np.arange(B)
    for i in range(1, N):
        here = parents[:, i] >= 0
        par = np.where(here, parents[:, i], 0)
        slot[:, i] = kids[rows, par]
        kids[rows[here], par[here]] += 1
        law = law_index(state[rows, par])
        tok = _child_tokens(r.drafts, m, law, slot[:, i], trng, tokens, parents, i)
        tokens[here, i] = tok[here]
        state[here, i] = step(state[rows[here], par[here]], tok[here])
    return parents, tokens, state, depth


def _placed(tree, r: TreeRecipe) -> Trees:
    """``Trees`` of compact rows ``(parents, tokens, state, depth)`` (absent nodes at the end);
    with ``holes=1`` each row's present nodes move, in order, to drawn places among the ``N``
    (node 0 stays the root), so absent nodes fall anywhere and every parent still precedes its
    children."""
    parents, tokens, state, depth = tree
    if r.holes:
        B, N = parents.shape
        rng = _rng(r, _SALT_HOLES)
        place = np.full((B, N), -1, dtype=np.int64)
        n = (parents != -2).sum(1)
        for b in range(B):
            place[b, :n[b]] = np.concatenate(([0], np.sort(rng.choice(np.arange(1, N), n[b] - 1, replace=False))))
        rows = np.arange(B)[:, None]
        here = place >= 0
        spread = [np.full((B, N), fill, dtype=np.int64) for fill in (-2, r.vocab - 1, 0, -1)]
        moved = np.where(parents >= 0, place[rows, np.maximum(parents, 0)], parents)
        for out, src in zip(spread, (moved, tokens, state, depth)):
            out[np.broadcast_to(rows, (B, N))[here], place[here]] = src[here]
        parents, tokens, state, depth = spread
    index = law_index(state)
    index[parents == -2] = 0
    return Trees(parents, tokens, index, state, depth, int(depth.max()))


def _eagle_trees(r: TreeRecipe, m):
    """EAGLE-2's tree in every row (module docstring): level by level the ``fanout`` nodes of the
    largest draft path probability are expanded, each into its ``fanout`` most probable draft
    tokens; then the ``nodes - 1`` candidates of the largest path probability are kept (a child's
    is at most its parent's, so the kept set holds every kept node's parent), in level order.
    Returns compact ``(parents, tokens, state, depth)``."""
    B, N, D, F = r.batch, r.nodes, r.depth, min(r.fanout, r.vocab)
    trng = _rng(r, _SALT_TOKENS)
    root = trng.integers(0, r.vocab, B)
    cum, par, tok = [np.ones((B, 1))], [np.full((B, 1), -1)], [root[:, None]]
    st, lvl = [m.start(root)[:, None]], [np.zeros((B, 1), dtype=np.int64)]
    front = np.zeros((B, 1), dtype=np.int64)              # global candidate index of the beam
    total = 1
    all_cum, all_st = cum[0], st[0]
    for d in range(1, D + 1):
        pc = np.take_along_axis(all_cum, front, 1)                         # [B, beam]
        law = law_index(np.take_along_axis(all_st, front, 1))
        kids = m.draft_top(F)[law]                                         # [B, beam, F]
        c = (pc[..., None] * m.draft[law[..., None], kids]).reshape(B, -1)
        t = kids.reshape(B, -1)
        p = np.repeat(front, F, axis=1)
        s = step(np.take_along_axis(all_st, p, 1), t)
        cum.append(c), par.append(p), tok.append(t), st.append(s), lvl.append(np.full_like(t, d))
        all_cum, all_st = np.concatenate(cum, 1), np.concatenate(st, 1)
        front = total + np.argsort(-c, axis=1, kind="stable")[:, :F]
        total += c.shape[1]
    par, tok, lvl = (np.concatenate(x, 1) for x in (par, tok, lvl))
    n = min(N, total)
    keep = np.sort(np.argsort(-all_cum, axis=1, kind="stable")[:, :n], axis=1)   # level order
    pos = np.full((B, total), -1, dtype=np.int64)
    rows = np.arange(B)[:, None]
    pos[rows, keep] = np.arange(n)
    kp = np.take_along_axis(par, keep, 1)
    out = [np.full((B, N), fill, dtype=np.int64) for fill in (-2, r.vocab - 1, 0, -1)]
    out[0][:, :n] = np.where(kp >= 0, pos[rows, np.maximum(kp, 0)], -1)
    for o, src in zip(out[1:], (tok, all_st, lvl)):
        o[:, :n] = np.take_along_axis(src, keep, 1)
    return tuple(out)


def _child_tokens(drafts, m, law, slot, rng, tokens, parents, i):
    """The token of node ``i`` in every row: the ``slot``-th child of its parent, whose draft law
    is ``law`` (bank index per row)."""
    B = law.shape[0]
    if drafts == "topk":
        top = m.draft_top(int(slot.max()) + 1)
        return top[law, np.minimum(slot, top.shape[1] - 1)]
    out = np.empty(B, dtype=np.int64)
    u = rng.random(B)
    for k in np.unique(law):
        at = law == k
        out[at] = cdf_draw(m.draft_cdf[k], u[at])
    if drafts == "iid":
        return out
    # without replacement: a repeat of an earlier sibling is drawn again (q conditioned on the rest)
    earlier = (parents[:, :i] == parents[:, i:i + 1]) & (parents[:, i:i + 1] >= 0)
    for _ in range(10000):
        dup = (earlier & (tokens[:, :i] == out[:, None])).any(1)
        if not dup.any():
            return out
        u = rng.random(int(dup.sum()))
        idx = np.flatnonzero(dup)
        for k in np.unique(law[idx]):            # the draws of each law at once (a row at a time
            at = law[idx] == k                   # was most of making a wor plan's trees)
            out[idx[at]] = cdf_draw(m.draft_cdf[k], u[at])
    raise RuntimeError("could not draw distinct siblings: the draft law has too few tokens")
