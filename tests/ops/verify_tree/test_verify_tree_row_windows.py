"""A tree recipe too large for one call under the memory budget goes in windows of rows
(equiv/ops/verify_tree/draws.py, equiv.memory), as the chain verifier's: the windows build exactly
the rows of the whole batch, the judge sees every row in one ``[calls, B, D+1]`` array, and a
verifier whose output on a row depends on that row alone gets the same verdict at any budget. On
the GPU, the ``iid`` / ``wor`` EAGLE slot (two ``[B, N, V]`` inputs at V ~ 150000) went in one call
of 68 rows and ran out of memory in the verdict process: the gate of a verifier declaring ``any``
was NOT JUDGED there.
"""
import pytest
import torch

from equiv import memory
from equiv.ops.verify_tree import paths as P
from equiv.ops.verify_tree.draws import call_windows, run_draws
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.plans import contract_cases, statistical_cases
from equiv.ops.verify_tree.recipes import TreeRecipe
from test_verify_tree_batch_one import _counting     # this folder's: calls counted by rows


RECIPES = ("realistic:seed=3,batch=301,vocab=500,nodes=9,depth=4,fanout=3,drafts=iid,holes=1",
           "sparse:seed=4,batch=77,vocab=4099,nodes=20,depth=6,fanout=5,eagle=1,probs=0",
           "onehot_target:seed=5,batch=203,vocab=300,nodes=7,depth=3,fanout=2,ragged=1,problems=8")


@pytest.mark.parametrize("text", RECIPES)
def test_windows_build_the_rows_of_the_whole_batch(text):
    r = TreeRecipe.parse(text)
    whole = r.build("cpu")
    for start, stop in memory.row_windows(r.batch, 50):
        part = r.build("cpu", rows=(start, stop))
        for a, b in zip(whole, part):
            assert (a is None and b is None) or torch.equal(a[start:stop], b)


def test_a_recipe_over_the_budget_is_called_in_windows_of_rows(budget):
    r = TreeRecipe.parse(RECIPES[0])
    fn = _counting(P.greedy)                                   # row by row, no randomness
    whole = run_draws(fn, r, (7, 7), device="cpu", timeout=60)
    assert sorted(set(fn.batches)) == [1, 3, 297]              # the rest, 2 + 7 % 3 rows, the last row
    budget(memory.WORKING_COPIES * r.bytes_per_row() * 101)    # 101 rows a call at most
    fn.batches.clear()
    split = run_draws(fn, r, (7, 7), device="cpu", timeout=60)
    assert sorted(set(fn.batches)) == [1, 3, 96, 100, 101]     # windows of 100, 101, 100 rows; the first split
    assert split.ok and split.outputs.shape == whole.outputs.shape == (2, 301, r.trees().max_depth + 1)
    assert (split.outputs == whole.outputs).all() and (split.paths == whole.paths).all()


def test_a_window_narrower_than_the_deepest_row_is_padded(budget):
    # a window whose rows stop short of the recipe's deepest node answers [b, D_w + 1]; the join
    # pads it with -1 to the recipe's D + 1
    r = TreeRecipe.parse("realistic:seed=1,batch=40,vocab=64,nodes=12,depth=6,fanout=2,ragged=1")
    depth = r.trees().depth.max(1)
    assert depth.min() < depth.max()
    budget(memory.WORKING_COPIES * r.bytes_per_row() * 10)
    got = run_draws(P.greedy, r, (3,), device="cpu", timeout=60)
    assert got.ok and got.outputs.shape == (1, 40, r.trees().max_depth + 1)
    assert (got.outputs == run_draws(P.greedy, r, (3,), device="cpu", timeout=60).outputs).all()


def test_the_judge_does_not_depend_on_the_split(budget):
    cases = [Case(TreeRecipe.parse(RECIPES[2]), 2, 1000, statistical=True, purpose="greedy")]
    whole = run_judge(P.greedy, cases, device="cpu", drafts="topk", spec="greedy").to_json()
    budget(memory.WORKING_COPIES * cases[0].recipe.bytes_per_row() * 60)
    fn = _counting(P.greedy)
    split = run_judge(fn, cases, device="cpu", drafts="topk", spec="greedy").to_json()
    assert 203 not in fn.batches and max(fn.batches) <= 60
    assert split == whole and split["passed"]


def test_each_window_draws_its_own_randomness(budget):
    # rows of one problem: identical inputs; windows sharing a generator stream would repeat
    r = TreeRecipe.parse("realistic:seed=2,batch=400,vocab=200,nodes=6,depth=2,fanout=3,problems=1")
    budget(memory.WORKING_COPIES * r.bytes_per_row() * 100)
    out = run_draws(P.eagle_onehot, r, (11,), device="cpu", timeout=60).outputs[0]
    windows = [out[a:b] for a, b in memory.row_windows(r.batch, 100)]
    assert len(windows) == 4 and all(not (windows[0] == w).all() for w in windows[1:])


def test_a_failure_in_a_window_names_its_rows(budget):
    r = TreeRecipe.parse(RECIPES[0])

    def breaks_on_101_rows(parents, tokens, q, p, gen):
        if parents.shape[0] == 101:                          # the last window alone (rows 200-300)
            raise RuntimeError("boom")
        return P.greedy(parents, tokens, q, p, gen)
    budget(memory.WORKING_COPIES * r.bytes_per_row() * 101)
    got = run_draws(breaks_on_101_rows, r, (7,), device="cpu", timeout=60)
    assert not got.ok and "boom" in got.problem and "(rows 200-300 of 301, call 5 of the 5 it was sent in)" in got.problem, got.problem


@pytest.mark.parametrize("drafts", ["topk", "any"])
def test_every_call_of_the_gpu_plan_fits_the_default_budget(drafts):
    for c in statistical_cases("quick", drafts, 0, device="cuda") + contract_cases(drafts):
        windows = call_windows(c.recipe, c.seeds, "cuda") or [(0, c.recipe.batch)]
        rows = max(b - a for a, b in windows)
        assert memory.WORKING_COPIES * c.recipe.bytes_per_row() * rows <= memory.DEFAULT_MAX_GPU_MEMORY, c.recipe
    eagle = [c for c in statistical_cases("quick", drafts, 0, device="cuda") if c.purpose == "eagle"]
    assert {c.recipe.drafts for c in eagle if call_windows(c.recipe, c.seeds, "cuda")} == \
        ({"iid", "wor"} if drafts == "any" else set())      # two [B, N, V] inputs: the iid / wor trees
