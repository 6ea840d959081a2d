"""What the verify gate runs: the recipes of each budget and how many calls each gets.

Plan. Two kinds of case (``judge.Case``):

- *contract cases* (exact checks only): every family x draft kind (``probs``, ``onehot``) at a
  size from ``CONTRACT_SIZES`` -- n from 1 to 16, V from 1 to 262144 (past 2**17: Qwen, Gemma),
  tile edges (33, 1025, 4097), batches of 8 and (at V <= 8192) 67: rows past the last multiple of 64, padded
  (non-contiguous) inputs on every other case and a base offset on every third -- one call plus
  the replay;
- *statistical cases*, **drawn from the input space per seed** (space.py), not listed: each
  *slot* of ``_slots`` names what it is for (``Case.purpose``, ``space.PURPOSES``) and draws its
  values with its own generator ``[seed, _PLAN_SALT, slot]``:
  ``wide`` (a vocabulary past 2**17: Qwen 151936 / 152064, Gemma 256000 / 262144 or a prime),
  ``marginal`` (the realistic case with the most draws at a real vocabulary), ``deep`` (n 9..16
  with acceptance ~0.9 per position, so rows reach the late positions; 1025-4096 rows; and a
  second case at n = 16 with 6000-8192 rows at V 100..400, where the ``side`` score of
  lossless.py sees an acceptance test wrong from a late position on; ``wide`` a second case at
  Gemma's 256000 / 262144 or a prime past ``LARGEST_FROM``, n = 1, 300-512 rows in each of
  ``LARGEST_PARTS`` recipes that differ in ``part`` (fresh drafts: as the power case; on a GPU,
  where rows are cheap, ``LARGEST_PARTS_GPU`` of them): the first ``wide`` case drew 152064 at
  seed 0, and a residual drawn from its top 1024 tokens only past V = 160000 passed; with three
  parts on a GPU it passed the gate at seed 0 too, p = 6.9e-7 against a level of 4.8e-7),
  ``many rows`` (4097-8192 rows, a greedy drafter), ``every length`` (a greedy drafter at one n of
  each class 1, 2-3, 4-8, 9-16, 513-1024 rows at V 50-400: the sampled drafts reach every class
  in the other slots), one slot per family (tiny_q, neginf_zeros,
  bf16_rounded, ties, equal, disjoint, onehot_target), ``joint exact`` (V = 2 or 3, n 4..7,
  2**17+ rows of one problem: the block's joint law is enumerable, judge_more.py); every slot
  draws its layout (contiguous, padded, offset, both) and batches that are never multiples of
  64 where the slot draws them. Under the lossless law every row draws its own drafts from the
  draft law (what losslessness is a property of); under the token law the drafts are fixed per
  problem. Batches are capped by target elements per slot, so the quick plan fits the 2-core
  CPU budget of a pull request; ``full`` has four times the rows (nightly, or one GPU).
- the *independence* case (``_independence``): one problem, fixed drafts (every row has
  identical inputs), two calls with different generator seeds: judge_more.py's test of shared
  randomness between rows and between calls.

On a GPU each budget adds its *power case* (``POWER``): the realistic case at n = 3, V = 129280
in ``parts`` calls of ``rows`` rows -- under the lossless law ``parts`` recipes that differ only
in ``part`` (fresh drafts over the same problems: recipes.py), under the token law one recipe
called ``parts`` times. Draws are cheap there and the judge's score tests need them: a total
variation of 0.01 at V = 129280 is seen with power 0.95 only from ~10**5 rows on (docs/verify.md
has the calibration). A CPU run has no power case; the docs say what its budget detects.
Memory: a case is one call to the judge, but a call whose inputs (times ``equiv.memory``'s
working copies) outgrow the memory budget (``--max-gpu-memory``, 8 GiB by default; 1 GiB a call
on the CPU) is sent in windows of rows (calls.py): the same rows and draws in aggregate, so the
plan's power does not depend on the budget. The power case's 4096 rows (13.8 GiB of inputs) go
in 11 windows of 372-373 rows at 8 GiB; on the CPU the second ``wide`` case's calls in 7.

Seeds: case ``i`` of a plan with seed ``s`` uses the recipe seed ``s + i`` and generator seeds
from ``1000 * (s + i)`` on, so every case is replayable alone from its ``REPRO:`` line.
"""
from __future__ import annotations

import numpy as np

from equiv.ops.verify import space
from equiv.ops.verify.judge import LAWS, Case
from equiv.ops.verify.recipes import DRAFTS, FAMILIES, VerifyRecipe
from equiv.validation import check_choice, check_int

BUDGETS = ("quick", "full")
# (n, vocab) pairs the contract cases cycle through; V = 1 only where a family allows it.
CONTRACT_SIZES = ((1, 129280), (3, 33), (8, 1025), (2, 2), (5, 4097), (4, 129280), (1, 1000), (2, 1),
                  (16, 257), (9, 151936), (2, 262144), (12, 4099), (3, 256000), (10, 152064))
