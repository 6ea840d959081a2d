"""A verifier's recipe too large for one call under the memory budget goes in windows of rows
(equiv/ops/verify/calls.py, equiv.memory): the windows build exactly the rows of the whole batch,
the judge sees every row in one ``[calls, B, n+1]`` array, and its statistics do not depend on
the split (a verifier whose output on a row depends on that row alone gives the same verdict,
p-values included, at any budget).
"""
import pytest
import torch

from equiv import memory
from equiv.ops.verify.draws import bytes_per_row, call_windows, run_draws
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.plans import POWER, plan
from equiv.ops.verify.recipes import VerifyRecipe


def _counting(fn):
    def wrapped(d, q, p, gen):
        wrapped.batches.append(int(d.shape[0]))
        return fn(d, q, p, gen)
    wrapped.batches = []
    return wrapped


def row_local(draft_token_ids, draft_probs, target_probs, generator):
    """No randomness: accepts the drafts while p >= q at them, then emits the target's argmax at
    the first rejection (or the bonus): a row's output depends on that row alone."""
    d = draft_token_ids
    B, n = d.shape
    p_at = target_probs[:, :n].gather(-1, d[..., None])[..., 0]
    q_at = draft_probs.gather(-1, d[..., None])[..., 0] if draft_probs is not None else torch.ones_like(p_at)
    stop = (p_at >= q_at).long().cumprod(1).sum(1)                               # accepted drafts
    out = torch.full((B, n + 1), -1, dtype=torch.int64, device=d.device)
    pos = torch.arange(n + 1, device=d.device)[None, :]
    out[:, :n] = torch.where(pos[:, :n] < stop[:, None], d, out[:, :n])
    out[torch.arange(B), stop] = target_probs[torch.arange(B), stop].argmax(-1)
    return out


RECIPES = ("realistic:seed=3,batch=301,n=3,vocab=500,problems=4,pad=3,offset=5,drafts=sampled,part=2",
           "ties:seed=4,batch=77,n=2,vocab=64,draft=onehot",
           "realistic:seed=5,batch=203,n=4,vocab=300,problems=8,drafts=sampled")


@pytest.mark.parametrize("text", RECIPES)
def test_windows_build_the_rows_of_the_whole_batch(text):
    r = VerifyRecipe.parse(text)
    whole = r.build("cpu")
    for start, stop in memory.row_windows(r.batch, 50):
        part = r.build("cpu", rows=(start, stop))
        for a, b in zip(whole, part):
            if a is None:
                assert b is None
                continue
            assert torch.equal(a[start:stop], b) and a.stride() == b.stride()


def test_a_recipe_over_the_budget_is_called_in_windows_of_rows(budget):
    r = VerifyRecipe.parse(RECIPES[0])
    fn = _counting(row_local)
    whole = run_draws(fn, r, (7, 7), device="cpu", timeout=60)
    assert sorted(set(fn.batches)) == [1, 3, 297]                 # the rest, 2 + 7 % 3 rows, the last row
    budget(memory.WORKING_COPIES * bytes_per_row(r) * 101)        # 101 rows a call at most
    fn.batches.clear()
    split = run_draws(fn, r, (7, 7), device="cpu", timeout=60)
    assert sorted(set(fn.batches)) == [1, 3, 96, 100, 101]        # windows of 100, 101, 100 rows; the last split
    assert split.ok and split.outputs.shape == whole.outputs.shape == (2, 301, 4)
    assert (split.outputs == whole.outputs).all()                 # the same rows, each as in the whole batch


@pytest.mark.parametrize("law", ["lossless", "token"])
def test_the_judge_statistics_do_not_depend_on_the_split(law, budget):
    cases = [Case(VerifyRecipe.parse(RECIPES[2]).with_(drafts="sampled" if law == "lossless" else "fixed"),
                  2, 1000, statistical=True, purpose="marginal"),
             Case(VerifyRecipe.parse("realistic:seed=9,batch=450,n=2,vocab=40,problems=4,drafts=sampled"), 1, 2000,
                  statistical=True, purpose="deep")]
    whole = run_judge(row_local, cases, device="cpu", spec="row_local", law=law).to_json()
    budget(memory.WORKING_COPIES * bytes_per_row(cases[1].recipe) * 160)  # both recipes in windows
    fn = _counting(row_local)
    split = run_judge(fn, cases, device="cpu", spec="row_local", law=law).to_json()
    assert 203 not in fn.batches and 450 not in fn.batches and max(fn.batches) <= 160
    assert split == whole                        # every check, p-value, evidence and count


