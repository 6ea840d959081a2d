"""Which shapes the gate judges and which rows of a large batch ``compare`` judges.

A kernel's dispatch heuristics (split counts, grid caps, vector widths, a special case for small
batches) live at batch sizes and vocabularies a fixed ``[4, 129280]`` never reaches. This module
holds the two plans that keep a kernel from dodging the gate that way.

Plan
----
1. The shape plan of the tolerance stage (``tolerance_plan``): every family x dtype check gets a
   few shapes, deterministic from the seed, such that across the plan
   - every check runs the main vocabulary (``--vocab``, 129280 by default: DeepSeek-V3/V3.2)
     with a small batch (1, 2, 3, 7, 8, 9, 31, 32 or 33, in a seeded order, so that 9
     consecutive checks cover all nine),
   - every other real vocabulary (151936, 151666, 128256, 32000) occurs, and
   - every large batch size (63-65, 127-129, 255-257: powers of two and their neighbours, and
     1024) occurs once, each with a vocabulary it fits under ``MAX_SHAPE_ELEMENTS`` (1024 rows
     fit only V = 32000), spread over the checks by a seeded stride,
   - shapes alternate between contiguous rows and padded ones (``Recipe.pad``: a row stride
     wider than V, garbage in the gap).
   With fewer checks than sizes to place (one dtype, few families), checks get more shapes until
   every size is placed. Cost (2-core CPU): building a recipe costs ~27 ns and ``compare`` ~15 ns
   per element (at [1024, 129280]: build 3.6 s, compare 4.4 s judging every row, ~2 s CPU with
   the row sample), so the quick plan (two dtypes: 170-260M elements over 200 seeds, median
   224M) costs ~10 s, the whole quick gate for identity_top1 21-24 s (13 s with [4, 129280]
   only). The budget's ``max_shape_elements`` bounds each shape (quick 2**25; full 2**28, which
   admits [1024, 151936]).
   Then the dimensions of ``equiv.ops.draft_topk.space`` (``_dimension_shapes``), every budget:
   - one vocabulary of each class (an unlisted real one, a power of two, a multiple of 2**j,
     the +-1 neighbours of both, a prime, one from the range, one with V % 128 == 64 -- Phi-3's
     32064 or a drawn one --, one with V % 256 == 128), each with a small batch, on a drawn
     check and again on the finest dtype's gaussian check (a skipped half tile moves 0.2 % of
     the softmax: float32's tolerance sees it, bfloat16's and a peaked family's need not),
   - one batch of each class past 1024 (the tree 256 x 5 = 1280, 2048 or 4096, a neighbour, one
     from 1025..4096, one from 4097..8192), each with a vocabulary that fits (past 4096 rows,
     V = 1025 or 33: cheap on a CPU),
   - every one of these at a base offset of 1-15 elements (never a multiple of 16 bytes), with
     padded rows, or both (a view into a larger buffer), so that layouts cross vocabularies,
   - the ``masked`` checks a batch of 14 (every mask kind twice) and the ``confident`` checks
     64 rows at V = 32000 (the 1 - p band 1e-3..1e-5 gets ~20 stratified rows, one in each
     slice, so rows with 1 - p in (4.9e-4, 1e-3] are always there),
   - at every k past the first (``--k auto`` judges 1 and one k of each class up to 64, drawn per
     seed: ``equiv.options.auto_ks``; each such k gets one shape of each check), the families of
     ``TINY_V_FAMILIES`` (subnormal and underflowing probabilities, and the spread one) also get a
     tiny vocabulary (``tiny_shapes``: V from k to 2k + 3), so k > 1 meets them too,
   - with ``huge`` (the gate: a CUDA device and the full budget) ``space.HUGE_SHAPE``
     ([16385, 131072], past 2**31 elements) on the gaussian bfloat16 check.
2. The rows of a large batch (``judged_rows``): ``compare`` checks the contract and the index
   range on every row (cheap, on the device) and the reference-based checks (tie set, value,
   poisoning, regression) on a set of rows: all of them while ``B x V`` is at most
   ``ALL_ROWS_ELEMENTS`` (the float64 reference costs ~1.7 ms per row at V = 129280), otherwise
   the first and the last row, the rows at the power-of-two edges (``EDGE_ROWS``, when present)
   and ``SAMPLE_ROWS`` more drawn with the seed (the recipe's, so a REPRO replays the same rows).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.errors import InvalidArgument
from equiv.memory import WORKING_COPIES, call_budget
from equiv.ops.draft_topk.space import HUGE_SHAPE, batch_draws, vocab_draws
from equiv.options import DEFAULT_VOCAB
from equiv.validation import check_int

# DeepSeek-V3/V3.2, Qwen2 (embedding rows), a Qwen tokenizer's size, Llama-3, Llama-2
REAL_VOCABS = (129280, 151936, 151666, 128256, 32000)
SMALL_BATCHES = (1, 2, 3, 7, 8, 9, 31, 32, 33)
LARGE_BATCHES = (63, 64, 65, 127, 128, 129, 255, 256, 257, 1024)
EDGE_BATCHES = SMALL_BATCHES + LARGE_BATCHES
EDGE_ROWS = (31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257)
PADS = (1, 7, 129)
MAX_SHAPE_ELEMENTS = 2 ** 25             # B x V of one shape: 1024 x 32000 and 257 x 129280 fit
ALL_ROWS_ELEMENTS = 2 ** 24              # judge every row up to 129 rows at V = 129280
SAMPLE_ROWS = 32                         # seeded random rows on top of the always-judged ones


@dataclass(frozen=True)
class Shape:
    """One input shape of the plan: ``[batch, vocab]``, rows ``pad`` elements apart beyond V."""

    batch: int
    vocab: int
    pad: int = 0
    offset: int = 0

    @property
    def elements(self) -> int:
        return self.batch * self.vocab

    def __str__(self) -> str:
        return (f"[{self.batch}, {self.vocab}]" + (f" pad {self.pad}" if self.pad else "")
                + (f" offset {self.offset}" if self.offset else ""))


@dataclass(frozen=True)
class TolerancePlan:
    """The shapes of each (family, dtype) check; ``checks`` keeps the order they run in."""

    seed: int
    checks: tuple                        # ((family, dtype), (Shape, ...)), ...

    def __contains__(self, check) -> bool:
        return any(c == check for c, _ in self.checks)

    def shapes_for(self, family: str, dtype: str) -> tuple:
        return dict(self.checks)[(family, dtype)]

    def shapes(self) -> list:
        return [s for _, shapes in self.checks for s in shapes]

    @property
    def batches(self) -> tuple:
        return tuple(sorted({s.batch for s in self.shapes()}))

    @property
    def vocabs(self) -> tuple:
        return tuple(sorted({s.vocab for s in self.shapes()}))

    @property
    def elements(self) -> int:
        return sum(s.elements for s in self.shapes())

    def describe(self) -> str:
        shapes = self.shapes()
        padded = sum(1 for s in shapes if s.pad)
        return (f"{len(shapes)} shapes over {len(self.checks)} checks: B in "
                f"{{{', '.join(map(str, self.batches))}}}, V in {{{', '.join(map(str, self.vocabs))}}}, "
                f"{padded} padded, {self.elements / 1e6:.0f}M elements")

    def to_json(self) -> dict:
        return {"seed": self.seed,
                "checks": [{"family": f, "dtype": d, "shapes": [vars(s).copy() for s in shapes]}
                           for (f, d), shapes in self.checks]}


def _large_shapes(rng, vocabs, cap: int) -> list:
    """One shape per large batch size; every vocabulary but the first is placed with one of them
    (or, if none fits, with a small batch)."""
    pending = [int(v) for v in rng.permutation(vocabs[1:])]
    shapes = []
    for batch in (int(b) for b in rng.permutation(LARGE_BATCHES)):
        fits = [v for v in pending if batch * v <= cap]
        if fits:
            vocab = fits[0]
            pending.remove(vocab)
        else:
            anywhere = [v for v in vocabs if batch * v <= cap] or [min(vocabs)]
            vocab = int(rng.choice(anywhere))
        shapes.append((batch, vocab))
    shapes += [(int(rng.choice(SMALL_BATCHES)), v) for v in pending]
    return shapes


def reaches_huge(device: str, budget: str) -> bool:
    """Whether the gate's plan holds ``space.HUGE_SHAPE``: on a GPU in the full budget only (its
    build costs ~90 s of host time and 17 GB of float64 draws), and only when its one call fits
    the memory budget (``equiv.memory``: 4 GiB of bfloat16 logits times ``WORKING_COPIES``, so
    ``--max-gpu-memory 25GiB`` or more; the default 8 GiB leaves it out, and the coverage's
    largest shape says so)."""
    need = HUGE_SHAPE[0] * HUGE_SHAPE[1] * 2 * WORKING_COPIES
    return str(device).startswith("cuda") and budget == "full" and need <= call_budget(device)


def tolerance_plan(families, dtypes, *, seed: int = 0, vocab: int = DEFAULT_VOCAB,
                   max_shape_elements: int = MAX_SHAPE_ELEMENTS, huge: bool = False) -> TolerancePlan:
    """The shapes of every family x dtype check (module docstring, plan 1); ``huge`` adds the
    shape past 2**31 elements (the gate: CUDA, full budget)."""
    seed = check_int("seed", seed, min_value=0)
    vocab = check_int("vocab", vocab, min_value=1)
    checks = [(f, d) for d in dtypes for f in families]
    if not checks:
        return TolerancePlan(seed, ())
    rng = np.random.default_rng([seed, 0xC0])
    vocabs = (vocab,) + tuple(v for v in REAL_VOCABS if v != vocab)
    small = [int(b) for b in rng.permutation(SMALL_BATCHES)]
    n = len(checks)
    per_check: list[list] = [[] for _ in checks]
    pad_at = int(rng.integers(2))
    for i in range(max(n, len(small))):          # the main vocabulary, a small batch, every check
        pad = int(PADS[i % len(PADS)]) if (i + pad_at) % 2 else 0
        per_check[i % n].append(Shape(small[i % len(small)], vocab, pad))
    large = _large_shapes(rng, vocabs, max_shape_elements)
    offset, stride = int(rng.integers(n)), _stride(n, len(large))
    for j, (batch, v) in enumerate(large):        # spread over dtypes and families
        pad = 0 if (j + pad_at) % 2 else int(PADS[j % len(PADS)])
        per_check[(offset + j * stride) % n].append(Shape(batch, v, pad))
    dims, vocab_classes = _dimension_shapes(rng, max_shape_elements)
    for j, shape in enumerate(dims):
        per_check[(offset + 1 + j * stride) % n].append(shape)
    # every vocabulary class again on the finest dtype's spread family: a shape bug that moves a
    # little mass (a skipped half tile: 0.2 % of the softmax at V = 32064) fails float32's
    # tolerance but can hide in bfloat16's or in a peaked family's
    fine = _finest_check(checks)
    for shape in dims[:vocab_classes]:
        if shape not in per_check[fine]:
            per_check[fine].append(shape)
    for i, (family, dtype) in enumerate(checks):
        if family in DIMENSION_FAMILIES:
            per_check[i].append(Shape(*DIMENSION_FAMILIES[family]))
        if huge and (family, dtype) == ("gaussian", "bfloat16"):
            per_check[i].append(Shape(*HUGE_SHAPE))
    return TolerancePlan(seed, tuple((c, tuple(s)) for c, s in zip(checks, per_check)))


# families whose rows hold subnormal or underflowing probabilities, and the spread one: at every k past
# the first they also get a tiny vocabulary (``tiny_shapes``), where a k-wide kernel's edge cases live
TINY_V_FAMILIES = ("subnormal", "dominant", "huge", "gaussian")


def tiny_shapes(family: str, k: int, seed: int) -> tuple:
    """A tiny-vocabulary shape for ``family`` at ``k`` (V from k to 2k + 3, drawn; rows 1-9), or ()."""
    if family not in TINY_V_FAMILIES:
        return ()
    rng = np.random.default_rng([seed, k, TINY_V_FAMILIES.index(family), 0x71])
    return (Shape(int(rng.choice(SMALL_BATCHES[:6])), int(rng.integers(k, 2 * k + 4))),)


# family -> (batch, vocab) it always gets: every mask kind twice; 64 confident rows
DIMENSION_FAMILIES = {"masked": (14, 4097), "confident": (64, 32000)}
_OFFSETS = tuple(o for o in range(1, 16) if o % 4)      # never 16 bytes for float32 or half


_PRECISION = ("float64", "float32", "float16", "bfloat16")


def _finest_check(checks) -> int:
    """The check with the most precise dtype, the gaussian family if it is there."""
    def key(i):
        family, dtype = checks[i]
        rank = _PRECISION.index(dtype) if dtype in _PRECISION else len(_PRECISION)
        return rank, family != "gaussian", i
    return min(range(len(checks)), key=key)


def _dimension_shapes(rng, cap: int) -> tuple:
    """A shape per vocabulary class and per large-batch class (module docstring, plan 1), and how
    many of them, first, are the vocabulary classes'."""
    shapes = [(int(rng.choice(SMALL_BATCHES[:6])), v) for v in vocab_draws(rng).values()]
    vocab_classes = len(shapes)
    for batch in batch_draws(rng).values():
        small = (1025, 33) if batch > 4096 else (4097, 1025, 33)        # past 4096 rows: cheap V
        fits = [v for v in small if batch * v <= cap] or [1]
        shapes.append((batch, int(rng.choice(fits))))
    layouts = ({"offset": 1}, {"pad": 1}, {"pad": 1, "offset": 1})
    out = []
    for j, (batch, v) in enumerate(shapes):
        knobs = layouts[j % 3]
        out.append(Shape(batch, v, pad=int(rng.choice(PADS)) if "pad" in knobs else 0,
                         offset=int(rng.choice(_OFFSETS)) if "offset" in knobs else 0))
    return out, vocab_classes


