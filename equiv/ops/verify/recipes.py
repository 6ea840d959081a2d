"""Input recipes of the verifier: (target p, draft q, draft tokens d) triples, replayable anywhere.

Plan. A ``VerifyRecipe`` is a small description -- family, seed, batch, n, vocab, problems,
noise, draft, pad -- that ``build(device)`` turns into the verifier's three inputs
``(draft_token_ids [B, n] int64, draft_probs [B, n, V] float32 or None, target_probs
[B, n+1, V] float32)``. Hypothesis shrinks it field by field, and ``str(recipe)`` (parsed back by
``VerifyRecipe.parse``) is what ``REPRO:`` lines carry:
``realistic:seed=3,batch=64,n=3,vocab=129280``.

*Problems and rows.* A recipe holds ``problems`` distinct triples (each made from its own seed
``[seed, i]`` in NumPy float64, then rounded to float32 once), and row ``b`` of the batch is a copy
of problem ``b % problems``: one call draws ``batch / problems`` independent outputs of each
triple, so statistics need few calls and the exact law is computed once per problem. Rows of
different problems interleave, so a verifier that reads a neighbour's row is seen.

*Draft tokens* are fixed per problem with ``drafts=fixed`` (the token law's cases): drawn from
``q`` (normalised in float64) with ``draft=probs``; the argmax of a hidden draft distribution with
``draft=onehot`` (then ``draft_probs`` is None, as for a greedy drafter); a chosen token for
``tiny_q``. The exact token law is conditional on them (reference/verify.py). With
``drafts=sampled`` (the losslessness judge's cases) every row draws its own drafts from its
problem's proposal -- ``q``, or the hidden draft distribution for ``draft=onehot`` -- by inverse
CDF in float64 from the seed ``[seed, 7919, row]`` (``row_tokens``): drafts distributed as the
verifier assumes, which is what losslessness is a property of. ``part = k > 0`` draws the
batch's drafts from the one stream ``[seed, 7919, 2**32 - k]`` instead (vectorised): a sample too large
for one call splits into parts, each a call of fresh drafts over the same problems (the GPU
plan's power case, plans.py); every per-problem cache is keyed by ``problem_key()``, so the
parts share their laws.

Families (``FAMILIES``), each p a Zipf-like law ``-s log(rank + 1)`` over a random permutation
(``s`` in [1.05, 1.8]) plus noise, and q the softmax of p's logits plus ``noise * N(0, 1)``:
- ``realistic``: as above (acceptance ~0.5-0.8 per position at noise 1);
- ``equal``: ``q == p`` bit for bit (everything accepted, every row draws a bonus);
- ``disjoint``: p and q live on complementary halves of the vocabulary (nothing accepted);
- ``tiny_q``: the draft token has ``q = 2**-32`` (``2**-20`` at V = 2) and ``p = 0.3 q`` (acceptance 0.3; both underflow
  in float16), at a token where q exceeded p (``p = q`` when none), the other tokens of each
  rescaled to the rest of the mass;
- ``onehot_target``: p is one-hot at its argmax (temperature 0): the output is deterministic;
  in the odd problems the draft agrees with the target (q's top token is p's argmax, lifted
  ``AGREE_LIFT`` above q's largest logit: q ~0.8-0.95 there), so many of their rows (about 0.9**n)
  accept every draft and draw the bonus token, the only token a bonus read from the wrong row changes;
- ``ties``: the top ``ties`` tokens of p and of q are exact ties;
- ``neginf_zeros``: the last ``V // 8`` tokens are -inf logits of the target (p = 0 there) but
  carry extra draft mass, so drafts land where the target forbids them;
- ``bf16_rounded``: p and q rounded to bfloat16 values (kept float32: many exact ties, within a
  row and between p and q), each row's top token then taking the remainder of the mass (rounding
  alone leaves a row's sum up to ``2**-8`` off 1, outside the contract).

*The input contract* (docs/trust.md), which every family keeps (``OUTSIDE_CONTRACT`` is empty;
tests/test_input_contract.py audits every recipe the gate draws): each row of ``target_probs``
and ``draft_probs`` is a distribution within float32 rounding -- a law normalised in float64 and
rounded once to float32, so ``|sum - 1| <= 2**-24 + V * 2**-50`` --, finite and non-negative;
every draft token lies in ``[0, V)`` and has positive draft probability.
``pad > 0`` makes every input a slice ``[..., :V]`` (the tokens ``[..., :n]``) of a wider buffer
whose padding holds 1.0 (token 0): non-contiguous rows. ``offset > 0`` starts every input
``offset`` elements into a larger buffer (a base that is not 16-byte aligned for odd offsets);
with ``pad`` too, every input is a view into a larger buffer (space.py names these layouts).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np

from equiv import disk_cache
from equiv.memo import memo
from equiv.recipe_text import RecipeText, choice, integer, real

FAMILIES = ("realistic", "equal", "disjoint", "tiny_q", "onehot_target", "ties", "neginf_zeros",
            "bf16_rounded")
# Families that break the input contract on purpose (module docstring), family -> why: none.
OUTSIDE_CONTRACT: dict = {}
DRAFTS = ("probs", "onehot")
DRAFT_MODES = ("fixed", "sampled")
AGREE_LIFT = 3.0                                 # onehot_target's agreeing drafter (docstring)
_DRAFT_SALT = 7919
TINY_Q = 2.0 ** -32              # under float16's smallest subnormal (2**-24): it flushes to 0
TINY_RATIO = 0.3                 # p = 0.3 q at the tiny draft token: acceptance 0.3
_PAD_FILL = 1.0                  # garbage in the padding: a probability that would win if read
# the disk cache of the problems (equiv.disk_cache): what makes them and the text of their key
CACHE_TAG, CACHE_SOURCES = "verify", ("equiv.ops.verify.recipes", "equiv.recipe_text")


@dataclass(frozen=True)
class Problems:
    """The distinct triples of a recipe, NumPy: ``target [P, n+1, V]``, ``draft [P, n, V]`` (None
    for a one-hot draft), ``tokens [P, n]`` int64; all float32 except the tokens."""

    target: np.ndarray
    draft: np.ndarray | None
    tokens: np.ndarray
    proposal: np.ndarray | None = None     # [P, n, V] the law drafts are drawn from (q or hidden)


@dataclass(frozen=True)
class VerifyRecipe(RecipeText):
    """A replayable description of the verifier's inputs (module docstring)."""

    ALWAYS = ("seed", "batch", "n", "vocab")
    WHAT = "verify recipe"
    family: str = choice("realistic", FAMILIES)
    seed: int = integer(0, min=0)
    batch: int = integer(8, min=1)
    n: int = integer(3, min=1, max=16)
    vocab: int = integer(129280, min=lambda r: 2 if r.family == "disjoint" else 1)
    problems: int = integer(4, min=1)
    noise: float = real(1.0, min=0.0)
    draft: str = choice("probs", DRAFTS)
    ties: int = integer(2, min=2)
    pad: int = integer(0, min=0)
    drafts: str = choice("fixed", DRAFT_MODES)
    part: int = integer(0, min=0)
    offset: int = integer(0, min=0)

    @property
    def n_problems(self) -> int:
        return min(self.problems, self.batch)

    def rows(self) -> np.ndarray:
        """The problem each row copies: ``[batch]`` int64."""
        return np.arange(self.batch, dtype=np.int64) % self.n_problems

    def problem_key(self) -> "VerifyRecipe":
        """This recipe reduced to what its problems depend on: the key of every per-problem cache."""
        return replace(self, batch=self.n_problems, pad=0, drafts="fixed", part=0, offset=0)

    def make_problems(self) -> Problems:
        """The distinct triples (cached: a V = 129280 recipe costs ~0.1 s per problem)."""
        return _problems(self.problem_key())

    def row_tokens(self) -> np.ndarray:
        """``[batch, n]`` int64: the draft tokens of every row (module docstring)."""
        return _row_tokens(self) if self.drafts == "sampled" else self.make_problems().tokens[self.rows()]

    def build(self, device="cpu", rows=None):
        """``(draft_token_ids, draft_probs or None, target_probs)`` on ``device``; ``rows = (start,
        stop)`` builds those rows of the batch alone, each as it is in the whole batch (a call
        under a memory budget: calls.py), in the recipe's layout."""
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch

        start, stop = (0, self.batch) if rows is None else (int(rows[0]), int(rows[1]))

        def rows_of(t):                            # row b = problem b % P (only the rows asked exist)
            return place(t[torch.arange(start, stop, device=t.device) % self.n_problems])

        def place(t):                              # the layout: padded rows, a base offset, both
            if not (self.pad or self.offset):
                return t
            last, rows = t.shape[-1], t.numel() // max(t.shape[-1], 1)
            stride = last + self.pad
            fill = _PAD_FILL if t.dtype.is_floating_point else 0
            buf = torch.empty((self.offset + rows * stride,), dtype=t.dtype, device=device)
            buf[:self.offset].fill_(fill)          # the fill where the rows are not, the rows once
            body = buf[self.offset:].view(rows, stride)
            body[:, last:].fill_(fill)
            body[:, :last] = t.reshape(rows, last)
            strides = [1, stride]
            for size in reversed(t.shape[1:-1]):
                strides.append(strides[-1] * size)
            return buf.as_strided(tuple(t.shape), tuple(reversed(strides)), self.offset)

        on = _on_device(self, str(device))
        draft = None if on["draft"] is None else rows_of(on["draft"])
        tokens = (place(torch.from_numpy(self.row_tokens()[start:stop]).to(device)) if self.drafts == "sampled"
                  else rows_of(on["tokens"]))
        return tokens, draft, rows_of(on["target"])


