"""The SGLang and vLLM layout adapters (equiv/ops/verify_tree/adapters.py).

Test plan: the layouts round-trip (first-child / next-sibling arrays list every node's children
in order; vLLM's tuples rebuild the parents); the SGLang-layout kernel leaves the caller's inputs
alone (its scratch draft_probs is a copy), returns a real path, and on one-hot targets emits
greedy decoding's text; both wrapped built-ins pass the judge (test_verify_tree_mutants runs them
as legal variants).
"""
import numpy as np
import torch

from equiv.ops.verify_tree import adapters
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.recipes import TreeRecipe


def test_sglang_layout_lists_children_in_order():
    r = TreeRecipe.parse("realistic:batch=16,vocab=64,nodes=12,depth=3,fanout=3,ragged=1")
    parents = torch.from_numpy(r.trees().parents)
    _, first, nxt = adapters.to_sglang(parents)
    kids = r.trees().children
    for b in range(16):
        for i in range(12):
            walk, c = [], int(first[b, i])
            while c != -1:
                walk.append(c)
                c = int(nxt[b, c])
            assert walk == [int(k) for k in kids[b, i] if k >= 0]


def test_vllm_tuples_round_trip():
    parents = [-1, 0, 0, 1, 1, 2, 3, -2]
    tuples = adapters.to_vllm(parents)
    assert tuples[:3] == [(0,), (1,), (0, 0)]
    assert adapters.from_vllm(tuples) == [p for p in parents if p != -2]


def test_sglang_kernel_leaves_inputs_alone_and_is_greedy_on_one_hot_targets():
    r = TreeRecipe.parse("onehot_target:batch=32,vocab=64,nodes=8,depth=3,fanout=3")
    args = r.build()
    before = [None if a is None else a.clone() for a in args]
    path, out = adapters.sglang_target_only(*args, torch.Generator().manual_seed(0))
    assert all(torch.equal(a, b) for a, b in zip(args, before) if a is not None)
    v = run_judge(adapters.sglang_target_only, [Case(r, 1, 0)], device="cpu", drafts="topk", spec="sglang")
    assert v.passed, v.summary()
    assert (path[:, 0] == 0).all() and np.all(out.numpy()[:, 0] >= 0)


def test_a_chain_verifier_is_judged_through_the_tree_op():
    from equiv.ops.verify.paths import torch_sampler

    fn = adapters.chain_verifier(torch_sampler)
    cases = [Case(TreeRecipe.parse(t).with_(drafts="iid"), 1, 0, statistical=True)
             for t in ("flat:batch=6000,vocab=4,nodes=3,depth=2,fanout=1",
                       "realistic:batch=2000,vocab=64,nodes=5,depth=4,fanout=1")]
    v = run_judge(fn, cases, device="cpu", drafts="iid", spec="chain(torch_sampler)")
    assert v.passed, v.summary()
    tree = Case(TreeRecipe.parse("realistic:batch=4,vocab=64,nodes=5,depth=2,fanout=2"), 1, 0)
    bad = run_judge(fn, [tree], device="cpu", drafts="iid", spec="chain(torch_sampler)")
    assert bad.failed[0].evidence["cause"] == "raise"


def test_the_caller_feature_runs_a_users_verifier_in_its_worker(tmp_path):
    from equiv.ops import get_op

    src = tmp_path / "mine.py"
    src.write_text("from equiv.ops.verify_tree.paths import target_only as fn\n")
    call = get_op("verify_tree").features("caller")(f"{src}:fn", "cpu", 60)
    args = TreeRecipe.parse("realistic:batch=4,vocab=64,nodes=8,depth=3,fanout=3").build()
    path, out = call(*args, 3)
    local = get_op("verify_tree").features("caller")("target_only", "cpu", 60)(*args, 3)
    assert torch.equal(path, local[0]) and torch.equal(out, local[1])
