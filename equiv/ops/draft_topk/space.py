"""The input space of the draft top-k, by named dimension: its classes, its draws, and the reach.

A family list is a catalogue; bugs live in dimensions (README, "The input space is searched").
This module names each dimension, the classes a value falls in, and the values the gate's plan
(``equiv.ops.draft_topk.coverage``) and the strategies (``strategies.py``) draw from them.

Plan
----
- ``vocab``: ``REAL_VOCABS`` (each with the model it comes from), powers of two, multiples of
  2**j (j >= 7) that are not powers, the +-1 neighbours of both, primes, half tiles
  (V % 128 == 64, as Phi-3's 32064: a kernel whose 128-wide tiles assume full halves) and
  V % 256 == 128 (a 256-wide tile's half), and sizes drawn from ``[2, VOCAB_RANGE]``.
  ``vocab_classes(v)`` names every class ``v`` is in.
- ``batch``: 1..``MAX_BATCH``, the neighbours of every power of two, tree-shaped batches
  (``TREE_BATCHES``: sequences x nodes, as a draft tree's rows are), batches past 4096 (a grid
  that caps its rows at 4096; ``batch_draws`` pairs them with a small V, cheap on a CPU), and on
  a GPU in the full budget one shape past 2**31 elements (``HUGE_SHAPE``, bfloat16): int32
  offsets overflow there.
- ``context``: ``equiv.run.context.CONTEXTS``, the calling context of each call (grad enabled,
  ``no_grad``, ``inference_mode``, a thread other than the main one; on a GPU a side stream).
  ``context_draws(rng, device, n)`` deals them to ``n`` calls so that every one the device offers
  occurs once ``n`` reaches their number; ``context_of(key, device)`` draws one for a call from a
  key (the property suite's: its input), so a replayed example gets the same context.
- ``layout``: ``layout_classes(recipe)``: contiguous rows, padded rows whose stride is (or is
  not) a multiple of 16 bytes, a base ``offset`` of 1-15 elements (not 16-byte aligned), and views
  (an offset and a padded stride at once: a slice of a larger buffer).
- ``mask``: ``MASKS``, where the -inf entries of a row go (``recipes.py`` builds them).
- ``confidence``: ``confidence.BANDS``, the top-1 probability bands of the ``confident`` family.
- ``history``: ``history_plan.KINDS``, the call histories the ``call_history`` property runs.
- ``reach(recipes, contexts)`` is what a run covered, per dimension; ``table_lines`` prints it.
"""
from __future__ import annotations

import math
import zlib

from equiv.ops.draft_topk.confidence import BAND_NAMES, row_bands
from equiv.options import K_CLASSES, is_prime, k_class
from equiv.run.calling import dealt
from equiv.run.context import CONTEXTS, available
from equiv.verdict import judged, judged_lines

# vocab_size of each model's published config.json (Hugging Face model cards)
REAL_VOCABS = {
    32000: "Llama-2, Mistral-7B-v0.1",
    32768: "Mistral-7B-v0.3, Mixtral-8x22B",
    50257: "GPT-2",
    65536: "Jamba",
    102400: "DeepSeek-V2, DeepSeek-LLM",
    128256: "Llama-3",
    129280: "DeepSeek-V3/V3.2",
    151666: "a Qwen2 tokenizer's size",
    151936: "Qwen2 (embedding rows)",
    256000: "Gemma, Gemma-2",
    32064: "Phi-3-mini",
    262144: "Gemma-3",
}
# The sizes the gate drew before issue 23: a kernel tuned to exactly these must not pass.
LISTED_VOCABS = (1, 2, 33, 1023, 1025, 4097, 8193, 32000, 129280, 151936, 151666, 128256)
VOCAB_RANGE = 262144
MAX_BATCH = 8192
TREE_BATCHES = {1280: "256 sequences x 5 nodes", 320: "64 x 5", 96: "32 x 3", 60: "4 x 15"}
HUGE_SHAPE = (16385, 131072)                     # 2**31 + 2**17 elements, 4 GiB in bfloat16
MASKS = ("tail", "front", "inside", "interleaved", "first_only", "last_only", "one_left")
ALIGN_BYTES = 16


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _multiple(n: int) -> bool:                  # a multiple of 2**7 that is not a power of two
    return n >= 128 and n % 128 == 0 and not _pow2(n)