def test_the_gpu_plan_fits_the_default_budget_only_in_windows():
    cases = plan("quick", 0, device="cuda")
    power = [c for c in cases if c.recipe.batch == POWER["quick"][0] and c.recipe.vocab == 129280]
    assert power and all(memory.WORKING_COPIES * bytes_per_row(c.recipe) * c.recipe.batch > 8 * memory.GiB
                         for c in power)         # one call of the power case: 13.8 GiB of inputs
    for c in cases:
        rows = max(b - a for a, b in memory.row_windows(c.recipe.batch,
                                                          memory.rows_per_call(bytes_per_row(c.recipe), "cuda")))
        assert memory.WORKING_COPIES * bytes_per_row(c.recipe) * rows <= memory.DEFAULT_MAX_GPU_MEMORY, c.recipe
    windows = memory.row_windows(4096, memory.rows_per_call(bytes_per_row(power[0].recipe), "cuda"))
    assert len(windows) == 11 and {b - a for a, b in windows} == {372, 373}


def test_each_window_draws_its_own_randomness(budget):
    # rows of one problem with fixed drafts: identical inputs; windows that shared a generator
    # stream (a seed stride past the CPU generator's 32 bits) would repeat each other's outputs
    r = VerifyRecipe.parse("realistic:seed=2,batch=400,n=3,vocab=2000,problems=1")
    budget(memory.WORKING_COPIES * bytes_per_row(r) * 100)
    out = run_draws("torch_sampler", r, (11,), device="cpu", timeout=60).outputs[0]
    windows = [out[a:b] for a, b in memory.row_windows(r.batch, 100)]
    assert len(windows) == 4
    assert all(not (windows[0] == w).all() for w in windows[1:])


def test_every_call_of_eight_rows_or_more_sends_its_last_rows_apart():
    r = VerifyRecipe.parse(RECIPES[2])
    assert call_windows(r, (1000,), "cpu") == [(0, 199), (199, 202), (202, 203)]     # 2 + 1000 % 3 rows
    assert call_windows(r, (1002,), "cpu") == [(0, 200), (200, 202), (202, 203)]
    assert call_windows(r, (1001,), "cpu") == [(0, 198), (198, 202), (202, 203)]
    assert call_windows(r.with_(batch=7), (1000,), "cpu") == [(0, 7)]


def squeezes_batch_1(draft_token_ids, draft_probs, target_probs, generator):
    """torch_sampler with the engines' classic batch-1 slip: ``.squeeze()`` drops the batch axis."""
    return torch_sampler(draft_token_ids, draft_probs, target_probs, generator).squeeze()


def test_a_verifier_that_squeezes_batch_1_fails_and_the_coverage_says_where_batch_1_was_judged():
    from equiv.ops.verify.space import reach
    cases = [c for c in plan("quick", 0, parts=("statistics",)) if c.statistical]
    judged = reach(cases)["judged"]["batch"]
    assert "1" in judged["exact checks only"] and "1" not in judged["statistical"] + judged["not reached"]
    small = [Case(VerifyRecipe.parse(RECIPES[2]), 1, 1000, statistical=True, purpose="marginal")]
    assert run_judge(torch_sampler, small, device="cpu", spec="torch_sampler").passed
    got = run_judge(squeezes_batch_1, small, device="cpu", spec="squeezes_batch_1")
    assert not got.passed and "returned shape [5], not [1, 5]" in str(got.to_json())
    assert "(rows 202-202 of 203, call 3 of the 3 it was sent in)" in str(got.to_json())


def test_the_split_keeps_the_row_pairs_the_independence_test_reads():
    # rows 2i and 2i+1 of a call share uniforms (tests/candidates/verify_hostile.py): caught by the
    # independence case only while those rows are pairs of the joined output too. A split before
    # them (the first row alone) shifted every pair by one, and the hostile passed its gate.
    import sys, os
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "candidates"))
    import verify_hostile
    case = next(c for c in plan("quick", 0, parts=("statistics",)) if c.purpose == "independence")
    assert case.recipe.batch >= 8 and call_windows(case.recipe, case.seeds, "cpu")[0][0] == 0
    got = run_judge(verify_hostile.rows_share_uniforms, [case], device="cpu", spec="rows_share_uniforms")
    assert not got.passed
    assert run_judge(torch_sampler, [case], device="cpu", spec="torch_sampler").passed
