"""Input recipes: a small description that a deterministic generator turns into logits.

A full-size row (V = 129280) cannot be drawn element by element, so tests, the report and the
gate describe inputs by a ``Recipe`` -- family, seed, batch, vocab, dtype, scale, shift, number
of ties, where the specials go, padding of the row stride -- and ``Recipe.build()`` makes the
tensor. The same recipe gives bit-identical logits on every device: values are drawn with
NumPy's PCG64 on the CPU, cast to the dtype, edited there, then moved. A recipe past
``BLOCK_ELEMENTS`` (4M) draws its normals in blocks of rows, each from a stream seeded by the
recipe's seed and the block's number, in threads: still a function of the recipe alone.

The string form (``str(recipe)``, ``Recipe.parse``) is what ``REPRO:`` lines carry:
``gaussian:seed=3,batch=4,vocab=129280,dtype=bfloat16``.

Families (``FAMILIES``)
- ``gaussian``: ``scale * N(0, 1) + shift`` (shift < 0 gives all-negative rows).
- ``zipf``: LM-like logits, ``-1.1 * scale * log(rank)`` over a random permutation plus noise.
- ``dominant``: gaussian with one token ``12 * scale`` above the rest (p_top1 close to 1).
- ``near_uniform``: a constant plus noise of relative size 1e-6 (every probability ~ 1/V).
- ``ties_max``: gaussian with ``ties`` (>= 2) entries equal to the row maximum, at ``position``
  ``first``, ``last``, ``tail`` (the last block of the row), ``strided`` (indices spaced by a
  power of two, a smaller one on each following row: they share a bucket of any bucketed or
  approximate top-k whose bucket count divides the spacing) or ``random``.
- ``near_ties``: gaussian whose top ``ties`` entries are 1 ULP of the dtype apart.
- ``neginf_pad``: gaussian whose last ``specials`` entries (default V // 8, at most V - 1 so that
  one finite entry is left) are -inf, as vocab padding.
- ``poison_mix``: a healthy gaussian batch with rows poisoned in turn: one NaN, one +inf, two
  +inf, all -inf (``specials`` of them, default 4, at seed-chosen rows).
- ``huge``: gaussian plus a shift of +-(scale * 1e4): a missing max-subtraction overflows. In
  float16 the shift is capped at 3e4 so that the row stays finite (float16 max is 65504).
- ``subnormal``: subnormal magnitudes of the dtype (about 1e-40 in float32 and bfloat16, 3e-6
  in float16): softmax is uniform to rounding.
- ``bf16_quantized``: gaussian values rounded to bfloat16, kept in the recipe's dtype: many
  exact ties.
- ``row_offsets``: gaussian whose rows sit at very different heights (row b shifted by a
  seed-drawn offset in +-(100 * scale)): a max taken over the whole batch instead of each row
  underflows the rows far below it.

- ``masked``: gaussian rows with -inf entries placed by ``mask`` (``space.MASKS``): a block at
  the ``tail``, at the ``front``, ``inside`` the row, ``interleaved`` (every 2nd to 4th entry),
  every entry but the ``first_only`` or the ``last_only`` column, or all but ``one_left`` at a
  seeded column. ``mask="mixed"`` (the default) gives row b the kind ``MASKS[(b + seed) % 7]``.
- ``confident``: LM-like rows whose top-1 probability is set per row, from 1e-5 to 1 - 1e-7
  (``equiv.ops.draft_topk.confidence``: bands, targets and where the calibration comes from);
  ``band`` picks one band, ``mixed`` (the default) covers them all from 5 rows on.

*The input contract* (docs/trust.md): logits ``[B, V]`` of the recipe's dtype, every row with a
finite maximum (no NaN, no +inf, one finite entry at least; -inf entries are masked tokens of
probability 0). ``OUTSIDE_CONTRACT`` names the one family that breaks it on purpose, and why:
``poison_mix``. tests/test_input_contract.py audits every recipe the gate draws.

Layout (``space.layout_classes``): ``pad > 0`` makes the rows non-contiguous: the logits are
``buffer[:, :V]`` of a ``[B, V + pad]`` buffer whose padding holds garbage (large values that
would win if read). ``offset > 0`` starts the logits that many elements into their storage (a
base that is not 16-byte aligned for offsets of 1-3 float32 or 1-7 half elements); the gap holds
the same garbage. With both, the logits are a view into a larger buffer. The guard bands of
``equiv.run.guard`` keep the offset's misalignment.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch

from equiv.ops.draft_topk import disk_cache
from equiv.ops.draft_topk.confidence import BAND_NAMES, confident_rows
from equiv.ops.draft_topk.space import MASKS, mask_kinds
from equiv.recipe_text import RecipeText, choice, integer, real

DTYPES = ("float32", "bfloat16", "float16")
POSITIONS = ("first", "last", "tail", "strided", "random")
STRIDED_ROWS = 10                                # row b is spaced by 2**(top - b % STRIDED_ROWS)
FAMILIES = ("gaussian", "zipf", "dominant", "near_uniform", "ties_max", "near_ties", "neginf_pad",
            "poison_mix", "huge", "subnormal", "bf16_quantized", "row_offsets", "masked", "confident")
# Families whose rows are all healthy and finite (safe for metamorphic properties on values).
HEALTHY_FAMILIES = ("gaussian", "zipf", "dominant", "near_uniform", "ties_max", "near_ties",
                    "huge", "subnormal", "bf16_quantized", "row_offsets", "confident")
# Families that break the input contract (module docstring) on purpose, family -> why:
OUTSIDE_CONTRACT = {
    "poison_mix": "NaN, +inf and all -inf rows, min(specials or 4, B) of them: a kernel must answer them "
                  "with NaN (the reference's poisoning rule), never a confident number, and keep the "
                  "batch's other rows right",
}


@dataclass(frozen=True)
class Recipe(RecipeText):
    """A replayable description of a ``[batch, vocab]`` logits tensor (see module docstring)."""

    ALWAYS = ("seed", "batch", "vocab", "dtype")
    family: str = choice("gaussian", FAMILIES)
    seed: int = integer(0, min=0)
    batch: int = integer(4, min=0)
    vocab: int = integer(129280, min=1)
    dtype: str = choice("float32", DTYPES)
    scale: float = real(1.0, min=0.0, exclusive_min=True)
    shift: float = real(0.0)
    ties: int = integer(2, min=1)
    position: str = choice("random", POSITIONS)
    specials: int = integer(0, min=0)
    pad: int = integer(0, min=0)
    offset: int = integer(0, min=0)
    mask: str = choice("mixed", ("mixed",) + MASKS)
    band: str = choice("mixed", ("mixed",) + BAND_NAMES)

    def build(self, device="cpu"):
        """The logits tensor, ``[batch, vocab]`` of ``dtype`` on ``device``."""
        return build(self, device)


def _positions(rng, r: Recipe, n: int, row: int = 0) -> np.ndarray:
    n = min(n, r.vocab)
    if r.position == "strided":
        top = int(np.log2((r.vocab - 1) // (n - 1))) if n > 1 and r.vocab > n else 0
        step = 2 ** max(top - row % STRIDED_ROWS, 0)
        start = int(rng.integers(r.vocab - (n - 1) * step))
        return start + step * np.arange(n)
    if r.position == "first":
        return np.arange(n)
    if r.position == "last":
        return np.arange(r.vocab - n, r.vocab)
    if r.position == "tail":                     # inside the last (ragged) tile of a 1024 block
        start = (r.vocab // 1024) * 1024 if r.vocab % 1024 else max(r.vocab - 1024, 0)
        span = np.arange(start, r.vocab)
        if span.size < n:
            span = np.arange(r.vocab - n, r.vocab)
        return np.sort(rng.choice(span, size=n, replace=False))
    return np.sort(rng.choice(r.vocab, size=n, replace=False))


BLOCK_ELEMENTS = 2 ** 22                          # normals past the first block come from streams of their own


def _threads() -> int:
    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _normals(rng, r: Recipe, shape) -> np.ndarray:
    """Standard normals of ``shape`` (float64). Up to ``BLOCK_ELEMENTS`` they come whole from
    ``rng``; a larger shape is cut into blocks of rows: the first from ``rng`` (so its rows are
    those of a small recipe with the same seed), block i from its own PCG64 stream seeded by
    ``(seed, i)``, filled in threads (NumPy lets go of the GIL while it fills). The values depend on
    the recipe alone, never on the thread count: this is what cut the quick plan's ~230M draws
    from ~7.5 s to what the host's cores allow."""
    batch, vocab = shape
    rows = max(1, BLOCK_ELEMENTS // max(vocab, 1))
    if batch <= rows:
        return rng.standard_normal(shape)
    out = np.empty(shape)
    out[:rows] = rng.standard_normal((rows, vocab))
    starts = list(range(rows, batch, rows))

    def fill(i: int) -> None:
        np.random.default_rng([r.seed, 0xB10C, i + 1]).standard_normal(out=out[starts[i]: starts[i] + rows])

    with ThreadPoolExecutor(_threads()) as pool:
        list(pool.map(fill, range(len(starts))))
    return out


def _base(rng, r: Recipe, shape) -> np.ndarray:
    fam = r.family
    if fam == "zipf":
        ranks = np.stack([rng.permutation(shape[1]) for _ in range(shape[0])]) + 1 if shape[0] else \
            np.zeros(shape)
        return (-1.1 * r.scale * np.log(ranks) + 0.3 * r.scale * _normals(rng, r, shape) + r.shift)
    if fam == "near_uniform":
        return (1.0 + r.shift) + 1e-6 * r.scale * _normals(rng, r, shape)
    if fam == "subnormal":                       # float16 subnormals lie under 6.1e-5
        return (3e-6 if r.dtype == "float16" else 1e-40) * r.scale * _normals(rng, r, shape)
    if fam == "huge":
        sign = 1.0 if r.seed % 2 == 0 else -1.0
        lift = min(1e4 * r.scale, 3e4) if r.dtype == "float16" else 1e4 * r.scale
        return r.scale * _normals(rng, r, shape) + sign * lift + r.shift
    if fam == "confident":
        return confident_rows(rng, r)
    if fam == "row_offsets":
        offsets = 100.0 * r.scale * rng.uniform(-1.0, 1.0, size=(shape[0], 1))
        return r.scale * _normals(rng, r, shape) + offsets + r.shift
    return r.scale * _normals(rng, r, shape) + r.shift


_LAST: dict = {}                                 # the last recipe built: {recipe: host tensor}
CACHED_ELEMENTS = 2 ** 25                        # larger builds are not kept (the quick plan's largest)


def build(r: Recipe, device="cpu"):
    """The recipe's logits on ``device``. The host values of the last recipe built are kept (up
    to ``CACHED_ELEMENTS``), so that an in-process judge that builds its copy and then calls
    the path on the same recipe draws the random values once; each call gets its own tensor."""
    x = host(r)
    if r.pad or r.offset:
        stride = r.vocab + r.pad
        buf = torch.full((r.offset + r.batch * stride,), 1e4 if r.dtype != "float16" else 6e4,
                         dtype=x.dtype)
        buf[r.offset:].view(r.batch, stride)[:, : r.vocab] = x
        return buf.to(device).as_strided((r.batch, r.vocab), (stride, 1), r.offset)
    out = x.to(device)
    return out.clone() if r in _LAST and out.data_ptr() == x.data_ptr() else out   # not the kept one


def host(r: Recipe):
    """The recipe's values on the host, ``[batch, vocab]`` contiguous, without its padding or
    offset: the kept ones when they are kept (a judge reads them and never writes them; a call
    gets ``build``'s own tensor), else read from the disk cache (``disk_cache``) or drawn now,
    and kept."""
    x = _LAST.get(r)
    if x is None:
        x = disk_cache.values(r, lambda: _host_values(r))   # read back when a run drew them before
        keep(r, x)
    return x


def keep(r: Recipe, values) -> None:
    """Make ``values`` (the recipe's host values, built elsewhere: ``ahead.prepare``) the kept
    ones, so that ``build`` and ``host`` read them instead of drawing them again."""
    _LAST.clear()
    if values.numel() <= CACHED_ELEMENTS:
        _LAST[r] = values


def _host_values(r: Recipe):
    """The recipe's ``[batch, vocab]`` values on the host, contiguous (``build`` pads them)."""
    rng = np.random.default_rng(r.seed)
    # row-major whatever the family's arithmetic left (``rng.permuted`` of the confident family
    # returns a column-major array): the layout is the recipe's ``pad`` / ``offset`` alone
    vals = np.ascontiguousarray(_base(rng, r, (r.batch, r.vocab)), dtype=np.float32)
    if r.family == "bf16_quantized":
        vals = torch.from_numpy(vals).to(torch.bfloat16).float().numpy()
    x = torch.from_numpy(vals).to({"float32": torch.float32, "bfloat16": torch.bfloat16,
                                   "float16": torch.float16}[r.dtype])   # round once into the dtype
    # each row's max before its own edit (an edit touches its row only): one reduction, not B
    row_max = x.max(dim=1).values if r.family in ("dominant", "ties_max", "near_ties") and r.batch else None
    near = _near_tie_values(r, row_max, x.dtype) if r.family == "near_ties" and r.batch else None
    for b in range(r.batch):
        row = x[b]
        if r.family == "dominant":
            row[int(rng.integers(r.vocab))] = float(row_max[b].float()) + 12 * r.scale
        elif r.family == "ties_max":
            pos = torch.from_numpy(_positions(rng, r, max(r.ties, 2), b))
            row[pos] = row_max[b] + 1.0
        elif r.family == "near_ties":
            pos = torch.from_numpy(_positions(rng, r, max(r.ties, 2), b))
            row[pos] = near[b, : pos.numel()]
        elif r.family == "neginf_pad":
            n = min(r.specials or max(r.vocab // 8, 1), r.vocab - 1)   # one finite entry stays
            if n > 0:
                row[r.vocab - n:] = -float("inf")
    if r.family == "masked":
        _mask(rng, r, x)
    if r.family == "poison_mix" and r.batch:
        n = min(r.specials or 4, r.batch)
        rows = rng.choice(r.batch, size=n, replace=False)
        for i, b in enumerate(rows):
            kind = i % 4
            j = int(rng.integers(r.vocab))
            if kind == 0:
                x[b, j] = float("nan")
            elif kind == 1:
                x[b, j] = float("inf")
            elif kind == 2:
                x[b, j] = float("inf")
                x[b, (j + 1 + int(rng.integers(max(r.vocab - 1, 1)))) % r.vocab] = float("inf")
            else:
                x[b] = -float("inf")
    return x


def _near_tie_values(r: Recipe, row_max, dtype):
    """``[batch, n]``: each row's max + 1, then each value one ULP below the previous (all rows
    at once: a loop over the n positions, not over B x n elements)."""
    n = min(max(r.ties, 2), r.vocab)
    out = row_max.new_empty((r.batch, n), dtype=dtype)
    out[:, 0] = row_max + 1.0
    down = row_max.new_full((r.batch,), -float("inf"), dtype=dtype)
    for i in range(1, n):
        out[:, i] = out[:, i - 1].nextafter(down)
    return out


def _mask(rng, r: Recipe, x) -> None:
    """-inf entries of a ``masked`` recipe, row by row (module docstring)."""
    vocab = r.vocab
    for b, kind in enumerate(mask_kinds(r)):
        if vocab < 2:
            return
        keep = {"first_only": 0, "last_only": vocab - 1}.get(kind)
        if kind == "one_left":
            keep = int(rng.integers(vocab))
        if keep is not None:
            value = x[b, keep].clone()
            x[b] = -float("inf")
            x[b, keep] = value
            continue
        n = max(1, int(vocab * rng.uniform(0.125, 0.75)))       # the block: 1/8 to 3/4 of the row
        n = min(n, vocab - 1)
        if kind == "tail":
            x[b, vocab - n:] = -float("inf")
        elif kind == "front":
            x[b, :n] = -float("inf")
        elif kind == "inside":
            start = 1 + int(rng.integers(max(vocab - n - 1, 1)))
            x[b, start: min(start + n, vocab - 1)] = -float("inf")
        else:                                   # interleaved: every step-th entry is kept
            step = int(rng.integers(2, 5))
            start = int(rng.integers(step))
            kept = x[b, start:: step].clone()
            x[b] = -float("inf")
            x[b, start:: step] = kept