def vocab_classes(v: int) -> tuple:
    out = []
    if v in REAL_VOCABS:
        out.append("real")
    if _pow2(v):
        out.append("power of two")
    elif _pow2(v - 1) or _pow2(v + 1):
        out.append("power of two +-1")
    if _multiple(v):
        out.append("multiple of 2**j")
    elif _multiple(v - 1) or _multiple(v + 1):
        out.append("multiple of 2**j +-1")
    if is_prime(v):
        out.append("prime")
    if v % 128 == 64:
        out.append("V % 128 == 64")
    if v % 256 == 128:
        out.append("V % 256 == 128")
    if v not in LISTED_VOCABS:
        out.append("unlisted")
    return tuple(out) or ("other",)


def batch_classes(b: int) -> tuple:
    out = ["1" if b == 1 else "2-1024" if b <= 1024 else "past 1024" if b <= 4096 else "past 4096"]
    if _pow2(b) and b > 1:
        out.append("power of two")
    elif b > 2 and (_pow2(b - 1) or _pow2(b + 1)):
        out.append("power of two +-1")
    if b in TREE_BATCHES:
        out.append("tree")
    return tuple(out)


def layout_classes(recipe) -> tuple:
    size = {"float32": 4}.get(recipe.dtype, 2)
    out = []
    if recipe.pad:
        stride = (recipe.vocab + recipe.pad) * size
        out.append("row stride % 16 B != 0" if stride % ALIGN_BYTES else "padded rows (16 B stride)")
    if recipe.offset:
        out.append("base not 16 B aligned" if (recipe.offset * size) % ALIGN_BYTES else "base offset")
    if recipe.pad and recipe.offset:
        out.append("view into a larger buffer")
    return tuple(out) or ("contiguous",)


