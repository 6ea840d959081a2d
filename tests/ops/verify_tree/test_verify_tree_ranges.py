"""The tree verifier's data dimensions drawn past engines' settings, and power where engines run
(issue 43, parts 2-4): no ceilings on depth, fan-out and nodes; absent nodes anywhere
(``holes``), every row the root alone, ``draft_probs = None`` and vocabularies in (32768, 65536]
judged statistically; an EAGLE-shaped tree at a real vocabulary past 100000 in every seed's
quick plan, where a verifier wrong only there fails; the coverage says where each class was
judged."""
import numpy as np
import pytest
import torch

from equiv.errors import InvalidArgument
from equiv.ops.verify.space import REAL_VOCABS
from equiv.ops.verify_tree import space
from equiv.ops.verify_tree.judge import Case, judge_draws, run_judge
from equiv.ops.verify_tree.draws import run_draws
from equiv.ops.verify_tree.independence import independence_cases
from equiv.ops.verify_tree.paths import VERIFIERS, target_only
from equiv.ops.verify_tree.plans import (EAGLE_VOCABS, MID_VOCABS, contract_cases, statistical_cases)
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.reference.verify_tree import tree_nodes
from tests.candidates.eagle_large_vocab import node_tv, stale_mask


def _slot(seed, purpose, device="cpu"):
    return next(c for c in statistical_cases("quick", "topk", seed, device=device) if c.purpose == purpose)


def test_holes_put_absent_nodes_in_the_middle_and_every_parent_first():
    t = TreeRecipe.parse("realistic:batch=64,vocab=50,nodes=12,depth=4,fanout=3,holes=1").trees()
    inside = (t.parents[:, 1:-1] == -2) & (t.parents[:, 2:] >= 0)          # absent, a present node after it
    assert inside.any(1).sum() > 10
    for b in range(64):
        assert tree_nodes(t.parents[b])[3] is None                         # the reference's contract
        here = np.flatnonzero(t.parents[b] >= 0)
        assert (t.parents[b, here] < here).all() and (t.parents[b, t.parents[b, here]] != -2).all()


@pytest.mark.parametrize("name", ["target_only", "eagle_onehot", "greedy"])
def test_built_ins_pass_the_exact_checks_on_holes_and_all_root_batches(name):
    for text in ("realistic:batch=32,vocab=64,nodes=10,depth=4,fanout=3,holes=1,probs=0",
                 "onehot_target:batch=16,vocab=64,nodes=10,depth=3,fanout=3,holes=1",
                 "realistic:batch=8,vocab=64,nodes=6,depth=0,fanout=1"):
        r = TreeRecipe.parse(text)
        v = run_judge(VERIFIERS[name], [Case(r, 2, 0)], device="cpu", drafts="any", spec=name)
        assert all(c.passed for c in v.checks if c.name in ("contract", "support", "greedy")), v.summary()
    t = TreeRecipe.parse("realistic:batch=8,vocab=64,nodes=6,depth=0,fanout=1").trees()
    assert t.max_depth == 0 and (t.parents[:, 1:] == -2).all()             # every row the root alone


def test_a_verifier_that_walks_into_an_absent_node_fails_the_contract():
    r = TreeRecipe.parse("realistic:batch=32,vocab=64,nodes=10,depth=4,fanout=3,holes=1,probs=0")
    good = run_draws(target_only, r, (0, 0), device="cpu", timeout=None)
    t = r.trees()
    b, i = next(zip(*np.nonzero(t.parents == -2)))
    paths = good.paths.copy()
    paths[:, b, 1] = i                                                     # a path through an absent node
    bad = good.__class__(good.recipe, good.seeds, paths, good.outputs)
    v = judge_draws([Case(r, 1, 0)], [bad], spec="x", device="cpu")
    assert not next(c for c in v.checks if c.name == "contract").passed