def _softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def _bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 values to the nearest bfloat16 (ties to even), kept as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def _bf16_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (float32 distributions) rounded to bfloat16 values (kept float32), then each
    row's top token set to the remainder, ``1 - sum(the others)`` rounded once: a distribution
    within float32 rounding (the input contract), every other value a bfloat16 value."""
    b = _bf16(x)
    top = np.argmax(b, axis=-1)[..., None]
    rest = b.astype(np.float64).sum(-1, keepdims=True) - np.take_along_axis(b, top, -1).astype(np.float64)
    np.put_along_axis(b, top, (1.0 - rest).astype(np.float32), -1)
    return b


def _with_value(row: np.ndarray, at: int, value: float) -> np.ndarray:
    """``row`` (a float32 distribution) with ``row[at] = float32(value)`` and the other tokens
    scaled, in float64, to the rest of the mass, then rounded once: still a distribution within
    float32 rounding (the input contract)."""
    out = row.astype(np.float64)
    v = float(np.float32(value))
    others = out.sum() - out[at]
    if others > 0:
        out *= (1.0 - v) / others
    out[at] = v
    return out.astype(np.float32)


def _zipf_logits(rng, V):
    s = rng.uniform(1.05, 1.8)
    return -s * np.log1p(rng.permutation(V).astype(np.float64)) + 0.3 * rng.standard_normal(V)


def _one_problem(r: VerifyRecipe, i: int):
    rng = np.random.default_rng([r.seed, i])
    n, V, fam = r.n, r.vocab, r.family
    t = np.stack([_zipf_logits(rng, V) for _ in range(n + 1)])              # target logits
    g = t[:n] + r.noise * rng.standard_normal((n, V))                       # hidden draft logits
    if fam == "ties":
        for row in (t, g):
            for j in range(row.shape[0]):
                top = np.argsort(-row[j], kind="stable")[: min(r.ties, V)]
                row[j, top] = row[j, top[0]]
    if fam == "disjoint":
        mask = np.zeros(V, dtype=bool)
        mask[rng.permutation(V)[: V // 2]] = True                          # p's half
        t[:, ~mask] = -np.inf
        g[:, mask] = -np.inf
    if fam == "neginf_zeros":
        tail = min(max(V // 8, 1), V - 1)
        if tail:
            t[:, V - tail:] = -np.inf
            g[:, V - tail:] += 2.0
    if fam == "onehot_target" and i % 2:         # a drafter that agrees with the target (docstring)
        g[np.arange(n), np.argmax(t[:n], axis=1)] = g.max(axis=1) + AGREE_LIFT
    p, q = _softmax(t), _softmax(g)
    if fam == "onehot_target":
        p = np.zeros_like(t)
        p[np.arange(n + 1), np.argmax(t, axis=1)] = 1.0
    if fam == "equal":
        q = p[:n].copy()
    p, q = p.astype(np.float32), q.astype(np.float32)
    if fam == "bf16_rounded":
        p, q = _bf16_rows(p), _bf16_rows(q)
    if fam == "tiny_q":
        d = np.empty(n, dtype=np.int64)
        # At V = 2 the other token holds 1 - tiny in p and in q: with 2**-32 both round to 1.0 in
        # float32 and the residual max(0, p - q) loses its mass (the law is then undefined); 2**-20
        # keeps 1 - q and 1 - 0.3 q apart in float32 (the spacing below 1 is 2**-24).
        tiny = TINY_Q if V > 2 else 2.0 ** -20
        for j in range(n):
            # A token where q exceeds p by far more than rounding (so p and q differ: the
            # residual keeps mass once both are made tiny there and renormalised).
            over = np.flatnonzero(q[j].astype(np.float64) > p[j].astype(np.float64) + 1e-6)
            d[j] = over[np.argsort(p[j][over], kind="stable")[over.size // 2]] if over.size else 0
            q[j] = _with_value(q[j], d[j], tiny)
            p[j] = _with_value(p[j], d[j], TINY_RATIO * tiny if over.size else tiny)
    elif r.draft == "onehot":
        d = np.argmax(q, axis=1).astype(np.int64)
    else:
        d = np.array([rng.choice(V, p=q[j].astype(np.float64) / q[j].astype(np.float64).sum())
                      for j in range(n)], dtype=np.int64)
    return p, (None if r.draft == "onehot" else q), d, q


def problem_cache(maxsize: int):
    """A cache for a function of a recipe's problems alone (``equiv.memo``: shared by threads,
    each entry made once): called with any recipe, it is cached under ``recipe.problem_key()``,
    so every part, batch and padding of one recipe shares one entry."""
    return memo(maxsize, reduce=lambda recipe: recipe.problem_key())


@functools.lru_cache(maxsize=32)            # a plan has 25 recipes: 8 would thrash
def _problems(r: VerifyRecipe) -> Problems:
    """The problems of ``r`` (a ``problem_key``), from the disk cache (``equiv.disk_cache``:
    ~3 s of NumPy a plan, in the gate's process and again in its property suite's) or made."""
    def make():
        made = [_one_problem(r, i) for i in range(r.batch)]
        out = {"target": np.stack([m[0] for m in made]), "tokens": np.stack([m[2] for m in made]),
               "proposal": np.stack([m[3] for m in made])}
        return out if made[0][1] is None else {**out, "draft": np.stack([m[1] for m in made])}

    want = {"target": ((r.batch, r.n + 1, r.vocab), np.float32), "tokens": ((r.batch, r.n), np.int64),
            "proposal": ((r.batch, r.n, r.vocab), np.float32)}
    if r.draft != "onehot":
        want["draft"] = ((r.batch, r.n, r.vocab), np.float32)
    got = disk_cache.arrays(CACHE_TAG, CACHE_SOURCES, str(r), make, want)
    return Problems(got["target"], got.get("draft"), got["tokens"], got["proposal"])


@problem_cache(maxsize=4)
def _on_device(r: VerifyRecipe, device: str) -> dict:
    """The problems of ``r`` as tensors on ``device``, kept for the next call: a case sent in
    windows of rows (calls.py; the power case's 32 parts in 11 windows each on a GPU) copies them
    to the device once, not once a window."""
    import torch

    pr = r.make_problems()
    return {"target": torch.from_numpy(pr.target).to(device), "tokens": torch.from_numpy(pr.tokens).to(device),
            "draft": None if pr.draft is None else torch.from_numpy(pr.draft).to(device)}


def cdf_draw(cdf: np.ndarray, u) -> np.ndarray:
    """Tokens for uniforms ``u`` under one law's non-decreasing float64 ``cdf`` (inverse CDF): the
    first token whose ``cdf`` exceeds ``u * total``, at most the last token where ``cdf`` rises
    (``u * total`` can round up to ``total``)."""
    last = np.searchsorted(cdf, cdf[-1], side="left")
    return np.minimum(np.searchsorted(cdf, u * cdf[-1], side="right"), last)


@problem_cache(maxsize=16)
def _proposal_cdfs(r: VerifyRecipe) -> np.ndarray:
    """``[P, n, V]`` float64: each proposal's CDF (shared by every part of a recipe: the power
    case's 32 draw from the same problems)."""
    return np.cumsum(r.make_problems().proposal.astype(np.float64), axis=-1)


@functools.lru_cache(maxsize=64)            # a GPU plan has 41 statistical recipes
def _row_tokens(r: VerifyRecipe) -> np.ndarray:
    """Drafts drawn per row from the problem's proposal (inverse CDF, float64), from the disk
    cache or made (4101 inverse-CDF draws over the vocabulary in the GPU plan's chain gate, ~1 ms
    each)."""
    def make():
        cdfs = _proposal_cdfs(r)
        rows = r.rows()
        if r.part:
            u = np.random.default_rng([r.seed, _DRAFT_SALT, 2 ** 32 - r.part]).random((r.batch, r.n))
        else:
            u = np.stack([np.random.default_rng([r.seed, _DRAFT_SALT, b]).random(r.n) for b in range(r.batch)])
        out = np.empty((r.batch, r.n), dtype=np.int64)
        for i in range(r.n_problems):
            mine = rows == i
            for j in range(r.n):
                out[mine, j] = cdf_draw(cdfs[i, j], u[mine, j])
        return {"tokens": out}

    return disk_cache.arrays(CACHE_TAG, CACHE_SOURCES, f"row tokens {r}", make,
                             {"tokens": ((r.batch, r.n), np.int64)})["tokens"]
