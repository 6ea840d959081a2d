"""The synthetic target LM and its MTP-style draft, batched on any device.

Plan. A *context* is one int64 per sequence: a rolling hash of every token emitted so far
(``next_context``), so a different emitted token changes every distribution after it. From the
hash the model reads three things, each by hashing again:

- a permutation ``perm`` (one of ``N_PERMS`` random permutations of the vocabulary) and a cyclic
  offset ``b`` in ``[0, V)``: the token at vocabulary position ``v`` has rank
  ``perms[perm][(v + b) mod V]``;
- a sharpness level ``l`` (one of ``LEVEL_EXPONENTS``, equally likely): the token of rank ``r``
  has logit ``-s_l * log(r + 1)``, a Zipf law of exponent ``s_l``.

So ``target_logits`` is a cyclic window of a precomputed row (``rows[perm, l]`` stored twice
over, ``[2V]``), read as a strided view: one gather of ``[N, V]`` floats, no ``[N, V]`` index.
The eight levels give a mean entropy of 1.4 nats and a mean top-1 probability of 0.72 at
V = 129280 (entropies from 4.6 nats at ``s = 1.3`` to 0.01 at ``s = 10``): the mix of confident
and open positions of a real LM. Because the rank of any token is known in closed form, the
target's conditional distribution is known exactly (``level_of``, ``rank_of``,
``rank_probabilities``), which is what the sampling-losslessness statistic needs.

The draft at draft depth ``j`` (``j`` tokens after the last verified one) is the target's logits
plus Gaussian noise of scale ``sigma_j = draft_sigma * DRAFT_SIGMA_GROWTH ** j``, the noise being
a cyclic window of a fixed table of normals chosen by hashing (context, depth). It agrees with
the target's argmax where the target is confident and errs where it is open, and its
confidence falls with depth, as an MTP module's does. ``DRAFT_SIGMA`` is calibrated so that the
first draft position is accepted by greedy verification with probability 0.875 (DeepSeek-V3's
published 0.85-0.90 for the second token); ``tests/mtp/test_mtp_models.py`` holds it to that range.

Hash arithmetic stays below 2**63 (31-bit values times 31-bit multipliers), so it is exact and
identical on every device; uniforms for stochastic verification are hashed from (seed, row,
position, purpose), so every path sees the same random numbers at the same sequence position.
"""
from __future__ import annotations

import math

import torch

from equiv.validation import check_float, check_int

P31 = 2**31 - 1
N_PERMS = 8
N_NOISE = 8
LEVEL_EXPONENTS = (1.3, 1.6, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0)
DRAFT_SIGMA = 0.93            # greedy acceptance of draft position 0 ~ 0.875 (see docstring)
DRAFT_SIGMA_GROWTH = 1.25     # later positions: conditional acceptance falls to ~0.8, ~0.75

# Salts that make the hashes of the different read-outs of one context independent.
_SALT_PERM, _SALT_OFFSET, _SALT_LEVEL, _SALT_NOISE, _SALT_SHIFT = 11, 23, 37, 53, 71


def _mix(x):
    """A 31-bit integer hash of a tensor of values in [0, 2**31): two multiply-mod rounds."""
    x = (x * 1103515245 + 12345) % P31
    x = x ^ (x >> 15)
    x = (x * 1664525 + 1013904223) % P31
    return x ^ (x >> 13)


def _salted(x, salt: int):
    return _mix((x + salt * 2654435) % P31)


def next_context(ctx, tokens):
    """The context after appending ``tokens`` (any int64, even out of range) to ``ctx``."""
    t = torch.remainder(tokens.to(torch.int64), P31)
    return _mix((ctx * 48271 + t + 1) % P31)


def initial_contexts(seed: int, n: int, device):
    """``n`` distinct prompt contexts for ``seed``."""
    rows = torch.arange(n, dtype=torch.int64, device=device)
    return _mix((_mix(torch.full_like(rows, seed % P31)) * 69069 + rows) % P31)


def uniforms(seed: int, rows, positions, purpose: int):
    """Float64 uniforms in [0, 1), 53 bits, a function of (seed, row, position, purpose) only."""
    key = _mix((_mix(rows * 2 + 1) * 40503 + positions) % P31)
    key = _mix((key * 7 + purpose + _mix(key.new_full((), seed % P31))) % P31)
    hi, lo = key, _mix((key + 999331) % P31)
    return ((hi << 22) + (lo >> 9)).double() * 2.0**-53


class _Windows:
    """Rows ``table[row, start:start + V]`` of a ``[R, 2V]`` table for per-row ``start``.

    The fast read indexes an unfolded view (``[R, V + 1, V]``, no copy): one gather of ``[N, V]``
    values and no ``[N, V]`` index tensor. At construction it is checked against the plain
    ``take`` with an explicit index on this device; if the two disagree or the view read raises,
    the plain one is used (correct everywhere, one int64 index tensor more per read)."""

    def __init__(self, table, width: int):
        self.table, self.width = table, width
        self._view = table.unfold(1, width, 1)
        self._arange = torch.arange(width, device=table.device)
        probe_rows = torch.tensor([0, table.shape[0] - 1], device=table.device)
        probe_start = torch.tensor([width - 1, 1], device=table.device)
        try:
            self.fast = torch.equal(self._view[probe_rows, probe_start],
                                    self._take(probe_rows, probe_start))
        except RuntimeError:
            self.fast = False

    def _take(self, rows, start):
        index = (rows * self.table.shape[1] + start)[:, None] + self._arange[None, :]
        return self.table.reshape(-1).take(index)

    def read(self, rows, start):
        return self._view[rows, start] if self.fast else self._take(rows, start)


