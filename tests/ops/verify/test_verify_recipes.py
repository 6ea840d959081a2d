"""Verify recipes: replayable, shaped as the contract says, and each family what it claims.

Test plan: the string form round-trips and malformed items are named; every family x draft kind
builds ``(d [B, n] int64, q [B, n, V] float32 or None, p [B, n+1, V] float32)`` bit-identically
twice, with row ``b`` a copy of problem ``b % P`` and padding making the rows non-contiguous;
each family has the property its name promises (checked on the exact law); every drawn recipe
(Hypothesis) has a well-defined law.
"""
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from equiv.errors import InvalidArgument
from equiv.ops.verify import lossless
from equiv.ops.verify.mutants import bonus_from_previous_position
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.plans import plan
from equiv.ops.verify.recipes import DRAFTS, FAMILIES, TINY_Q, VerifyRecipe
from equiv.properties.verify_strategies import verify_recipes
from equiv.reference import verify as rv


def test_string_form_round_trips_and_names_bad_items():
    r = VerifyRecipe(family="ties", seed=4, batch=6, n=5, vocab=33, ties=3, pad=2, draft="onehot")
    assert str(r) == "ties:seed=4,batch=6,n=5,vocab=33,draft=onehot,ties=3,pad=2"
    assert VerifyRecipe.parse(str(r)) == r
    with pytest.raises(InvalidArgument, match="key one of seed, batch, n, vocab"):
        VerifyRecipe.parse("realistic:k=2")
    with pytest.raises(InvalidArgument, match="family='nope' is unknown"):
        VerifyRecipe.parse("nope:seed=1")
    with pytest.raises(InvalidArgument, match="vocab=1 is invalid"):
        VerifyRecipe(family="disjoint", vocab=1)


@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_builds_the_contract_shapes_replayably(family, draft):
    r = VerifyRecipe(family=family, batch=7, n=3, vocab=33, problems=3, draft=draft, pad=2)
    d, q, p = r.build("cpu")
    assert d.dtype == torch.int64 and tuple(d.shape) == (7, 3)
    assert p.dtype == torch.float32 and tuple(p.shape) == (7, 4, 33) and not p.is_contiguous()
    assert (q is None) == (draft == "onehot")
    if q is not None:
        assert q.dtype == torch.float32 and tuple(q.shape) == (7, 3, 33)
    d2, q2, p2 = VerifyRecipe.parse(str(r)).build("cpu")
    assert torch.equal(d, d2) and torch.equal(p, p2)
    assert torch.equal(p[5], p[2]) and torch.equal(d[4], d[1])          # row b copies problem b % 3
    assert not torch.equal(p[0], p[1])


def _law(family, **kw):
    pr = VerifyRecipe(family=family, batch=4, n=2, vocab=1000, **kw).make_problems()
    return pr, rv.acceptance_probabilities(pr.tokens, pr.draft, pr.target)


def test_each_family_is_what_its_name_says():
    pr, a = _law("equal")
    assert (a == 1).all() and np.array_equal(pr.draft, pr.target[:, :2])
    pr, a = _law("disjoint")
    assert (a == 0).all() and not ((pr.target[:, :2] > 0) & (pr.draft > 0)).any()
    pr, a = _law("tiny_q")
    assert np.allclose(a, 0.3, atol=1e-6)
    assert (np.take_along_axis(pr.draft, pr.tokens[..., None], 2) == np.float32(TINY_Q)).all()
    pr, _ = _law("onehot_target")
    assert ((pr.target == 1).sum(-1) == 1).all() and ((pr.target == 0).sum(-1) == 999).all()
    pr, _ = _law("neginf_zeros")
    assert (pr.target[..., -125:] == 0).all() and (pr.draft[..., -125:] > 0).all()
    pr, _ = _law("ties", ties=3)
    top = np.sort(pr.target, -1)[..., -3:]
    assert (top == top[..., -1:]).all()
    pr, _ = _law("bf16_rounded")                 # bfloat16 values but each row's top: the remainder
    for rows in (pr.target, pr.draft):
        on_grid = rows.view(np.uint32) & 0xFFFF == 0
        assert (on_grid.sum(-1) >= rows.shape[-1] - 1).all()
        assert np.abs(rows.astype(np.float64).sum(-1) - 1.0).max() <= 2.0 ** -24 + rows.shape[-1] * 2.0 ** -50
    _, a = _law("realistic")
    assert 0 < a.mean() < 1


