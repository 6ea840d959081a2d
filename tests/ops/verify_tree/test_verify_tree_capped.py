"""Issue 42, part 2 (the tree): a verifier that accepts fewer nodes than it could is lossless.

Plan: ``tests/candidates/capped_verifiers.py:capped_tree`` is ``target_only`` stopped after 3
accepted nodes, drawing the next token from the full target row of the node it stopped at. On
a deep plan (depth 5, so the cap bites: the flat case's whole text law exactly at V = 4, a
realistic case, one-hot targets) it passes every check, the greedy one included (before issue
42 greedy asked for greedy decoding's whole text and failed it: "greedy: wrong drawn token"), and
its accept length is reported below the tree optimum. The greedy check can still fail: the same
cap emitting the argmax of the parent's row (``wrong_capped_tree``) fails it, and outputs of the
built-in ``greedy`` verifier edited by hand show each cause: a stop that emits the argmax passes
(counted by ``greedy_shortfall``), a stop where the argmax child was there that emits another
token, a wrong child.
"""
import os
import sys

import numpy as np
import torch

from equiv.ops.verify_tree.judge import Case, greedy_problem, greedy_shortfall, run_judge
from equiv.ops.verify_tree.paths import greedy
from equiv.ops.verify_tree.recipes import TreeRecipe

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
from capped_verifiers import capped_tree, wrong_capped_tree  # noqa: E402

DEEP = (("flat:vocab=4,nodes=12,depth=5,fanout=2", 6000),
        ("realistic:vocab=64,nodes=12,depth=5,fanout=2", 3000),
        ("onehot_target:vocab=64,nodes=10,depth=5,fanout=2", 734))
ONEHOT = TreeRecipe.parse("onehot_target:seed=0,batch=734,vocab=960,nodes=6,depth=5,fanout=2,drafts=topk")


def _cases():
    return [Case(TreeRecipe.parse(t).with_(drafts="topk", batch=b, seed=1), 1, 1, statistical=True) for t, b in DEEP]


def test_a_tree_verifier_capped_at_3_nodes_passes_and_is_slower():
    v = run_judge(capped_tree, _cases(), device="cpu", drafts="topk", spec="capped_tree")
    assert v.passed, v.summary()
    assert {c.name for c in v.checks} >= {"greedy", "marginal", "joint", "exhaustive"}
    greedy_line = next(c.detail for c in v.checks if c.name == "greedy")
    assert int(greedy_line.split("; ")[1].split()[0]) > 0, greedy_line    # some stopped before greedy's end
    flat = next(e for e in v.efficiency if e["recipe"].startswith("flat"))    # V = 4: the cap bites most
    assert flat["ratio"] < 0.95 and flat["token_optimum"] - flat["accept_length"] > 5 * flat["stderr"], flat
    assert "tree optimum" in v.summary()


def test_the_cap_drawing_from_the_wrong_row_still_fails_greedy():
    v = run_judge(wrong_capped_tree, [Case(ONEHOT, 1, 0)], device="cpu", drafts="topk", spec="wrong_capped_tree")
    failed = {c.name: c for c in v.failed}
    assert "greedy" in failed and failed["greedy"].cause.startswith("greedy: "), v.summary()


def _greedy_outputs(recipe):
    parents, tokens, q, p = recipe.build("cpu")
    path, out = greedy(parents, tokens, q, p, torch.Generator().manual_seed(0))
    return path.numpy()[None].copy(), out.numpy()[None].copy()


def _deep_row(paths):
    """A row whose greedy path accepted at least two nodes."""
    k = (paths[0, :, 1:] != -1).sum(-1)
    return int(np.flatnonzero(k >= 2)[0])


def test_greedy_accepts_any_prefix_of_greedy_decoding_and_names_each_wrong_token():
    paths, outs = _greedy_outputs(ONEHOT)
    assert greedy_problem(ONEHOT, paths, outs) is None and greedy_shortfall(ONEHOT, paths, outs) == 0
    b = _deep_row(paths)
    stopped_p, stopped_o = paths.copy(), outs.copy()
    stopped_p[0, b, 2:] = -1                     # stop after the first accepted node, emit the argmax there
    stopped_o[0, b, 2:] = -1                     # (the next greedy node's token, kept at position 1)
    assert greedy_problem(ONEHOT, stopped_p, stopped_o) is None
    assert greedy_shortfall(ONEHOT, stopped_p, stopped_o) == 1
    wrong = stopped_o.copy()
    wrong[0, b, 1] = (wrong[0, b, 1] + 1) % ONEHOT.vocab
    *_, cause = greedy_problem(ONEHOT, stopped_p, wrong)
    assert cause == "greedy: stopped at the argmax child and drew another token"
    last = outs.copy()
    k = int((paths[0, b, 1:] != -1).sum())
    last[0, b, k] = (last[0, b, k] + 1) % ONEHOT.vocab
    *_, cause = greedy_problem(ONEHOT, paths, last)
    assert cause == "greedy: wrong drawn token"
    child = outs.copy()
    child[0, b, 0] = (child[0, b, 0] + 1) % ONEHOT.vocab     # the layout check would see it too; greedy names it
    *_, cause = greedy_problem(ONEHOT, paths, child)
    assert cause == "greedy: accepted a wrong child"
