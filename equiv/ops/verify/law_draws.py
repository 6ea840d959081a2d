"""Draws of a sampler's exact law on the host, with no sampler: the calibration's fast path.

Plan. A power estimate needs many judge runs of a sampler whose law is known exactly
(``calibration.biased_sampler``). On a CPU that sampler's own draws cost minutes per run at
V = 129280 and 131,072 rows (every row reads its ``[n+1, V]`` inputs), while judging the run
costs seconds. ``LawSampler(shape, tv)`` draws the same law straight from the recipe's
distinct problems:

1. each row's drafts are the recipe's (``VerifyRecipe.row_tokens``), its acceptance
   probabilities ``min(1, p(d) / q(d))`` (``q = 1`` for a one-hot drafter), in float64;
2. the first rejection comes from float64 uniforms against them (``n`` when none);
3. the token at that position is drawn by inverse CDF from the drawn law -- the reference's
   residual ``max(0, p - q)`` (``p`` without the draft for a one-hot drafter) or ``p_n`` at the bonus --
   mixed with its alternative as ``biased_sampler`` mixes it (``(1 - e) R + e A``; ``tv = 0``:
   the token-level algorithm's own law, which is lossless);
4. earlier positions hold the drafts, later ones ``-1``.

The drawn laws are computed once per (problem, position) -- and per draft token for a one-hot
drafter -- and kept for the sampler's life, so a row costs a binary search. What differs from
the device sampler is arithmetic only: float64 here where ``torch_sampler`` compares float32
ratios. A judge run on these draws is the judge's run on that law; ``tv = 0`` runs check this
module (the judge passes them at its false-positive rate: tests/ops/verify/test_verify_calibration.py).
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify.calibration import AT, _alternative
from equiv.ops.verify.recipes import cdf_draw
from equiv.reference.verify import residual
from equiv.validation import check_choice, check_float

_SALT = 0x1A3D


class LawSampler:
    """``draws(recipe, seeds) -> [len(seeds), B, n+1]`` int64 (module docstring)."""

    on_host = True

    def __init__(self, shape: str | None, tv: float, at: str = "emitted"):
        if shape is not None:
            _alternative(np.ones((1, 2)) / 2, shape)          # an unknown shape fails here
        self.shape, self.at = shape, check_choice("at", at, AT)
        self.tv = check_float("tv", tv, min_value=0.0, max_value=1.0)
        self._cdfs = {}
        self.__name__ = f"law_{shape or 'exact'}_{tv:g}" + ("_emitted" if at == "emitted" else "")

    def _cdf(self, recipe, problem: int, stop: int, token: int) -> np.ndarray:
        """The cumulative drawn law at ``stop`` of ``problem`` (``token``: the one-hot draft there):
        the reference's residual (``equiv.reference.verify.residual``) or ``p_n``, biased."""
        key = (recipe.problem_key(), problem, stop, token)
        if key not in self._cdfs:
            pr = recipe.make_problems()
            p = pr.target[problem, stop].astype(np.float64)
            if stop == recipe.n:
                law = p.copy()
            else:
                d = pr.tokens[problem:problem + 1].copy()
                d[0, stop] = max(token, 0)                       # the one-hot draft (q = None) it zeroes
                q = None if pr.draft is None else pr.draft[problem:problem + 1]
                law = residual(d, q, pr.target[problem:problem + 1])[0, stop]
            mass = law.sum()
            if not mass > 0:
                raise ValueError(f"{recipe}: problem {problem} rejects at position {stop} with positive "
                                 f"probability but its drawn law has no mass")
            law = law / mass
            if self.tv > 0:
                alt = _alternative(law[None], self.shape)[0]
                dist = 0.5 * np.abs(alt - law).sum() * (mass / p.sum() if self.at == "emitted" else 1.0)
                e = min(self.tv / dist, 1.0) if dist > 0 else 0.0
                law = (1 - e) * law + e * alt
            self._cdfs[key] = np.cumsum(law)
        return self._cdfs[key]

    def draws(self, recipe, seeds) -> np.ndarray:
        pr = recipe.make_problems()
        n, B = recipe.n, recipe.batch
        rows, d = recipe.rows(), recipe.row_tokens()
        j = np.arange(n)[None, :]
        p_d = pr.target[rows[:, None], j, d].astype(np.float64)
        q_d = 1.0 if pr.draft is None else pr.draft[rows[:, None], j, d].astype(np.float64)
        alpha = np.minimum(1.0, p_d / q_d)
        out = np.full((len(seeds), B, n + 1), -1, dtype=np.int64)
        for c, seed in enumerate(seeds):
            rng = np.random.default_rng([int(seed), _SALT])
            stop = np.cumprod(rng.random((B, n)) < alpha, axis=1).sum(axis=1)
            u = rng.random(B)
            out[c, :, :n] = np.where(j < stop[:, None], d, -1)
            token = np.where(stop < n, d[np.arange(B), np.minimum(stop, n - 1)], -1) if pr.draft is None \
                else np.full(B, -1)
            uniq, inverse, counts = np.unique(np.stack([rows, stop, token], axis=1), axis=0,
                                              return_inverse=True, return_counts=True)
            by_key = np.split(np.argsort(inverse.ravel(), kind="stable"), np.cumsum(counts)[:-1])
            for (i, s, t), at in zip(uniq, by_key):                 # the rows of each drawn law
                out[c, at, s] = cdf_draw(self._cdf(recipe, int(i), int(s), int(t)), u[at])
        return out
