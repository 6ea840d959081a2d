"""Hypothesis strategies over equiv's input recipes, and raw element-level arrays for small V.

Plan
----
- ``recipes(...)`` draws an ``equiv.Recipe``: family first, then V, batch, dtype, seed and the
  family's own knobs. Every choice shrinks toward the simplest case (family ``gaussian``, V = 1,
  one row, the first dtype asked for, seed 0, scale 1, no shift, two ties, no padding), so a
  failure at V = 129280 ends as the smallest recipe that still fails. V comes from the sizes that
  straddle tile edges (``VOCABS``), then every class of ``equiv.ops.draft_topk.space`` (real
  vocabularies, powers of two and multiples of 2**j with their +-1 neighbours, primes:
  ``SPACE_VOCABS``), then any size in [1, 262144]; B from 1..6, the power-of-two edges and their
  neighbours up to 4096, the tree batches, then any size in [1, 4096], capped so that B x V
  stays under ``max_elements`` (large B comes with small V). The layout knobs ``pad`` and
  ``offset`` (a base 1-13 elements into its storage) are drawn for every family. Shifts reach the
  dtype's range (``HUGE_SHIFTS``: 1e30 and -3e38 in float32 and bfloat16, +-32768 in float16),
  where a reference that folds ``max + log(sum)`` loses the sum. Knobs a family ignores are
  not drawn, so shrunk recipes print only what matters.
- ``raw_logits(...)`` draws ``[B, V]`` float32 arrays element by element (V <= 40) from a mix of
  ordinary values, specials (-inf, +inf, NaN, -0.0, subnormals, each dtype's max, exp's overflow
  and underflow thresholds), float16's range and the whole range of the widest dtype asked
  (``MAX_RAW_MAGNITUDE``): shrinking reaches single values. Values beyond a narrower dtype's
  max become +-inf when the array is cast into it, as they would in an engine.
- ``coverage_recipes(dtypes)``: the large shapes the equivalence property judges after its drawn
  examples (``COVERAGE_SHAPES``), so no budget or seed skips them.
- ``exact_shifts(dtype)`` and ``permutations()`` draw the follow-up inputs of the metamorphic
  relations (see ``equiv.properties.relations``).
Costs are bounded by ``max_elements`` (B * V): a full-size example is a few rows.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from equiv.options import DEFAULT_VOCAB
from equiv.ops.draft_topk.coverage import EDGE_BATCHES
from equiv.ops.draft_topk.confidence import BAND_NAMES
from equiv.ops.draft_topk.recipes import DTYPES, FAMILIES, Recipe
from equiv.ops.draft_topk.space import MASKS, MAX_BATCH, REAL_VOCABS, TREE_BATCHES, VOCAB_RANGE

VOCABS = (1, 2, 33, 1023, 1025, 4097, 8193, 32000, 129280)
_POW2 = tuple(2 ** j for j in range(10, 19))
SPACE_VOCABS = tuple(sorted(set(REAL_VOCABS) | set(_POW2) | {p + d for p in _POW2 for d in (-1, 1)}
                            | {12288, 12289, 40960, 40959, 256001}             # 3*2**12, 5*2**13, +-1
                            | {1031, 65521, 131071, 262139} - set(VOCABS)))    # primes
# 1..6, then the power-of-two edges and their neighbours up to 4096 (and 17) and the tree
# batches: one ordered list, so that a failing batch shrinks through every smaller size toward 1.
BATCHES = tuple(sorted(set(range(1, 7)) | set(EDGE_BATCHES) | {17} | set(TREE_BATCHES)
                       | {2 ** j + d for j in range(10, 13) for d in (-1, 0, 1)}))
SCALES = (1.0, 0.5, 2.0, 4.0, 8.0, 16.0, 0.125, 30.0)
SHIFTS = (0.0, -30.0, 8.0, -1000.0, 100.0)
# Shifts at the dtype's range, kept so that every family's row stays finite: float16's "huge"
# family lifts by up to 3e4 and "row_offsets" by 3e3, so 32768 + 33000 + noise < 65504.
HUGE_SHIFTS = {"float32": (1e30, -3e38), "bfloat16": (1e30, -3e38), "float16": (32768.0, -32768.0)}
PADS = (0, 1, 7, 129)
OFFSETS = (0, 1, 2, 3, 5, 7, 13)                # elements before the first: a misaligned base
POSITIONS = ("random", "first", "last", "tail", "strided")   # "random" first: the Recipe default
MAX_ELEMENTS = 2 ** 20                   # B * V of one example: 8 rows at V = 129280, 1024 at 1023

_USES_TIES = ("ties_max", "near_ties")
_USES_SPECIALS = ("neginf_pad", "poison_mix")

# Raw values reach each dtype's largest finite value: the reference is exact at every finite
# value of the dtype (p = exp((x - m) - log(sum)), tested against mpmath up to these maxima).
MAX_RAW_MAGNITUDE = {"float32": 3.4028234663852886e38, "bfloat16": 3.3895313892515355e38,
                     "float16": 65504.0}
SPECIAL_VALUES = (-math.inf, math.inf, math.nan, -0.0, 1e-45, -1e-45, 1.1754944e-38,
                  3.4028234663852886e38, -3.4028234663852886e38, 3.3895313892515355e38,
                  -3.3895313892515355e38, 1e30, -1e30, 88.72284, -103.97208, 65504.0, -65504.0,
                  1e4, -1e4)


def vocabs(max_vocab: int = DEFAULT_VOCAB, min_vocab: int = 1):
    sizes = [v for v in VOCABS + SPACE_VOCABS if min_vocab <= v <= max_vocab] or [max(min_vocab, 1)]
    low, high = max(min_vocab, 1), min(max_vocab, VOCAB_RANGE)
    return st.sampled_from(sizes) | st.integers(low, max(low, high))


@st.composite
def recipes(draw, families=FAMILIES, dtypes=DTYPES, *, max_vocab: int = DEFAULT_VOCAB, min_vocab: int = 1,
            max_batch: int = MAX_BATCH, min_batch: int = 1, max_elements: int = MAX_ELEMENTS,
            pad: bool = True, huge_shifts: bool = True):
    """An ``equiv.Recipe`` from ``families`` x ``dtypes``, shrinking toward a small simple case
    (``huge_shifts=False``: no shift at the dtype's range, for relations that clip to a grid)."""
    family = draw(st.sampled_from(tuple(families)))
    vocab = draw(vocabs(max_vocab, min_vocab))
    cap = max(min_batch, min(max_batch, max_elements // vocab))
    batch = min(draw(st.sampled_from([b for b in BATCHES if b >= min_batch] or [min_batch])
                     | st.integers(min_batch, max(min_batch, max_batch))), cap)
    knobs = {"dtype": draw(st.sampled_from(tuple(dtypes))),
             "seed": draw(st.integers(0, 2 ** 31 - 1)),
             "scale": draw(st.sampled_from(SCALES))}
    # Every knob is drawn for every family, so that examples of all families have the same
    # shape: Hypothesis orders examples by length first, and a family that drew fewer knobs
    # would look "simpler" than gaussian and stop the shrinker. Unused knobs keep the default.
    shifts = SHIFTS + (HUGE_SHIFTS[knobs["dtype"]] if huge_shifts else ())
    drawn = {"shift": draw(st.sampled_from(shifts)),
             "ties": min(draw(st.integers(2, 9) | st.sampled_from((33, 1025))), max(vocab, 2)),
             "position": draw(st.sampled_from(POSITIONS)),
             "specials": draw(st.integers(0, 6)),
             "pad": draw(st.sampled_from(PADS)) if pad else 0,
             "offset": draw(st.sampled_from(OFFSETS)) if pad else 0,
             "mask": draw(st.sampled_from(("mixed",) + MASKS)),
             "band": draw(st.sampled_from(("mixed",) + BAND_NAMES))}
    for knob, value in drawn.items():
        if knob in ("pad", "offset") or (knob == "shift" and family not in ("subnormal", "confident")) or \
                (knob in ("ties", "position") and family in _USES_TIES) or \
                (knob == "specials" and family in _USES_SPECIALS) or \
                (knob == "mask" and family == "masked") or (knob == "band" and family == "confident"):
            knobs[knob] = value
    return Recipe(family=family, vocab=vocab, batch=batch, **knobs)


# Shapes every run of the equivalence property judges, whatever the budget and the seed
# (random draws at the quick budget's few examples may miss them): 1024 rows, 65 rows (odd rows
# past 64) at a mid vocabulary, and 8 padded rows of the real vocabulary (B > 4 at V > 32000).
# Then the dimensions' families (``coverage.DIMENSION_FAMILIES``): every mask kind, 64 confident rows.
COVERAGE_SHAPES = (("gaussian", 1024, 33, 0), ("zipf", 65, 8193, 0), ("gaussian", 8, 129280, 7),
                   ("masked", 14, 4097, 0), ("confident", 64, 32000, 0))


def coverage_recipes(dtypes, *, max_vocab: int = DEFAULT_VOCAB, max_batch: int = MAX_BATCH, min_vocab: int = 1):
    """``COVERAGE_SHAPES`` in every dtype, capped by the subject's budget (list of ``Recipe``)."""
    out = []
    for family, batch, vocab, pad in COVERAGE_SHAPES:
        vocab = max(min(vocab, max_vocab), min_vocab)
        batch = max(1, min(batch, max_batch, MAX_ELEMENTS // vocab))
        out += [Recipe(family=family, batch=batch, vocab=vocab, dtype=d, pad=pad) for d in dtypes]
    return out


def elements(nonfinite: bool = True, dtypes=("float32",)):
    """float32 values: ordinary ones first (they shrink to 0.0), then specials, then float16's
    range, then anything up to the largest max of ``dtypes``."""
    top = max(MAX_RAW_MAGNITUDE[d] for d in dtypes)
    specials = [v for v in SPECIAL_VALUES if (nonfinite or math.isfinite(v))
                and not (math.isfinite(v) and abs(v) > top)]
    return st.one_of(st.floats(-20, 20, width=32), st.sampled_from(specials),
                     st.floats(-65504.0, 65504.0, width=32),
                     st.floats(-top, top, width=32, allow_subnormal=True))


def raw_logits(*, max_vocab: int = 40, min_vocab: int = 1, max_batch: int = 4, nonfinite: bool = True,
               dtypes=("float32",)):
    """``[B, V]`` float32 arrays drawn element by element (small V only), for inputs of ``dtypes``."""
    shape = st.tuples(st.integers(1, max_batch), st.integers(min_vocab, max(min_vocab, max_vocab)))
    return hnp.arrays(np.float32, shape, elements=elements(nonfinite, dtypes))


# Exact shifts: on a grid of spacing ``g`` with |x| <= x_max and |c| <= c_max, x + c is exact in
# the dtype, because |x + c| < 2**e and 2**e / g <= 2**(significand bits). So softmax(x + c) is
# softmax(x) exactly, and the relation needs no allowance for the shift's own rounding. Each
# c_max / 2 is past exp's float32 overflow (88.7), so a missing max-subtraction shows.
SHIFT_GRID = {                           # dtype: (grid g, x_max, c_max)
    "float32": (2.0 ** -10, 2.0 ** 12, 2.0 ** 13),   # |x + c| < 2**14, 2**24 grid points
    "bfloat16": (1.0, 2.0 ** 5, 2.0 ** 7),           # |x + c| < 2**8,  2**8 grid points
    "float16": (2.0 ** -2, 2.0 ** 6, 2.0 ** 8),      # |x + c| < 2**9,  2**11 grid points
}


def exact_shifts(dtype: str):
    """A shift c exact on the dtype's grid, of any magnitude from one grid step to ``c_max``.

    The magnitude is drawn by its exponent (so 4096 is as likely as 0.5) plus fewer grid steps
    than that power of two, so |c| < c_max; it shrinks toward one grid step."""
    g, _, c_max = SHIFT_GRID[dtype]
    top = int(math.log2(c_max / g)) - 1
    parts = st.tuples(st.integers(0, top), st.booleans(), st.integers(0, 255))
    return parts.map(lambda t: (-1.0 if t[1] else 1.0) * (2 ** t[0] + t[2] % 2 ** t[0]) * g)


def permutations():
    """How to permute the vocabulary: ('reverse' | 'roll' | 'random', seed)."""
    return st.tuples(st.sampled_from(("reverse", "roll", "random")), st.integers(0, 2 ** 31 - 1))
