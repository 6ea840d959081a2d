"""The input space of the verifier, by named dimension: its classes, its draws, and the reach.

A family list is a catalogue; bugs live in dimensions (README, "The input space is searched"), as
for the draft step (``equiv/ops/draft_topk/space.py``). This module names each dimension of a
verifier's inputs, the classes a value falls in, the seeded draws the statistical plan
(``plans.py``) takes from them, and what a set of cases reached (``reach``), which the gate
prints and writes as its coverage table.

Plan
----
- ``n`` (chain length): 1..16. Classes ``1``, ``2-3``, ``4-8``, ``9-16``. A chain is only judged
  as deep as rows reach: ``reach`` also reports the deepest position that at least
  ``DEEP_ROWS`` rows of the statistical cases reach in expectation (``sum_rows prod alpha``,
  from the exact acceptance probabilities of each row's own drafts).
- ``vocab``: ``REAL_VOCABS`` (each with the model it comes from; Qwen 151936 / 152064, Gemma
  256000 / 262144 included), sizes past 2**17, multiples of 128, multiples of 64 that are not of
  128, sizes that are not multiples of 64, primes, powers of two, and the small vocabularies
  whose whole joint law is enumerable (``V**(n+1) <= EXACT_CELLS``).
- ``batch``: 1..``MAX_BATCH``; classes by size (1, 2-63, 64-1024, past 1024, past 4096) and by
  remainder (a multiple of 64, or rows after the last multiple of 64). A case of ``SPLIT_FROM``
  rows or more also reaches 1 and 2-63 with the exact checks (shape, type, layout, input
  writes, support): its last row is a call alone, the 2-4 before it another (draws.py
  ``call_windows``). Their rows join the case's statistics, but one row a case gives a law
  wrong only at batch 1 no power: that class is "exact checks only" in the coverage.
- ``layout`` (``VerifyRecipe.pad`` / ``offset``): contiguous, padded rows (every input,
  the draft tokens included, a slice of a wider buffer: non-contiguous), a base offset (odd
  offsets: not 16-byte aligned), both (a view into a larger buffer).
- ``draft``: the draft kind (``probs``: drafts with their probabilities; ``onehot``: a greedy
  drafter, ``draft_probs = None``) and the drafts' mode (``sampled`` per row from the draft law,
  or ``fixed`` per problem: every row of a problem then has identical inputs).
- ``family``: ``recipes.FAMILIES``; ``purpose``: what a statistical case is for (``PURPOSES``).
- ``table_lines(coverage)``: the console's table (``GateResult.coverage_lines``).

``draw_*`` take a ``numpy.random.Generator``: the plan seeds one per case, so each seed is
another point of the space and every case is replayable from its recipe alone.
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify.laws import row_alpha
from equiv.ops.verify.recipes import FAMILIES
from equiv.options import is_prime
from equiv.run.calling import SPLIT_FROM
from equiv.verdict import judged, judged_lines

# vocab_size of each model's published config.json (model cards); the draft step's list and Qwen2.5's
REAL_VOCABS = {
    32000: "Llama-2, Mistral-7B-v0.1",
    32064: "Phi-3",
    32768: "Mistral-7B-v0.3",
    50257: "GPT-2",
    102400: "DeepSeek-V2",
    128256: "Llama-3",
    129280: "DeepSeek-V3/V3.2",
    151646: "Qwen1.5 tokenizer",
    151936: "Qwen2 (embedding rows)",
    152064: "Qwen2.5-7B/72B (embedding rows)",
    256000: "Gemma, Gemma-2",
    262144: "Gemma-3",
}
PAST_2_17 = tuple(v for v in REAL_VOCABS if v > 2 ** 17)
MAX_N = 16
MAX_BATCH = 8192
EXACT_CELLS = 4096               # V**(n+1) at most: the joint law of the block enumerable
DEEP_ROWS = 100                  # a position counts as judged when this many rows reach it
PURPOSES = ("marginal", "deep", "wide", "many rows", "joint exact", "independence", "family", "every length")
ALIGN_BYTES = 16


def n_classes(n: int) -> tuple:
    return ("1",) if n == 1 else ("2-3",) if n <= 3 else ("4-8",) if n <= 8 else ("9-16",)


def vocab_classes(v: int, n: int | None = None) -> tuple:
    out = []
    if v in REAL_VOCABS:
        out.append("real")
    if v > 2 ** 17:
        out.append("past 2**17")
    if v & (v - 1) == 0:
        out.append("power of two")
    if v % 128 == 0:
        out.append("multiple of 128")
    elif v % 64 == 0:
        out.append("multiple of 64, not of 128")
    else:
        out.append("not a multiple of 64")
    if is_prime(v):
        out.append("prime")
    if n is not None and v ** (n + 1) <= EXACT_CELLS:
        out.append("joint law enumerable")
    return tuple(out)


def batch_classes(b: int) -> tuple:
    size = "1" if b == 1 else "2-63" if b < 64 else "64-1024" if b <= 1024 else (
        "past 1024" if b <= 4096 else "past 4096")
    return (size, "multiple of 64" if b % 64 == 0 else "rows after the last multiple of 64")


def layout_classes(recipe) -> tuple:
    out = []
    if recipe.pad:
        out.append("padded (non-contiguous)")
    if recipe.offset:
        out.append("base offset, not 16 B aligned" if recipe.offset * 4 % ALIGN_BYTES else "base offset")
    if recipe.pad and recipe.offset:
        out.append("view into a larger buffer")
    return tuple(out) or ("contiguous",)


def draft_classes(recipe) -> tuple:
    return (f"{recipe.draft} drafts", f"{recipe.drafts} per {'row' if recipe.drafts == 'sampled' else 'problem'}")


# ---- draws (each takes a seeded numpy Generator) -------------------------------------------------

def draw_real_vocab(rng, past_2_17: bool = False) -> int:
    pool = PAST_2_17 if past_2_17 else tuple(REAL_VOCABS)
    return int(rng.choice(pool))


def draw_prime(rng, low: int, high: int) -> int:
    v = int(rng.integers(low, high))
    while not is_prime(v):
        v += 1
    return v


def draw_vocab(rng, low: int, high: int) -> int:
    """A vocabulary in ``[low, high)`` of a drawn class: a prime, not a multiple of 64, an odd
    multiple of 64, or a multiple of 128 (each a quarter of the draws)."""
    kind = int(rng.integers(4))
    if kind == 0:
        return draw_prime(rng, low, high)
    v = int(rng.integers(low, high))
    if kind == 1:
        return v + (v % 64 == 0)
    if kind == 2:
        return max(64, (v // 128) * 128 + 64)
    return max(128, (v // 128) * 128)


def draw_batch(rng, low: int, high: int, remainder: bool = True) -> int:
    """A batch in ``[low, high]``; with ``remainder`` never a multiple of 64 (rows past the last one)."""
    b = int(rng.integers(low, high + 1))
    if remainder and b % 64 == 0:
        b += int(rng.integers(1, 64))
    return b


def draw_layout(rng) -> dict:
    """``{"pad": ..., "offset": ...}``: contiguous, padded, offset or both (a quarter each)."""
    kind = int(rng.integers(4))
    pad = int(rng.choice([1, 3, 7, 61])) if kind in (1, 3) else 0
    offset = int(rng.choice([1, 3, 5, 13])) if kind in (2, 3) else 0
    return {"pad": pad, "offset": offset}


def draw_exact_shape(rng) -> tuple:
    """``(n, V)`` with ``n >= 4`` and a joint law of at most 256 cells: (2, 4..7) or (3, 4)."""
    pairs = ((4, 2), (5, 2), (6, 2), (7, 2), (4, 3), (4, 3))
    return pairs[int(rng.integers(len(pairs)))]


# ---- reach ------------------------------------------------------------------------------------------

def deepest_reached(cases) -> int:
    """The deepest position ``j`` (0-based; ``n`` the bonus) that at least ``DEEP_ROWS`` rows of
    the statistical cases reach in expectation (``sum_rows prod_{i<j} alpha_i``)."""
    deepest = -1
    for c in cases:
        if not c.statistical:
            continue
        reach = np.cumprod(row_alpha(c.recipe), axis=1).sum(0) * c.calls       # rows past position j
        ok = np.flatnonzero(reach >= DEEP_ROWS)
        deepest = max(deepest, int(ok[-1]) + 1 if ok.size else 0)
    return deepest


N_CLASSES = ("1", "2-3", "4-8", "9-16")
# every class of each data dimension, in order (the coverage's ``judged`` table)
UNIVERSE = {"n": N_CLASSES,
            "vocab": ("real", "past 2**17", "power of two", "multiple of 128", "multiple of 64, not of 128",
                      "not a multiple of 64", "prime", "joint law enumerable"),
            "batch": ("1", "2-63", "64-1024", "past 1024", "past 4096", "multiple of 64",
                      "rows after the last multiple of 64"),
            "layout": ("contiguous", "padded (non-contiguous)", "base offset, not 16 B aligned", "view into a larger buffer"),
            "draft": ("probs drafts", "onehot drafts", "sampled per row", "fixed per problem"),
            "draft x n": tuple(f"{d} at n {c}" for d in ("probs", "onehot") for c in N_CLASSES)}


def _classes(r) -> dict:
    return {"n": n_classes(r.n), "vocab": vocab_classes(r.vocab, r.n), "batch": batch_classes(r.batch),
            "layout": layout_classes(r), "draft": draft_classes(r),
            "draft x n": tuple(f"{r.draft} at n {c}" for c in n_classes(r.n)), "family": (r.family,)}


def reach(cases) -> dict:
    """The classes a plan's cases covered, per dimension (sorted lists), the largest input, and
    ``judged``: where each class was judged (``equiv.verdict.judged``: by a statistical case, by
    exact checks only -- the contract cases --, or not at all)."""
    dims: dict = {"n": set(), "vocab": set(), "batch": set(), "layout": set(), "draft": set(),
                  "family": set(), "purpose": set()}
    seen_stat: dict = {}
    seen_exact: dict = {}
    largest = None
    for c in cases:
        r = c.recipe
        for dim, got in _classes(r).items():
            if dim in dims:
                dims[dim].update(got)
            (seen_stat if c.statistical else seen_exact).setdefault(dim, set()).update(got)
        if r.batch >= SPLIT_FROM:                # its last rows go as calls of 1 and 2-4 rows (draws.py):
            dims["batch"].update(("1", "2-63"))  # the exact checks see them; a row or four give the
            seen_exact.setdefault("batch", set()).update(("1", "2-63"))   # statistics no power of their own
        if getattr(c, "purpose", ""):
            dims["purpose"].add(c.purpose)
        size = r.batch * (r.n + 1) * r.vocab
        if largest is None or size > largest[0]:
            largest = (size, r)
    out = {k: sorted(v) for k, v in dims.items()}
    stat = [c for c in cases if c.statistical]
    out["n values"] = sorted({c.recipe.n for c in cases})
    out["vocab values"] = sorted({c.recipe.vocab for c in cases})
    out["batch values"] = sorted({c.recipe.batch for c in cases})
    out["deepest position judged"] = (f"{deepest_reached(stat)} (>= {DEEP_ROWS} rows reach it, "
                                      f"statistical cases)" if stat else "none (no statistical case)")
    if largest:
        r = largest[1]
        out["largest input"] = f"target_probs [{r.batch}, {r.n + 1}, {r.vocab}] ({largest[0] / 2 ** 20:.1f} M elements)"
    out["judged"] = judged(seen_stat, seen_exact, {**UNIVERSE, "family": FAMILIES})
    return out


def table_lines(coverage: dict) -> list:
    """The coverage table, one line per dimension (the gate's console summary prints these): a
    dimension of ``judged`` as where each class was judged, the other entries as they are."""
    table = coverage.get("judged", {})
    width = max((len(k) for k in coverage), default=0) + 2
    return [f"{dim:<{width}}{v if isinstance(v, str) else ', '.join(map(str, v)) or 'none'}"
            for dim, v in coverage.items() if dim not in table and dim != "judged"] + judged_lines(table, width)
