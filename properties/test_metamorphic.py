"""Metamorphic properties: the subject against itself on inputs whose answers are related exactly.

Test plan (each relation in ``equiv.properties.relations``; none asks for the reference's top-k, so a
path that is wrong the same way twice passes here and fails the equivalence properties)
- ``bounds``: on healthy rows 1/V <= p_top1 <= 1, every p in [0, 1], the top-k sums to <= 1.
- ``row_independence``: answering a subset of the rows, reordered and made contiguous
  (``index_select``), gives each row the answer it had inside the full, possibly strided batch.
- ``poison_never_leaks``: inserting NaN / +inf / two +inf / all -inf rows into a healthy batch
  leaves every healthy row's answer unchanged.
- ``shift_invariance``: ``f(x + c) == f(x)`` for shifts exact on the dtype's grid (``snap``),
  up to |c| = 4096 in float32 (127 in bfloat16): a missing max-subtraction overflows here.
- ``vocab_permutation``: permuting the columns permutes the answer (reverse, roll, random).
- ``monotonicity``: raising the top logit keeps it on top and does not lower p_top1; raising a
  lower logit half-way to the max neither moves the top nor raises p_top1.
Allowance: two answers agree when their indices are equally good (exact probabilities within
the near-tie width ``rtol``) and their probabilities differ by at most the sum of both
tolerance allowances. Inputs come from the healthy families (poison is added explicitly).
"""
from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

from equiv.ops.draft_topk.recipes import HEALTHY_FAMILIES
from equiv.properties import relations as rel
from equiv.ops.draft_topk.strategies import exact_shifts, permutations

FAMILIES = HEALTHY_FAMILIES + ("neginf_pad",)


def _expect(suite, problem, what):
    if problem is not None:
        suite.fail(f"{what}: {problem}")


def test_bounds(subject, suite):
    def bounds(recipe):
        x = suite.build(recipe)
        out = suite.call(x)
        _expect(suite, rel.bounds_problem(out, rel.reference_of(x, suite.k), suite.tolerance(recipe.dtype)),
                f"recipe {recipe}")

    suite.run(bounds, weight=0.5, recipe=suite.recipes(FAMILIES + ("poison_mix",)))


def test_row_independence(subject, suite):
    def row_independence(recipe, rows_seed):
        x = suite.build(recipe)
        rows = np.random.default_rng(rows_seed).permutation(recipe.batch)[: max(1, recipe.batch // 2 + 1)]

        a = suite.call(x, what="the full batch")
        b = suite.call(x.index_select(0, torch.as_tensor(rows, device=x.device)), what="the row subset")
        ref = rel.reference_of(x, suite.k)
        _expect(suite, rel.disagreement(a, b, ref, suite.tolerance(recipe.dtype), rows=rows,
                                        b_rows=np.arange(rows.size)),
                f"recipe {recipe}: rows {rows.tolist()} answered alone differ from the full batch")

    suite.run(row_independence, weight=0.5, recipe=suite.recipes(FAMILIES, min_batch=2),
              rows_seed=st.integers(0, 2 ** 31 - 1))


def test_poison_never_leaks(subject, suite):
    def poison_never_leaks(recipe, n_poison, seed):
        x = suite.build(recipe)
        y, healthy = rel.poison_rows(x, seed, n_poison)
        a = suite.call(x, what="the healthy batch")
        b = suite.call(y, what="the batch with poisoned rows")
        ref = rel.reference_of(x, suite.k)
        _expect(suite, rel.disagreement(a, b, ref, suite.tolerance(recipe.dtype), b_rows=healthy),
                f"recipe {recipe} with {n_poison} poisoned rows inserted (seed {seed}): a healthy "
                f"row's answer changed")

    suite.run(poison_never_leaks, weight=0.5, recipe=suite.recipes(FAMILIES, max_batch=9),
              n_poison=st.integers(1, 4), seed=st.integers(0, 2 ** 31 - 1))


def test_shift_invariance(subject, suite):
    def shift_invariance(recipe_and_shift):
        recipe, c = recipe_and_shift
        x = rel.snap(suite.build(recipe), recipe.dtype)
        a = suite.call(x, what="x")
        b = suite.call(x + c, what="x + c")
        _expect(suite, rel.disagreement(a, b, rel.reference_of(x, suite.k), suite.tolerance(recipe.dtype)),
                f"recipe {recipe} snapped to the exact grid, shift c={c}: f(x + c) differs from f(x)")

    # snap clips to the exact grid (|x| <= 4096 in float32): a huge shift would only clip the row flat
    cases = suite.recipes(FAMILIES, huge_shifts=False).flatmap(
        lambda r: st.tuples(st.just(r), exact_shifts(r.dtype)))
    suite.run(shift_invariance, weight=0.5, recipe_and_shift=cases)


def test_vocab_permutation(subject, suite):
    def vocab_permutation(recipe, how):
        x = suite.build(recipe)
        perm = rel.permutation(how[0], how[1], recipe.vocab)
        a = suite.call(x, what="x")
        b = suite.call(rel.permute_vocab(x, perm), what="x[:, perm]")
        _expect(suite, rel.disagreement(a, b, rel.reference_of(x, suite.k), suite.tolerance(recipe.dtype),
                                        b_index_map=perm),
                f"recipe {recipe}, permutation {how[0]} (seed {how[1]}): f(x[:, perm]) is not f(x) permuted")

    suite.run(vocab_permutation, weight=0.5, recipe=suite.recipes(FAMILIES), how=permutations())


def test_monotonicity(subject, suite):
    def monotonicity(recipe, mode, seed):
        x = suite.build(recipe)
        ref = rel.reference_of(x, suite.k)
        y, raised = rel.raise_logits(x, ref, mode, seed)
        a = suite.call(x, what="x")
        b = suite.call(y, what="x with one logit raised per row")
        _expect(suite, rel.monotonicity_problem(a, b, rel.reference_of(y, suite.k), raised, mode,
                                                suite.tolerance(recipe.dtype)),
                f"recipe {recipe}, raise {mode} (seed {seed})")

    suite.run(monotonicity, weight=0.5, recipe=suite.recipes(FAMILIES), mode=st.sampled_from(("top", "other")),
              seed=st.integers(0, 2 ** 31 - 1))