class SyntheticLM:
    """Seeded target LM and draft over ``vocab`` tokens on ``device`` (see module docstring).

    The model interface the decoding loop uses (``TraceLM`` provides the same one):
    ``vocab``, ``initial_contexts(n)``, ``next_context(ctx, tokens)``, ``target_logits(ctx)``,
    ``draft_logits(ctx, depth)``, ``supports(consumer)``, ``active(ctx, depth)``.
    """

    kind = "synthetic"

    def __init__(self, vocab: int = 129280, *, seed: int = 0, device="cpu",
                 draft_sigma: float = DRAFT_SIGMA):
        self.vocab = check_int("vocab", vocab, min_value=2)
        self.seed = check_int("seed", seed, min_value=0)
        self.draft_sigma = check_float("draft_sigma", draft_sigma, min_value=0.0)
        self.device = torch.device(device)
        V = self.vocab
        gen = torch.Generator().manual_seed(self.seed)
        perms = torch.stack([torch.randperm(V, generator=gen) for _ in range(N_PERMS)])
        self.perms = perms                                         # [P, V] rank of a position
        self.inverse_perms = torch.argsort(perms, dim=1)           # [P, V] position of a rank
        ranks = torch.arange(1, V + 1, dtype=torch.float64)
        base = torch.stack([-s * torch.log(ranks) for s in LEVEL_EXPONENTS])       # [L, V]
        self.rank_probabilities = torch.softmax(base, dim=1)      # float64, exact law per level
        rows = base.float()[None, :, :].expand(N_PERMS, -1, -1).gather(
            2, perms[:, None, :].expand(-1, len(LEVEL_EXPONENTS), -1))            # [P, L, V]
        rows = rows.reshape(N_PERMS * len(LEVEL_EXPONENTS), V)
        noise = torch.randn(N_NOISE, V, generator=gen)
        # Doubled rows: a cyclic shift by b is the window [b, b + V) of a [R, 2V] table.
        self._rows = _Windows(torch.cat([rows, rows], dim=1).to(self.device), V)
        self._noise = _Windows(torch.cat([noise, noise], dim=1).to(self.device), V)

    # -- what the decoding loop calls ------------------------------------------------------
    def initial_contexts(self, n: int):
        return initial_contexts(self.seed, n, self.device)

    def next_context(self, ctx, tokens):
        return next_context(ctx, tokens)

    def supports(self, consumer: str) -> bool:
        return True

    def active(self, ctx, depth: int):
        """Synthetic contexts never run out (a trace's do)."""
        return None

    def target_logits(self, ctx):
        """``[N, V]`` float32 logits of the next token after each context ``ctx [N]``."""
        return self._rows.read(self._row_of(ctx), _salted(ctx, _SALT_OFFSET) % self.vocab)

    def draft_logits(self, ctx, depth: int):
        """``[N, V]`` float32 draft logits at draft depth ``depth`` (0 = first draft token)."""
        sigma = self.draft_sigma * DRAFT_SIGMA_GROWTH ** depth
        key = _salted((ctx + 1000003 * (depth + 1)) % P31, _SALT_NOISE)
        noise = self._noise.read(key % N_NOISE, _salted(key, _SALT_SHIFT) % self.vocab)
        return self.target_logits(ctx).add_(noise, alpha=sigma)

    # -- the exact conditional law, for the statistics ---------------------------------------
    def _row_of(self, ctx):
        perm = _salted(ctx, _SALT_PERM) % N_PERMS
        return perm * len(LEVEL_EXPONENTS) + self.level_of(ctx)

    def level_of(self, ctx):
        """The sharpness level (index into ``LEVEL_EXPONENTS``) of each context."""
        return _salted(ctx, _SALT_LEVEL) % len(LEVEL_EXPONENTS)

    def rank_of(self, ctx, tokens):
        """Rank (0 = most likely) of each token under the target after its context; -1 if the
        token is outside [0, V)."""
        V = self.vocab
        tokens = tokens.to(torch.int64)
        valid = (tokens >= 0) & (tokens < V)
        perm = (_salted(ctx, _SALT_PERM) % N_PERMS).cpu()
        pos = ((tokens.clamp(0, V - 1) + _salted(ctx, _SALT_OFFSET) % V) % V).cpu()
        rank = self.perms[perm, pos].to(tokens.device)
        return torch.where(valid, rank, torch.full_like(rank, -1))

    def token_of_rank(self, ctx, rank):
        """The token that has rank ``rank`` after each context (inverse of ``rank_of``)."""
        perm = (_salted(ctx, _SALT_PERM) % N_PERMS).cpu()
        pos = self.inverse_perms[perm, rank.cpu()].to(ctx.device)
        return (pos - _salted(ctx, _SALT_OFFSET) % self.vocab) % self.vocab

    def describe(self) -> dict:
        probs = self.rank_probabilities
        entropy = -(probs * torch_log_or_zero(probs)).sum(dim=1)
        return {"kind": self.kind, "vocab": self.vocab, "seed": self.seed,
                "level_exponents": list(LEVEL_EXPONENTS), "draft_sigma": self.draft_sigma,
                "draft_sigma_growth": DRAFT_SIGMA_GROWTH,
                "mean_entropy_nats": round(float(entropy.mean()), 4),
                "mean_top1_probability": round(float(probs[:, 0].mean()), 4)}


def torch_log_or_zero(p):
    """``log(p)`` with ``log(0)`` read as 0 (so that ``0 * log 0 = 0`` in entropies)."""
    return torch.where(p > 0, torch.log(p.clamp_min(math.ulp(0.0))), torch.zeros_like(p))
