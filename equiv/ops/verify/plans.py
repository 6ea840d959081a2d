"""What the verify gate runs: the recipes of each budget and how many calls each gets.

Plan. Two kinds of case (``judge.Case``):

- *contract cases* (exact checks only): every family x draft kind (``probs``, ``onehot``) at a
  size from ``CONTRACT_SIZES`` -- n from 1 to 8, V from 1 to 129280, tile edges (33, 1025, 4097),
  padded (non-contiguous) inputs on every other case -- small batches, one call plus the replay;
- *statistical cases*: batches that copy a few problems many times, so one call yields hundreds
  of draws of each (p, q, d) triple; their outputs also feed the acceptance and distribution
  tests (under the lossless law with ``drafts=sampled``: every row draws its own drafts from the
  draft law, which is what losslessness is a property of). ``quick`` fits the 2-core CPU budget of a pull request (V = 129280 for the realistic and
  tiny-q cases, smaller V for the bulk of the draws); ``full`` draws 2**15+ tokens at V = 129280
  (nightly, or one GPU: docs/verify.md has its power).

Under the lossless law the drafts of a row are drawn once per recipe (recipes.py), so a second
call would repeat them: a lossless case makes one call of ``batch * calls`` rows instead (capped
at ``2**28`` target elements; the realistic V = 129280 quick case keeps its 384 rows).

On a GPU each budget adds its *power case* (``POWER``): the realistic case at n = 3, V = 129280
in ``parts`` calls of ``rows`` rows -- under the lossless law ``parts`` recipes that differ only
in ``part`` (fresh drafts over the same problems: recipes.py), under the token law one recipe
called ``parts`` times. Draws are cheap there and the judge's score tests need them: a total
variation of 0.01 at V = 129280 is seen with power 0.95 only from ~10**5 rows on (docs/verify.md
has the calibration). A CPU run has no power case; the docs say what its budget detects.

Seeds: case ``i`` of a plan with seed ``s`` uses the recipe seed ``s + i`` and generator seeds
from ``1000 * (s + i)`` on, so every case is replayable alone from its ``REPRO:`` line.
"""
from __future__ import annotations

from equiv.ops.verify.judge import LAWS, Case
from equiv.ops.verify.recipes import DRAFTS, FAMILIES, VerifyRecipe
from equiv.validation import check_choice, check_int

BUDGETS = ("quick", "full")
_MAX_ELEMENTS = 2 ** 28          # target_probs of one lossless case: 1 GiB of float32
# (n, vocab) pairs the contract cases cycle through; V = 1 only where a family allows it.
CONTRACT_SIZES = ((1, 129280), (3, 33), (8, 1025), (2, 2), (5, 4097), (4, 129280), (1, 1000), (2, 1))
_NEEDS_TWO_TOKENS = ("disjoint", "tiny_q", "ties", "neginf_zeros")
# rows per call, calls: the power case of a GPU run (module docstring)
POWER = {"quick": (4096, 32), "full": (4096, 64)}
_POWER_RECIPE = dict(family="realistic", draft="probs", n=3, vocab=129280, problems=8)

# family, draft, n, vocab, batch, problems, calls: the statistical cases of each budget.
_STATISTICAL = {
    "quick": (
        ("realistic", "probs", 3, 129280, 384, 8, 2),
        ("tiny_q", "probs", 1, 129280, 256, 4, 1),
        ("realistic", "onehot", 2, 4097, 4096, 8, 2),
        ("neginf_zeros", "probs", 2, 1025, 4096, 8, 2),
        ("bf16_rounded", "probs", 2, 4097, 2048, 8, 2),
        ("ties", "probs", 1, 33, 4096, 8, 1),
        ("equal", "probs", 2, 1025, 2048, 4, 1),
        ("disjoint", "probs", 1, 1025, 2048, 4, 1),
        ("onehot_target", "probs", 3, 129280, 64, 8, 1),
    ),
    "full": (
        ("realistic", "probs", 3, 129280, 4096, 16, 8),
        ("realistic", "onehot", 2, 129280, 4096, 16, 4),
        ("tiny_q", "probs", 1, 129280, 2048, 8, 2),
        ("neginf_zeros", "probs", 2, 129280, 2048, 8, 2),
        ("bf16_rounded", "probs", 2, 129280, 2048, 8, 2),
        ("ties", "probs", 1, 129280, 2048, 8, 2),
        ("equal", "probs", 2, 129280, 2048, 8, 2),
        ("disjoint", "probs", 1, 129280, 2048, 8, 2),
        ("onehot_target", "onehot", 3, 129280, 512, 8, 1),
    ),
}


def contract_cases(seed: int = 0, start: int = 0) -> list:
    cases, i = [], start
    for family in FAMILIES:
        for draft in DRAFTS:
            n, vocab = CONTRACT_SIZES[i % len(CONTRACT_SIZES)]
            if vocab < 2 and family in _NEEDS_TWO_TOKENS:
                vocab = 2
            recipe = VerifyRecipe(family=family, seed=seed + i, batch=8, n=n, vocab=vocab, problems=4,
                                  draft=draft, pad=3 * (i % 2))
            cases.append(Case(recipe, 1, 1000 * (seed + i)))
            i += 1
    return cases


def statistical_cases(budget: str = "quick", seed: int = 0, start: int = 0, law: str = "lossless",
                      device: str = "cpu") -> list:
    budget = check_choice("budget", budget, BUDGETS)
    drafts = "fixed" if check_choice("law", law, LAWS) == "token" else "sampled"
    cases = []
    for i, (family, draft, n, vocab, batch, problems, calls) in enumerate(_STATISTICAL[budget], start):
        if drafts == "sampled":                  # drafts are per row, not per call: one call, more rows
            rows = min(batch * calls, max(batch, _MAX_ELEMENTS // ((n + 1) * vocab)))
            batch, calls = rows - rows % problems, 1
        recipe = VerifyRecipe(family=family, seed=seed + i, batch=batch, n=n, vocab=vocab,
                              problems=problems, draft=draft, drafts=drafts)
        cases.append(Case(recipe, calls, 1000 * (seed + i), statistical=True))
    if str(device).startswith("cuda"):
        cases += power_cases(budget, seed, start + len(_STATISTICAL[budget]), law)
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
    return [Case(recipe.with_(drafts="sampled", part=k + 1), 1, 1000 * (seed + index) + k, statistical=True)
            for k in range(parts)]


def plan(budget: str = "quick", seed: int = 0, parts=("contract", "statistics"), law: str = "lossless",
         device: str = "cpu") -> list:
    """The cases of a gate run: contract cases first (cheap, they stop a broken verifier early)."""
    cases = contract_cases(seed) if "contract" in parts else []
    if "statistics" in parts:
        cases += statistical_cases(budget, seed, start=len(FAMILIES) * len(DRAFTS), law=law, device=device)
    return cases
