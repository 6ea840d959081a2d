"""Input recipes of the tree verifier: a path-dependent target, a draft model and drafted trees.

Plan. A ``TreeRecipe`` (family, seed, batch, vocab, nodes, depth, fanout, drafts, ragged, probs)
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

*Trees.* Row ``b`` has a random shape of at most ``nodes`` nodes (exactly ``nodes`` unless
``ragged=1``; absent nodes are ``-2`` at the end), depth at most ``depth``, at most ``fanout``
children per node, parents before children, siblings in node order. Node 0 holds the root token
(uniform). Each node's children get tokens from the draft law ``q`` after the node, by
``drafts`` (``CONSTRUCTIONS``): ``topk`` the top tokens of ``q`` in order (deterministic, ties to
the lowest index); ``iid`` drawn from ``q`` with replacement (SpecInfer); ``wor`` drawn without
replacement (recursive rejection sampling). ``probs=0`` passes ``draft_probs = None`` (a
deterministic drafter's call). ``problems=P`` (0: every row its own) makes row ``b`` a copy of row
``b % P`` (tree, tokens and targets): rows of identical inputs, for the independence check.

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
from dataclasses import dataclass, replace

import numpy as np

from equiv.ops.verify.recipes import cdf_draw
from equiv.recipe_text import recipe_parse, recipe_str
from equiv.validation import check_choice, check_int

FAMILIES = ("realistic", "truncated", "onehot_target", "flat", "flat_far", "peaked")
CONSTRUCTIONS = ("topk", "iid", "wor")
# Families that break the input contract on purpose (module docstring), family -> why: none.
OUTSIDE_CONTRACT: dict = {}
BANK = 16
_P = 2 ** 31 - 1
_M = 1000003
_MIX = 2654435761
_SALT_SHAPE, _SALT_TOKENS, _SALT_BANK = 101, 103, 107


@dataclass(frozen=True)
class TreeRecipe:
    """A replayable description of the tree verifier's inputs (module docstring)."""

    family: str = "realistic"
    seed: int = 0
    batch: int = 8
    vocab: int = 1024
    nodes: int = 8
    depth: int = 3
    fanout: int = 3
    drafts: str = "topk"
    ragged: int = 0
    probs: int = 1
    problems: int = 0

    def __post_init__(self):
        check_choice("family", self.family, FAMILIES)
        check_choice("drafts", self.drafts, CONSTRUCTIONS)
        check_int("seed", self.seed, min_value=0)
        check_int("batch", self.batch, min_value=1)
        check_int("vocab", self.vocab, min_value=2)
        check_int("nodes", self.nodes, min_value=1, max_value=256)
        check_int("depth", self.depth, min_value=0, max_value=16)
        check_int("fanout", self.fanout, min_value=1, max_value=64 if self.drafts == "iid" else min(64, self.vocab))
        check_int("ragged", self.ragged, min_value=0, max_value=1)
        check_int("probs", self.probs, min_value=0, max_value=1)
        check_int("problems", self.problems, min_value=0)

    def __str__(self) -> str:
        return recipe_str(self, always=("seed", "batch", "vocab", "nodes", "depth", "fanout", "drafts"))

    @classmethod
    def parse(cls, text: str) -> "TreeRecipe":
        return recipe_parse(cls, text, what="verify_tree recipe")

    def with_(self, **changes) -> "TreeRecipe":
        return replace(self, **changes)

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

    def build(self, device="cpu"):
        """``(parents, draft_token_ids, draft_probs or None, target_probs)`` as torch tensors."""
        import torch  # lazy: recipes are parsed and judged without torch

        t = self.trees()
        m = self.model()
        target = torch.from_numpy(m.target32[t.index]).to(device)
        draft = torch.from_numpy(m.draft32[t.index]).to(device) if self.probs else None
        return (torch.from_numpy(t.parents.copy()).to(device), torch.from_numpy(t.tokens.copy()).to(device),
                draft, target)


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
        """``[BANK, min(V, 64)]``: each draft law's tokens by decreasing probability (ties: lowest index)."""
        return np.argsort(-self.draft, axis=1, kind="stable")[:, :min(self.vocab, 64)]


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


@functools.lru_cache(maxsize=24)           # a calibration cycles 3 seeds x 6 families
def tree_model(family: str, seed: int, vocab: int) -> TreeModel:
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
    target32 = target.astype(np.float32)
    draft32 = draft.astype(np.float32)
    # the exact laws are the float32 inputs, normalised in float64 (what a verifier is given)
    t64 = target32.astype(np.float64)
    d64 = draft32.astype(np.float64)
    return TreeModel(family, seed, V, t64 / t64.sum(1, keepdims=True), d64 / d64.sum(1, keepdims=True),
                     target32, draft32)


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


@functools.lru_cache(maxsize=32)
def make_trees(r: TreeRecipe) -> Trees:
    if r.n_problems < r.batch:                       # row b copies problem b % problems
        one = make_trees(r.with_(batch=r.n_problems, problems=0))
        b = r.rows()
        return Trees(one.parents[b], one.tokens[b], one.index[b], one.state[b], one.depth[b], one.max_depth)
    m = r.model()
    B, N, V = r.batch, r.nodes, r.vocab
    rng = np.random.default_rng([r.seed, _SALT_SHAPE])
    parents = np.full((B, N), -2, dtype=np.int64)
    depth = np.full((B, N), -1, dtype=np.int64)
    shapes: dict = {}
    for b in range(B):
        n_b = int(rng.integers(1, N + 1)) if r.ragged else N
        key = (n_b, int(rng.integers(0, 4)))       # a few shapes per size, shared by rows: fast
        if key not in shapes:
            shapes[key] = _shape(np.random.default_rng([r.seed, _SALT_SHAPE, *key]), n_b, r.depth, r.fanout)
        p, d = shapes[key]
        parents[b, :len(p)] = p
        depth[b, :len(d)] = d
    trng = np.random.default_rng([r.seed, _SALT_TOKENS])
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
    index = law_index(state)
    index[parents == -2] = 0
    return Trees(parents, tokens, index, state, depth, int(depth.max()))


def _child_tokens(drafts, m, law, slot, rng, tokens, parents, i):
    """The token of node ``i`` in every row: the ``slot``-th child of its parent, whose draft law
    is ``law`` (bank index per row)."""
    B = law.shape[0]
    if drafts == "topk":
        return m.draft_order[law, np.minimum(slot, m.draft_order.shape[1] - 1)]
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
        for j, k in enumerate(law[idx]):
            out[idx[j]] = cdf_draw(m.draft_cdf[k], u[j:j + 1])[0]
    raise RuntimeError("could not draw distinct siblings: the draft law has too few tokens")