def _stride(n: int, m: int) -> int:
    """A step coprime with n, about n / m, so that m placements land on m different checks."""
    step = max(1, n // max(m, 1))
    while np.gcd(step, n) != 1:
        step += 1
    return step


def judged_rows(batch: int, vocab: int, *, rows=None, seed: int = 0) -> np.ndarray:
    """Sorted row indices whose values ``compare`` judges (module docstring, plan 2).

    ``rows``: None (all rows up to ``ALL_ROWS_ELEMENTS``, else a sample), ``"all"``, an int (the
    always-judged rows plus that many seeded random ones) or a sequence of row indices."""
    batch = check_int("batch", batch, min_value=0)
    if rows is None:
        rows = "all" if batch * vocab <= ALL_ROWS_ELEMENTS else SAMPLE_ROWS
    if isinstance(rows, str):
        if rows != "all":
            raise InvalidArgument(f"rows={rows!r} is invalid: give 'all', a number of random rows "
                                  f"or a list of row indices")
        return np.arange(batch)
    if isinstance(rows, (int, np.integer)) and not isinstance(rows, bool):
        n = check_int("rows", rows, min_value=0)
        if batch == 0:
            return np.arange(0)
        always = np.unique([0, batch - 1] + [r for r in EDGE_ROWS if r < batch])
        rest = np.setdiff1d(np.arange(batch), always)
        drawn = np.random.default_rng([seed, 0x50]).choice(rest, size=min(n, rest.size), replace=False)
        return np.union1d(always, drawn).astype(np.int64)
    picked = np.unique(np.asarray(list(rows), dtype=np.int64))
    if picked.size and (picked[0] < 0 or picked[-1] >= batch):
        bad = picked[(picked < 0) | (picked >= batch)][0]
        raise InvalidArgument(f"rows holds {int(bad)}, outside [0, {batch}): give row indices of the batch")
    return picked
