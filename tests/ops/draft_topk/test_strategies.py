"""The suite's inputs: recipe families, the strategies that draw them, and the relation helpers.

Each test can fail: it pins what a family must build, that shrinking reaches the simplest case,
and that each relation helper reports the violation it exists for.
"""
import numpy as np
import pytest
import torch
from hypothesis import find, given, settings, strategies as st

from equiv import reference
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe
from equiv.properties import relations as rel
from equiv.ops.draft_topk import strategies
from equiv.properties.runner import Output

FAST = settings(max_examples=25, deadline=None, database=None, derandomize=True)


@FAST
@given(strategies.recipes(FAMILIES, max_vocab=4097, max_elements=2 ** 14))
def test_drawn_recipes_build_and_round_trip(recipe):
    x = recipe.build()
    assert tuple(x.shape) == (recipe.batch, recipe.vocab) and str(x.dtype) == f"torch.{recipe.dtype}"
    assert Recipe.parse(str(recipe)) == recipe
    assert recipe.batch * recipe.vocab <= max(2 ** 14, recipe.vocab)


def test_shrinking_reaches_the_simplest_recipe():
    found = find(strategies.recipes(), lambda r: r.vocab >= 1025 and r.batch >= 3,
                 settings=settings(database=None, max_examples=500, derandomize=True))
    assert str(found) == "gaussian:seed=0,batch=3,vocab=1025,dtype=float32"


def test_raw_arrays_reach_single_special_values():
    wide = settings(database=None, max_examples=2000)
    found = find(strategies.raw_logits(), lambda a: np.isnan(a).any(), settings=wide)
    assert found.shape == (1, 1) and np.isnan(found[0, 0])
    found = find(strategies.raw_logits(), lambda a: (a == np.inf).any() and a.shape[1] >= 2, settings=wide)
    assert found.shape == (1, 2) and np.inf in found[0].tolist()


def test_recipe_pretty_form_is_replayable():
    r = Recipe(family="ties_max", vocab=33, ties=5, position="tail", pad=7)
    assert "Recipe.parse('ties_max:seed=0,batch=4,vocab=33,dtype=float32,ties=5,position=tail,pad=7')" in \
        __import__("hypothesis").vendor.pretty.pretty(r)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_families_that_must_stay_healthy_do(dtype):
    for family in ("huge", "subnormal", "row_offsets", "neginf_pad", "bf16_quantized"):
        r = Recipe(family=family, batch=3, vocab=1025, dtype=dtype, scale=30.0)
        ref = reference.softmax_topk(r.build().float().numpy())
        assert not ref.poisoned.any(), f"{r} built poisoned rows {ref.kind}"


def test_family_fixes():
    assert torch.isfinite(Recipe(family="huge", dtype="float16", scale=8.0, batch=2, vocab=10).build()).all()
    assert (Recipe(family="subnormal", dtype="float16", batch=1, vocab=64).build() != 0).any()
    x = Recipe(family="neginf_pad", specials=10, batch=1, vocab=10).build()
    assert torch.isfinite(x).sum() == 1 and torch.isneginf(x[0, 1:]).all()
    heights = Recipe(family="row_offsets", batch=6, vocab=1000).build().max(-1).values
    assert float(heights.max() - heights.min()) > 20


def test_poison_mix_and_pad_make_what_they_say():
    ref = reference.softmax_topk(Recipe(family="poison_mix", batch=6, vocab=50).build().numpy())
    assert sorted(k for k in ref.kind if k != "healthy") == ["all_neginf", "multi_posinf", "nan", "posinf"]
    x = Recipe(batch=3, vocab=33, pad=7).build()
    assert not x.is_contiguous() and x.stride() == (40, 1)


@FAST
@given(strategies.recipes(("gaussian", "huge", "zipf", "neginf_pad"), max_vocab=1025), st.data())
def test_exact_shifts_are_exact(recipe, data):
    x = rel.snap(recipe.build(), recipe.dtype)
    c = data.draw(strategies.exact_shifts(recipe.dtype))
    assert abs(c) < strategies.SHIFT_GRID[recipe.dtype][2]
    y = x + c
    finite = torch.isfinite(x)
    assert torch.equal(y[finite].double(), x[finite].double() + c)


def test_poison_rows_keeps_healthy_rows_in_order():
    x = Recipe(batch=3, vocab=20).build()
    y, healthy = rel.poison_rows(x, seed=4, n=4)
    assert y.shape == (7, 20) and torch.equal(y[torch.as_tensor(healthy)], x)
    kinds = reference.softmax_topk(y.numpy()).kind
    assert sum(k != "healthy" for k in kinds) == 4