def vocab_draws(rng, cap: int = VOCAB_RANGE) -> dict:
    """One vocabulary of each class (seeded), each at most ``cap``: {class: V}."""
    unlisted_real = [v for v in REAL_VOCABS if v not in LISTED_VOCABS and v <= cap]
    j = int(rng.integers(10, int(math.log2(cap)) + 1))
    power = 2 ** j
    mult = int(rng.choice([3, 5, 7, 125])) * 2 ** int(rng.integers(7, 12))
    while mult > cap:
        mult //= 2
    mult = mult if _multiple(mult) else 3 * 128
    prime = int(rng.integers(1024, cap))
    while not is_prime(prime):
        prime += 1
    half = 128 * int(rng.integers(1, min(cap, 2 ** 17) // 128)) + 64      # V % 128 == 64 (not 32064)
    half256 = 256 * int(rng.integers(1, min(cap, 2 ** 17) // 256)) + 128   # V % 256 == 128
    return {"real": int(rng.choice(unlisted_real)) if unlisted_real else 32000,
            "power of two": power, "power of two +-1": power + int(rng.choice([-1, 1])),
            "multiple of 2**j": mult, "multiple of 2**j +-1": mult + int(rng.choice([-1, 1])),
            "prime": prime, "range": int(rng.integers(2, cap + 1)),
            "V % 128 == 64": 32064 if 32064 <= cap and rng.integers(2) else half,
            "V % 256 == 128": half256}


def batch_draws(rng) -> dict:
    """One batch of each large class (seeded): {class: B}."""
    j = int(rng.integers(11, 13))                # 2048 or 4096
    return {"tree": 1280, "power of two": 2 ** j, "power of two +-1": 2 ** j + int(rng.choice([-1, 1])),
            "range": int(rng.integers(1025, 4097)), "past 4096": int(rng.integers(4097, MAX_BATCH + 1))}


def context_draws(rng, device, n: int) -> list:
    """The calling contexts of ``n`` calls (module docstring): each context ``device`` offers in
    a seeded order, then again, so that every one occurs once ``n`` reaches their number."""
    return dealt(rng, list(available(device)), n)


def context_of(key, device) -> str:
    """One calling context for the call whose input ``key`` describes (a string or bytes):
    the same key draws the same context, so a replayed example is called as it was."""
    offered = available(device)
    data = key if isinstance(key, bytes) else str(key).encode()
    return offered[zlib.crc32(data) % len(offered)]


# every class of each dimension, in order (the coverage's ``judged`` table)
UNIVERSE = {"vocab": ("real", "power of two", "power of two +-1", "multiple of 2**j", "multiple of 2**j +-1", "prime",
                      "V % 128 == 64", "V % 256 == 128", "unlisted"),
            "batch": ("1", "2-1024", "past 1024", "past 4096", "power of two", "power of two +-1", "tree"),
            "layout": ("contiguous", "padded rows (16 B stride)", "row stride % 16 B != 0", "base offset",
                       "base not 16 B aligned", "view into a larger buffer"),
            "mask": MASKS, "confidence": BAND_NAMES, "context": CONTEXTS, "k": tuple(K_CLASSES)}


def reach(recipes, contexts=(), ks=()) -> dict:
    """The classes a set of recipes (called in ``contexts``, at the k values ``ks``) covered, per
    dimension (sorted lists), and ``judged``: where each class was judged (``equiv.verdict.judged``;
    the draft step's judge compares with the float64 reference, so every class reached is judged
    by exact checks only, and the others are not reached)."""
    dims: dict = {"vocab": set(), "batch": set(), "layout": set(), "mask": set(), "confidence": set(),
                  "context": set(c for c in contexts if c)}
    shapes = set()
    for r in recipes:
        dims["vocab"].update(vocab_classes(r.vocab))
        dims["batch"].update(batch_classes(r.batch))
        dims["layout"].update(layout_classes(r))
        shapes.add((r.batch, r.vocab))
        if r.family == "neginf_pad":
            dims["mask"].add("tail")
        if r.family == "masked":
            dims["mask"].update(MASKS if r.mask == "mixed" and r.batch >= len(MASKS) else
                                mask_kinds(r)[: r.batch])
        if r.family == "confident":
            dims["confidence"].update(row_bands(r))
    out = {k: sorted(v) for k, v in dims.items()}
    if ks:
        out["k"] = sorted({k_class(k) for k in ks}, key=lambda c: (c not in K_CLASSES, list(K_CLASSES).index(c)
                                                                   if c in K_CLASSES else 0))
        out["k values"] = sorted(set(ks))
    largest = max(shapes, key=lambda s: s[0] * s[1], default=None)
    out["largest shape"] = "none" if largest is None else (
        f"[{largest[0]}, {largest[1]}] ({largest[0] * largest[1] / 2 ** 31:.3g} x 2**31 elements)")
    universe = {d: c for d, c in UNIVERSE.items() if d != "k" or ks}
    out["judged"] = judged({}, {d: set(out[d]) for d in universe}, universe)
    return out


def mask_kinds(recipe) -> tuple:
    """The mask kind of each row of a ``masked`` recipe (``mixed``: cycled from the seed)."""
    if recipe.mask != "mixed":
        return (recipe.mask,) * recipe.batch
    return tuple(MASKS[(b + recipe.seed) % len(MASKS)] for b in range(recipe.batch))


def table_lines(coverage: dict) -> list:
    """The coverage table, one line per dimension (the console summary prints these): a dimension
    of ``judged`` as where each class was judged, the other entries as they are."""
    table = coverage.get("judged", {})
    lines = []
    for dim, classes in coverage.items():
        if dim in table or dim == "judged":
            continue
        shown = classes if isinstance(classes, str) else ", ".join(map(str, classes)) or "none"
        lines.append(f"{dim:<16} {shown}")
    return lines + judged_lines(table, 17)