_NEEDS_TWO_TOKENS = ("disjoint", "tiny_q", "ties", "neginf_zeros")
# rows per call, calls: the power case of a GPU run (module docstring)
POWER = {"quick": (4096, 32), "full": (4096, 64)}
_POWER_RECIPE = dict(family="realistic", draft="probs", n=3, vocab=129280, problems=8)
_PLAN_SALT = 0x5EED
LARGEST_FROM = 160000                            # the second wide case's vocabularies: Gemma's, primes past this
LARGEST_PARTS = 3                                # ... in this many calls of its own drafts each
LARGEST_PARTS_GPU = 8                            # ... and on a GPU (module docstring)


def contract_cases(seed: int = 0, start: int = 0) -> list:
    cases, i = [], start
    for family in FAMILIES:
        for draft in DRAFTS:
            n, vocab = CONTRACT_SIZES[i % len(CONTRACT_SIZES)]
            if vocab < 2 and family in _NEEDS_TWO_TOKENS:
                vocab = 2
            recipe = VerifyRecipe(family=family, seed=seed + i, batch=67 if i % 3 == 1 and vocab <= 8192 else 8, n=n, vocab=vocab,
                                  problems=4, draft=draft, pad=3 * (i % 2), offset=5 * (i % 3 == 2))
            cases.append(Case(recipe, 1, 1000 * (seed + i)))
            i += 1
    return cases