def _answer(x, k=1):
    p, i = torch.topk(torch.softmax(x.double(), -1), k)
    return Output(p.numpy(), i.numpy())


def test_disagreement_reports_a_moved_index_and_a_changed_value():
    x = Recipe(batch=2, vocab=50).build()
    ref, tol = reference.softmax_topk(x.numpy()), __import__("equiv").tolerance_for("float32")
    a = _answer(x)
    assert rel.disagreement(a, a, ref, tol) is None
    moved = Output(a.p, (a.idx + 1) % 50)
    assert "(index)" in rel.disagreement(a, moved, ref, tol)
    assert "(value)" in rel.disagreement(a, Output(a.p * 1.01, a.idx), ref, tol)


def test_bounds_and_monotonicity_helpers_can_fail():
    x = Recipe(batch=2, vocab=50).build()
    ref, tol = reference.softmax_topk(x.numpy()), __import__("equiv").tolerance_for("float32")
    a = _answer(x)
    assert rel.bounds_problem(a, ref, tol) is None
    assert "out of bounds" in rel.bounds_problem(Output(a.p * 0 + 1.5, a.idx), ref, tol)
    y, raised = rel.raise_logits(x, ref, "top", seed=0)
    assert (raised == ref.topk_index[:, 0]).all() and (y.max(-1).values > x.max(-1).values).all()
    b = _answer(y)
    ref_y = reference.softmax_topk(y.numpy())
    assert rel.monotonicity_problem(a, b, ref_y, raised, "top", tol) is None
    assert "raising the top logit" in rel.monotonicity_problem(a, Output(a.p * 0.5, b.idx), ref_y, raised, "top", tol)


def test_recipes_reach_1024_rows_with_a_small_vocabulary():
    found = find(strategies.recipes(), lambda r: r.batch >= 1024,
                 settings=settings(database=None, max_examples=2000))
    assert found.batch == 1024 and found.batch * found.vocab <= strategies.MAX_ELEMENTS
    found = find(strategies.recipes(), lambda r: r.batch > 4 and r.vocab > 32000,
                 settings=settings(database=None, max_examples=2000))
    assert found.vocab > 32000 and 4 < found.batch <= strategies.MAX_ELEMENTS // found.vocab


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_recipes_reach_the_dtype_range_and_stay_finite(dtype):
    big = 1e29 if dtype != "float16" else 3e4
    found = find(strategies.recipes(dtypes=(dtype,)), lambda r: abs(r.shift) > big,
                 settings=settings(database=None, max_examples=2000))
    assert abs(found.shift) == strategies.HUGE_SHIFTS[dtype][0]
    for family in ("gaussian", "huge", "dominant", "row_offsets", "ties_max", "zipf"):
        for shift in strategies.HUGE_SHIFTS[dtype]:
            r = Recipe(family=family, batch=2, vocab=1025, dtype=dtype, scale=30.0, shift=shift)
            ref = reference.softmax_topk(r.build().float().numpy())
            assert not ref.poisoned.any(), f"{r} built poisoned rows {ref.kind}"


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_raw_arrays_reach_the_dtype_max(dtype):
    top = strategies.MAX_RAW_MAGNITUDE[dtype]
    wide = settings(database=None, max_examples=2000)
    found = find(strategies.raw_logits(dtypes=(dtype,)),
                 lambda a: np.isfinite(a).all() and np.abs(a).max() >= top * 0.99, settings=wide)
    assert np.abs(found).max() <= top


def test_huge_shift_recipe_judges_the_paths_the_right_way_round():
    r = Recipe.parse("gaussian:seed=0,batch=2,vocab=1000,shift=1e30")
    assert __import__("equiv").compare("softmax_topk", r.build(), 1, recipe=r).passed
    assert not __import__("equiv").compare("hardcoded_one", r.build(), 1, recipe=r).passed


def test_a_rebuilt_recipe_is_a_fresh_tensor_with_the_same_bits():
    # build() keeps the last recipe's host values (an in-process judge builds each recipe twice):
    # each call must still get its own tensor, unchanged by what a caller did to an earlier one
    import torch

    from equiv import Recipe

    for pad in (0, 5):
        r = Recipe("ties_max", seed=4, batch=3, vocab=300, dtype="bfloat16", pad=pad)
        first = r.build("cpu")
        want = first.clone()
        first.fill_(0.0)                          # a caller (or a candidate) writes into its copy
        second = r.build("cpu")
        assert second.data_ptr() != first.data_ptr() and second.stride() == (300 + pad, 1)
        assert torch.equal(second.view(torch.int16), want.view(torch.int16))
