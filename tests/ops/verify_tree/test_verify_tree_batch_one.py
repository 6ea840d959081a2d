"""Batch classes 1 and 2-4 (equiv.run.calling.last_rows_apart): a tree call of eight rows or more
goes as its rows but the last 3-5, then 2-4 rows, then its last row alone, each of its rows' own depth, joined
with -1 past it. Before, no plan called a tree verifier with one row (the coverage said "not
reached: 1"), so a verifier that drops the batch axis of a batch of one passed every plan."""
import numpy as np

from equiv.ops.verify_tree.calls import draw
from equiv.ops.verify_tree.paths import target_only
from equiv.ops.verify_tree.plans import contract_cases, statistical_cases
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.ops.verify_tree.space import reach

RECIPE = "realistic:seed=3,batch=40,vocab=300,nodes=12,depth=4,fanout=3,drafts=topk"


def _counting(fn):
    def wrapped(parents, tokens, q, p, gen):
        wrapped.batches.append(int(parents.shape[0]))
        return fn(parents, tokens, q, p, gen)
    wrapped.batches = []
    return wrapped


def test_a_call_of_eight_rows_or_more_sends_its_last_rows_apart():
    fn = _counting(target_only)
    got = draw(fn, "cpu", {"recipe": RECIPE, "seeds": [100, 101]})
    assert got["problem"] is None and got["outputs"].shape == (2, 40, TreeRecipe.parse(RECIPE).trees().max_depth + 1)
    assert fn.batches[0] == 36 and sorted(set(fn.batches)) == [1, 3, 36]   # the rest first; 2 + 100 % 3 rows
    assert ((got["outputs"] >= 0).sum(-1) >= 1).all()            # every row emitted its text


def test_rows_of_shallower_trees_come_back_padded_with_minus_one():
    r = TreeRecipe.parse("realistic:seed=5,batch=9,vocab=50,nodes=8,depth=5,fanout=2,drafts=topk,holes=1")
    t = r.trees()
    got = draw(target_only, "cpu", {"recipe": str(r), "seeds": [7]})
    assert got["problem"] is None
    last = int(t.depth[-1].max())                # the last row is a call of its own
    assert last < t.max_depth
    assert (got["outputs"][0, -1, last + 1:] == -1).all() and (got["paths"][0, -1, last + 1:] == -1).all()


def squeezes_batch_1(parents, draft_token_ids, draft_probs, target_probs, generator):
    path, out = target_only(parents, draft_token_ids, draft_probs, target_probs, generator)
    return path.squeeze(), out.squeeze()         # the engines' batch-1 slip


def test_a_verifier_that_squeezes_batch_1_fails_with_the_call_named():
    got = draw(squeezes_batch_1, "cpu", {"recipe": RECIPE, "seeds": [100]})
    assert "returned accepted_path of shape [5], not [1, 5]" in got["problem"]
    assert "(rows 39-39 of 40, call 3 of the 3 it was sent in)" in got["problem"]
    assert got["cause"] == "output type"


def test_the_coverage_lists_batch_1_under_exact_checks_only():
    stat = [c for c in statistical_cases("quick", "topk", 0) if c.recipe.batch >= 8]
    judged = reach(statistical_cases("quick", "topk", 0), contract_cases("topk", 0))["judged"]["batch"]
    assert stat and "1" in judged["exact checks only"] and "1" not in judged["not reached"]
    assert not np.isin(["1"], judged["statistical"]).any()