@settings(max_examples=40, deadline=None)
@given(recipe=verify_recipes(max_elements=2 ** 16))
def test_every_drawn_recipe_has_a_well_defined_law(recipe):
    pr = recipe.make_problems()
    laws = rv.emission_laws(pr.tokens, pr.draft, pr.target)
    assert np.allclose(laws.sum(-1), 1.0, atol=1e-9)


def test_parts_share_their_problems_and_draw_fresh_drafts_from_q():
    """A large sample splits into parts: same problems (one cache entry), fresh drafts each,
    distributed as q (the row-drawn part 0 and a vectorised part agree in law)."""
    base = VerifyRecipe(family="realistic", seed=3, batch=4000, n=1, vocab=7, problems=1, drafts="sampled")
    one, two = base.with_(part=1), base.with_(part=2)
    assert VerifyRecipe.parse(str(two)) == two and "part=2" in str(two)
    assert one.problem_key() == two.problem_key() == base.problem_key()
    assert one.make_problems() is base.make_problems()
    assert (one.row_tokens() != two.row_tokens()).any() and (one.row_tokens() != base.row_tokens()).any()
    q = base.make_problems().draft[0, 0].astype(np.float64)
    for r in (base, one, two):
        assert np.abs(np.bincount(r.row_tokens()[:, 0], minlength=7) / r.batch - q / q.sum()).max() < 0.03


def test_a_gpu_plan_adds_the_power_case_and_more_calls_at_the_largest_vocabularies():
    from equiv.ops.verify.plans import LARGEST_PARTS, LARGEST_PARTS_GPU, POWER, statistical_cases

    cpu, gpu = statistical_cases("quick"), statistical_cases("quick", device="cuda:0")
    rows, parts = POWER["quick"]

    def largest(plan):                   # the second wide case: its parts share part 1's problems
        return [c for c in plan if c.purpose == "wide" and c.recipe.part]

    assert [c.recipe.part for c in largest(cpu)] == list(range(1, LARGEST_PARTS + 1))
    assert [c.recipe.part for c in largest(gpu)] == list(range(1, LARGEST_PARTS_GPU + 1))
    assert LARGEST_PARTS_GPU > LARGEST_PARTS
    assert {str(c.recipe.with_(part=1)) for c in largest(gpu)} == {str(largest(cpu)[0].recipe)}
    assert len({c.seed for c in largest(gpu)}) == LARGEST_PARTS_GPU          # fresh draws in each call
    same = cpu.index(largest(cpu)[-1]) + 1
    assert [(c.recipe, c.seed) for c in gpu[:same]] == [(c.recipe, c.seed) for c in cpu[:same]]
    for plan in (cpu, gpu):                     # the first and the last part replay (Case.replay)
        assert [c.replay for c in largest(plan)] == [True] + [False] * (len(largest(plan)) - 2) + [True]
    assert len(gpu) == len(cpu) + LARGEST_PARTS_GPU - LARGEST_PARTS + parts
    extra = gpu[-parts:]
    assert {c.recipe.part for c in extra} == set(range(1, parts + 1))
    assert {(c.recipe.vocab, c.recipe.batch, c.recipe.drafts) for c in extra} == {(129280, rows, "sampled")}
    assert len({c.seed for c in extra}) == parts
    token = statistical_cases("quick", device="cuda", law="token")[-1]
    assert token.calls == parts and token.recipe.drafts == "fixed" and token.recipe.batch == rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_temperature_0_slot_accepts_every_draft_in_some_rows_and_judges_their_bonus(seed):
    """The quick plan's one-hot-target slot: before, drafts drawn from a q unlike the target
    never were all accepted (0 of 31-122 rows at plan seeds 0-2), so the bonus token was never
    drawn at temperature 0 and a bonus read from the previous position passed the greedy check.
    The odd problems' drafter now agrees with the target: some rows accept every draft, and that
    mutant fails the greedy check there."""
    (case,) = [c for c in plan("quick", seed=seed) if c.recipe.family == "onehot_target" and c.purpose == "family"]
    r = case.recipe
    d, q, p = r.build("cpu")

    def outs(fn):
        return np.stack([fn(d, q, p, torch.Generator().manual_seed(s)).numpy() for s in range(2)])

    good = outs(torch_sampler)
    assert (good >= 0).all(-1).mean() > 0.1, "rows that accept every draft"
    assert lossless.greedy_problem(r, good) is None
    assert lossless.greedy_problem(r, outs(bonus_from_previous_position)) is not None
