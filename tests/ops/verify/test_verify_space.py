"""The verifier's input space (equiv/ops/verify/space.py) and the plan drawn from it per seed.

Test plan: the classes name what they say (a few values each); the statistical plan is a
function of its seed (the same seed, the same plan; another seed, other values), and EVERY seed's
plan reaches what issue 34 asks of each: a chain of n >= 9 whose rows reach position 8 and past,
a vocabulary past 2**17, a batch past 4096 and one with rows after the last multiple of 64, the
enumerable joint case, the independence case (identical rows, two calls); over 12 seeds every
layout and both draft kinds; padded and offset inputs hold the same values as contiguous ones;
the gate's coverage table names every dimension.
"""
import numpy as np
import pytest
import torch

from equiv.ops.verify import space
from equiv.ops.verify.plans import contract_cases, statistical_cases
from equiv.ops.verify.recipes import VerifyRecipe


def test_classes():
    assert "past 2**17" in space.vocab_classes(151936) and "real" in space.vocab_classes(152064)
    assert "prime" in space.vocab_classes(131101) and "not a multiple of 64" in space.vocab_classes(131101)
    assert "multiple of 64, not of 128" in space.vocab_classes(32064)
    assert "joint law enumerable" in space.vocab_classes(3, 4) and "joint law enumerable" not in space.vocab_classes(50, 4)
    assert space.batch_classes(4097) == ("past 4096", "rows after the last multiple of 64")
    assert space.n_classes(9) == ("9-16",)
    assert space.layout_classes(VerifyRecipe(pad=3, offset=5)) == (
        "padded (non-contiguous)", "base offset, not 16 B aligned", "view into a larger buffer")


def test_the_plan_is_drawn_per_seed():
    a, b = statistical_cases("quick", seed=3), statistical_cases("quick", seed=3)
    assert [str(c.recipe) for c in a] == [str(c.recipe) for c in b]
    c = statistical_cases("quick", seed=4)
    assert len({(x.recipe.vocab, x.recipe.n, x.recipe.batch) for x in a}
               & {(x.recipe.vocab, x.recipe.n, x.recipe.batch) for x in c}) < len(a) // 2


@pytest.mark.parametrize("seed", range(6))
def test_every_seed_reaches_every_class_issue_34_names(seed):
    cases = statistical_cases("quick", seed=seed)
    stat = [c for c in cases if c.statistical]
    deep = [c for c in stat if c.recipe.n >= 9]
    assert deep and space.deepest_reached(deep) >= 8
    assert any(c.recipe.vocab > 2 ** 17 for c in stat)
    assert any(c.recipe.batch > 4096 for c in stat)
    assert any(c.recipe.batch % 64 for c in stat)
    assert [c.purpose for c in stat].count("joint exact") == 1
    joint = next(c for c in stat if c.purpose == "joint exact")
    assert joint.recipe.n >= 4 and joint.recipe.vocab ** (joint.recipe.n + 1) <= space.EXACT_CELLS
    (ind,) = [c for c in cases if c.purpose == "independence"]
    assert ind.recipe.drafts == "fixed" and ind.recipe.n_problems == 1 and ind.calls == 2
    assert max(c.recipe.batch * (c.recipe.n + 1) * c.recipe.vocab for c in cases) <= 2 ** 28


def test_layouts_and_draft_kinds_over_seeds():
    seen = set()
    for seed in range(12):
        for c in statistical_cases("quick", seed=seed):
            seen.update(space.layout_classes(c.recipe) + space.draft_classes(c.recipe))
    assert {"contiguous", "padded (non-contiguous)", "base offset, not 16 B aligned",
            "view into a larger buffer", "onehot drafts", "probs drafts"} <= seen


def test_contract_cases_reach_past_2_17_n_16_and_remainders():
    cases = contract_cases()
    assert max(c.recipe.n for c in cases) == 16
    assert {151936, 152064, 256000, 262144} <= {c.recipe.vocab for c in cases}
    assert any(c.recipe.batch % 64 and c.recipe.batch > 64 for c in cases)


@pytest.mark.parametrize("layout", [dict(pad=3), dict(offset=5), dict(pad=2, offset=3)])
def test_a_layout_keeps_the_values(layout):
    base = VerifyRecipe(family="realistic", batch=7, n=3, vocab=33, problems=3, drafts="sampled")
    moved = base.with_(**layout)
    for x, y in zip(base.build(), moved.build()):
        assert torch.equal(x, y)
    d, q, p = moved.build()
    if layout.get("pad"):
        assert not d.is_contiguous() and not p.is_contiguous()
    if layout.get("offset"):
        assert d.storage_offset() == p.storage_offset() == layout["offset"]


def test_reach_names_every_dimension():
    got = space.reach(statistical_cases("quick", seed=0) + contract_cases())
    for dim in ("n", "vocab", "batch", "layout", "draft", "family", "purpose", "deepest position judged"):
        assert got[dim], dim
    assert "9-16" in got["n"] and "past 2**17" in got["vocab"] and "past 4096" in got["batch"]
    assert np.all(np.diff(got["vocab values"]) > 0)