def test_no_ceilings_on_depth_fanout_and_nodes():
    t = TreeRecipe.parse("realistic:batch=3,vocab=2048,nodes=300,depth=24,fanout=3").trees()
    assert t.max_depth > 16 and t.parents.shape[1] == 300
    assert TreeRecipe.parse("realistic:batch=3,vocab=2048,nodes=81,depth=1,fanout=80").trees().children.shape[-1] == 80
    with pytest.raises(InvalidArgument, match="eagle=1 with drafts=iid"):
        TreeRecipe.parse("sparse:eagle=1,drafts=iid")


def test_eagle_trees_are_topk_drafted_and_closed_under_parents():
    r = TreeRecipe.parse("sparse:seed=4,batch=8,vocab=152064,nodes=30,depth=7,fanout=6,eagle=1,probs=0")
    t, m = r.trees(), r.model()
    assert t.max_depth >= 5 and (t.parents >= -1).all()                    # full rows
    for b in range(8):
        assert tree_nodes(t.parents[b])[3] is None
        for i in range(30):
            kids = t.children[b, i][t.children[b, i] >= 0]
            if kids.size:                                                  # the top draft tokens, in order
                assert (t.tokens[b, kids] == m.draft_order[t.index[b, i], :kids.size]).all()
    laws = m.target[m.target.sum(1) > 0]
    assert ((laws > 0).sum(1) <= 400).all() and (np.nonzero(laws[0])[0] > 2 ** 17).any()


@pytest.mark.parametrize("seed", range(6))
def test_every_quick_plan_holds_the_new_classes(seed):
    eagle = _slot(seed, "eagle").recipe
    assert eagle.vocab in EAGLE_VOCABS and eagle.vocab in REAL_VOCABS and eagle.vocab > 100000
    assert 5 <= eagle.depth <= 8 and 4 <= eagle.fanout <= 10 and 16 <= eagle.nodes <= 32
    assert eagle.eagle and not eagle.probs and _slot(seed, "eagle").calls * eagle.batch >= 390
    assert _slot(seed, "eagle", "cuda").calls * _slot(seed, "eagle", "cuda").recipe.batch >= 5900
    mid = _slot(seed, "mid vocab").recipe
    assert 32768 < mid.vocab <= 65536 and mid.holes
    assert _slot(seed, "roots").recipe.trees().max_depth == 0
    judged = space.reach(statistical_cases("quick", "topk", seed), [])["judged"]
    for dim, cls in (("vocab", "(32768, 65536]"), ("vocab", "past 100000"), ("draft_probs", "None"),
                     ("shape", "holes (absent anywhere)"), ("shape", "every row the root alone"),
                     ("shape", "EAGLE-2 tree")):
        assert cls in judged[dim]["statistical"], (dim, cls)
    assert set(MID_VOCABS) > {50257, 65024}


def test_the_plans_draw_past_engines_settings_over_seeds():
    deep = [_slot(s, "deep").recipe for s in range(20)]
    wide = [_slot(s, "wide").recipe for s in range(20)]
    assert max(r.depth for r in deep) >= 12 and max(r.nodes for r in deep) >= 64
    assert max(r.fanout for r in wide) >= 16


def test_coverage_says_where_each_class_was_judged():
    cov = space.reach(statistical_cases("quick", "topk", 0),
                      contract_cases("topk", 0) + independence_cases("topk", 0, "any"))
    judged = cov["judged"]
    assert set(judged) == set(space.UNIVERSE)
    assert "past 256" in judged["nodes"]["exact checks only"]              # the contract plan's 300 nodes
    assert "past 16" in judged["fanout"]["exact checks only"]
    lines = space.table_lines(cov)
    assert any(ln.startswith("shape") and "exact checks only:" in ln and "not reached:" in ln for ln in lines)
    nothing = space.reach([], [])["judged"]
    assert nothing["vocab"]["not reached"] == list(space.VOCAB_CLASSES)