def _slots(rng_of, scale: int, largest_parts: int) -> list:
    """The statistical slots of a plan: ``(purpose, recipe fields)`` each drawn from the space
    (space.py) with its own seeded generator ``rng_of(i)``; ``scale`` multiplies the rows (full);
    the second ``wide`` case comes in ``largest_parts`` calls."""
    out = []

    def add(purpose, elements_cap, rows, **fields):
        cap = max(fields.get("problems", 8), elements_cap // ((fields["n"] + 1) * fields["vocab"]))
        out.append((purpose, dict(batch=min(rows, cap) * scale, **fields)))

    r = rng_of(0)   # a vocabulary past 2**17 (Qwen, Gemma or a prime), short chains
    v = space.draw_real_vocab(r, past_2_17=True) if r.random() < 0.75 else space.draw_prime(r, 2 ** 17, 262144)
    add("wide", 2 ** 26, space.draw_batch(r, 64, 200), family="realistic", n=int(r.integers(1, 3)),
        vocab=v, problems=4, draft="probs", **space.draw_layout(r))
    r = rng_of(1)   # a real vocabulary: the realistic case with the most draws at that size
    v = space.draw_real_vocab(r) if r.random() < 0.75 else space.draw_vocab(r, 20000, 2 ** 17)
    add("marginal", 2 ** 28, 768, family="realistic", n=3, vocab=v, problems=8, draft="probs",
        **space.draw_layout(r))
    r = rng_of(2)   # long chains that rows survive: acceptance ~0.9 per position
    add("deep", 2 ** 25, space.draw_batch(r, 1025, 4096), family="realistic", n=int(r.integers(9, space.MAX_N + 1)),
        vocab=space.draw_vocab(r, 100, 600), problems=8, draft="probs",
        noise=round(float(r.uniform(0.1, 0.25)), 3), **space.draw_layout(r))
    r = rng_of(3)   # many rows with a remainder, a greedy drafter
    add("many rows", 2 ** 25, space.draw_batch(r, 4097, space.MAX_BATCH), family="realistic",
        n=int(r.integers(1, 6)), vocab=space.draw_vocab(r, 5, 300), problems=8, draft="onehot",
        **space.draw_layout(r))
    r = rng_of(4)
    add("family", 2 ** 25, 256, family="tiny_q", n=1, vocab=space.draw_real_vocab(r), problems=4, draft="probs")
    for i, (family, n_range, v_range, rows, problems) in enumerate((
            ("neginf_zeros", (2, 6), (500, 5000), 4096, 8), ("bf16_rounded", (2, 5), (1000, 8000), 2048, 8),
            ("ties", (1, 4), (17, 600), 4096, 8), ("equal", (2, 9), (100, 2000), 2048, 4),
            ("disjoint", (1, 3), (100, 2000), 2048, 4))):
        r = rng_of(5 + i)
        add("family", 2 ** 25, space.draw_batch(r, rows // 2, rows), family=family,
            n=int(r.integers(*n_range)), vocab=space.draw_vocab(r, *v_range), problems=problems,
            draft="onehot" if r.random() < 0.25 else "probs", **space.draw_layout(r))
    r = rng_of(10)  # temperature 0 at a real vocabulary
    add("family", 2 ** 25, space.draw_batch(r, 65, 127), family="onehot_target", n=int(r.integers(2, 9)),
        vocab=space.draw_real_vocab(r), problems=8, draft="probs", **space.draw_layout(r))
    r = rng_of(11)  # the whole joint law of the block, enumerable (judge_more.py)
    n, v = space.draw_exact_shape(r)
    add("joint exact", 2 ** 25, space.draw_batch(r, 2 ** 17, 2 ** 17 + 4000), family="realistic", n=n, vocab=v,
        problems=1, draft="probs", noise=round(float(r.uniform(0.4, 0.7)), 3), part=1)
    r = rng_of(12)  # the longest chain, many rows: acceptance wrong from a late position on
    add("deep", 2 ** 26, space.draw_batch(r, 6000, 8192), family="realistic", n=space.MAX_N,
        vocab=space.draw_vocab(r, 100, 400), problems=8, draft="probs",
        noise=round(float(r.uniform(0.1, 0.25)), 3), **space.draw_layout(r))
    r = rng_of(13)  # the largest vocabularies, one position, as many rows as a call there holds
    big = [x for x in space.PAST_2_17 if x > LARGEST_FROM]
    v = int(r.choice(big)) if r.random() < 0.75 else space.draw_prime(r, LARGEST_FROM, 262144)
    rows = space.draw_batch(r, 300, 512)
    fields = dict(family="realistic", n=1, vocab=v, problems=4, draft="probs", **space.draw_layout(r))
    for part in range(1, largest_parts + 1):    # fresh drafts in each part (recipes.py): independent rows
        add("wide", 2 ** 28, rows, part=part, **fields)
    r = rng_of(14)  # a greedy (one-hot) drafter at every class of chain length: 1, 2-3, 4-8, 9-16
    for low, high in ((1, 1), (2, 3), (4, 8), (9, space.MAX_N)):
        add("every length", 2 ** 23, space.draw_batch(r, 513, 1024), family="realistic",
            n=int(r.integers(low, high + 1)), vocab=space.draw_vocab(r, 50, 400), problems=8, draft="onehot",
            noise=round(float(r.uniform(0.1, 0.3)), 3), **space.draw_layout(r))
    return out


def _independence(rng, scale: int) -> dict:
    """Rows of identical inputs (one problem, drafts fixed) for the independence case."""
    return dict(family="realistic", n=int(rng.integers(2, 5)), vocab=space.draw_vocab(rng, 8, 300),
                batch=space.draw_batch(rng, 512, 1000) * scale, problems=1, draft="probs", drafts="fixed",
                **space.draw_layout(rng))


def statistical_cases(budget: str = "quick", seed: int = 0, start: int = 0, law: str = "lossless",
                      device: str = "cpu") -> list:
    """The statistical cases of a budget, drawn from the space per ``seed`` (module docstring),
    then the independence case, then on a GPU the power case."""
    budget = check_choice("budget", budget, BUDGETS)
    drafts = "fixed" if check_choice("law", law, LAWS) == "token" else "sampled"
    scale = 1 if budget == "quick" else 4

    def rng_of(i):
        return np.random.default_rng([seed, _PLAN_SALT, i])

    gpu = str(device).startswith("cuda")
    parts = LARGEST_PARTS_GPU if gpu else LARGEST_PARTS
    cases, first_part = [], seed
    for i, (purpose, fields) in enumerate(_slots(rng_of, scale, parts), start):
        part = fields.get("part", 0)
        first_part = seed + i if part <= 1 else first_part    # parts 2.. share part 1's problems
        if drafts == "fixed":
            fields.pop("part", None)
        recipe = VerifyRecipe(seed=first_part, drafts=drafts, **fields)
        cases.append(Case(recipe, 1, 1000 * (seed + i), statistical=True, purpose=purpose,
                          replay=part in (0, 1, parts) or drafts == "fixed"))   # the first and last parts'
                                                                                  # replays stand for them (Case)
    i = start + len(cases)
    cases.append(Case(VerifyRecipe(seed=seed + i, **_independence(rng_of(99), scale)), 2, 1000 * (seed + i),
                      purpose="independence"))
    if gpu:
        cases += power_cases(budget, seed, i + 1, law)
    return cases


def power_cases(budget: str = "quick", seed: int = 0, index: int = 0, law: str = "lossless",
                parts: int | None = None) -> list:
    """The power case of a GPU run (module docstring): case index ``index`` of its plan, in the
    budget's number of calls or ``parts``."""
    rows, calls = POWER[check_choice("budget", budget, BUDGETS)]
    parts = calls if parts is None else check_int("parts", parts, min_value=1)
    recipe = VerifyRecipe(seed=seed + index, batch=rows, **_POWER_RECIPE)
    if check_choice("law", law, LAWS) == "token":
        return [Case(recipe, parts, 1000 * (seed + index), statistical=True)]
    return [Case(recipe.with_(drafts="sampled", part=k + 1), 1, 1000 * (seed + index) + k, statistical=True,
                 replay=k in (0, parts - 1)) for k in range(parts)]     # the first and last replay (Case)


def plan(budget: str = "quick", seed: int = 0, parts=("contract", "statistics"), law: str = "lossless",
         device: str = "cpu") -> list:
    """The cases of a gate run: contract cases first (cheap, they stop a broken verifier early)."""
    cases = contract_cases(seed) if "contract" in parts else []
    if "statistics" in parts:
        cases += statistical_cases(budget, seed, start=len(FAMILIES) * len(DRAFTS), law=law, device=device)
    return cases
