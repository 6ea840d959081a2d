"""Equivalence: each subject against the float64 reference, through ``equiv.ops.draft_topk.compare``.

Test plan
---------
- ``equivalence``: recipes from every healthy family (Gaussian at several scales and shifts,
  Zipf, dominant token, near-uniform, exact ties at the max, 1-ULP near-ties, -inf padding,
  huge magnitudes, subnormals, bfloat16-quantized, rows at very different heights), V from the
  tile edges up to 129280, B not a power of two, non-contiguous rows (``pad``), every dtype of
  the run; then, whatever the budget and the seed, the coverage shapes of
  ``strategies.COVERAGE_SHAPES`` (1024 rows, 65 rows, 8 padded rows at V = 129280) as plain
  calls, so that a bug everywhere still ends as a shrunk small case and a bug only at large
  shapes fails on one of them. All five checks of ``compare`` must pass: contract, index in the tie set, value
  within the tolerance table, poisoning, and the regression rule against ``softmax_topk``.
- ``poisoned_batches``: ``poison_mix`` batches (NaN, +inf, two +inf, all -inf rows among healthy
  ones): poisoned rows give NaN (or the 1.0 limit for one +inf), healthy rows stay correct.
- ``raw_arrays``: element-level ``[B <= 4, V <= 40]`` arrays mixing ordinary values with -inf,
  +inf, NaN, -0.0, subnormals, float32 max and exp's overflow thresholds; shrinking reaches
  single values, and the REPRO line is a self-contained ``python -c`` command.
Oracle: ``reference.softmax_topk`` (float64). Latitude: any index of a tie set (exact ties and
near-ties within ``rtol``), values within ``Tolerance.allowed``. No statistics: every check is
deterministic, so a correct path has no false-positive rate beyond the tolerance table's margins
(measured under 200+ seeds, docs/property-suite.md).
"""
from __future__ import annotations

from hypothesis import strategies as st

from equiv.ops.draft_topk.recipes import HEALTHY_FAMILIES
from equiv.ops.draft_topk.strategies import raw_logits

EQUIVALENCE_FAMILIES = HEALTHY_FAMILIES + ("neginf_pad",)


def test_equivalence(subject, suite):
    def equivalence(recipe):
        suite.expect_equivalent(suite.build(recipe), recipe=recipe, what=f"recipe {recipe}")

    suite.run(equivalence, weight=1.0, recipe=suite.recipes(EQUIVALENCE_FAMILIES))
    for recipe in suite.coverage_recipes():      # after the drawn examples: a bug everywhere shrinks
        equivalence(recipe)


def test_poisoned_batches(subject, suite):
    def poisoned_batches(recipe):
        suite.expect_equivalent(suite.build(recipe), recipe=recipe, what=f"recipe {recipe}")

    suite.run(poisoned_batches, weight=0.5, recipe=suite.recipes(("poison_mix",), min_batch=2))


def test_raw_arrays(subject, suite):
    vocab = min(40, subject.budget.max_vocab)

    def raw_arrays(logits, dtype):
        x = suite.tensor(logits, dtype)
        suite.expect_equivalent(x, raw=logits, what="the raw array")

    suite.run(raw_arrays, weight=2.0, logits=raw_logits(max_vocab=vocab, min_vocab=suite.k, dtypes=suite.dtypes),
              dtype=st.sampled_from(suite.dtypes))