def test_a_verifier_wrong_only_past_100000_at_depth_2_fails_the_eagle_slot():
    """Before the ``children`` score (children.py) this verifier passed the whole quick gate at
    every plan seed 0-7 (its emitted law moves by TV 0.05-0.11 at the nodes it breaks)."""
    slot = _slot(0, "eagle")
    case = Case(slot.recipe, 10, slot.seed, statistical=True, purpose="eagle")   # 160 of its 400 rows: cheap
    tv, visits = node_tv(case.recipe)
    assert 0.05 < tv < 0.12 and visits > 2
    bad = run_judge(stale_mask, [case], device="cpu", drafts="topk", spec="stale_mask")
    marginal = next(c for c in bad.checks if c.name == "marginal")
    assert not marginal.passed and "children score" in marginal.detail
    good = run_judge(target_only, [case], device="cpu", drafts="topk", spec="target_only")
    assert good.passed, good.summary()
    with torch.no_grad():                                                  # the hostile is the built-in below 100000
        small = case.recipe.with_(vocab=32000, batch=4)
        args = small.build()
        for f in (stale_mask, target_only):
            assert f(*args, torch.Generator().manual_seed(3))[1].shape[0] == 4


def test_the_coverage_reads_each_trees_extent_without_drafting_it():
    """``recipes.extent`` (what the coverage reads for cases this process never builds) gives
    the deepest node and the widest node of ``make_trees`` over every case of the plans: the
    contract plan's, the statistical and independence cases of several seeds, each construction,
    ragged, holes, EAGLE-2 and copied problems among them."""
    from equiv.ops.verify_tree.recipes import extent, make_trees
    seen = set()
    for drafts in ("topk", "iid", "wor"):
        cases = contract_cases(drafts, 0)
        for seed in range(2 if drafts == "topk" else 1):
            cases += statistical_cases("quick", drafts, seed) + independence_cases(drafts, seed, "any")
        for c in cases:
            r = c.recipe
            t = make_trees(r)
            assert extent(r) == (t.max_depth, max(int((t.children >= 0).sum(-1).max()), 1)), r
            seen.add((r.eagle, r.holes, r.ragged, r.n_problems < r.batch, t.max_depth == 0))
    assert {s[0] for s in seen} == {0, 1} and {s[1] for s in seen} == {0, 1} and {s[2] for s in seen} == {0, 1}
    assert any(s[3] for s in seen) and any(s[4] for s in seen)


def test_the_drafted_top_children_are_the_draft_orders_first_columns():
    """``TreeModel.draft_top(m)`` (what drafting reads) is ``draft_order[:, :m]`` (decreasing
    probability, ties by lowest index) for every family, ties and zeros included, at m below,
    at and past the partial sort's reach and past V; asked smaller after larger, it cuts."""
    from equiv.ops.verify_tree.recipes import FAMILIES, TreeModel, tree_model
    for family in FAMILIES:
        for vocab in (2, 7, 33, 1039, 20000):
            m = tree_model(family, 5, vocab)
            want = np.argsort(-m.draft, axis=1, kind="stable")
            for k in (1, 2, 3, 5, 16, vocab + 3, 4):
                got = m.draft_top(k)
                assert got.shape == (want.shape[0], min(k, vocab))
                assert (got == want[:, :min(k, vocab)]).all(), (family, vocab, k)
    rng = np.random.default_rng(0)                 # laws of few distinct values: ties everywhere
    for vocab in (50, 3000):
        law = rng.choice([0.0, 1.0, 2.0, 3.0], size=(16, vocab), p=[0.5, 0.3, 0.15, 0.05])
        law /= law.sum(1, keepdims=True)
        m = TreeModel("flat", 0, vocab, law, law, law.astype(np.float32), law.astype(np.float32))
        want = np.argsort(-law, axis=1, kind="stable")
        for k in (1, 7, 12, 40, 700):
            assert (m.draft_top(k) == want[:, :min(k, vocab)]).all(), (vocab, k)
