"""The tree verifier called as engines call it (equiv/run/calling.py): the hostile round of issue 43.

Test plan: each tree verifier of tests/candidates/calling_hostile.py is target_only with one
defect that only one calling dimension shows (a cache keyed by pointer and shape, or also by
version; a static output buffer; a lossy path under inference_mode, under no_grad, on another
thread; dense strides on a padded target; a generator it never advances). On a small plan of its
own -- a statistical case whose dealt classes (``calls.calling_of``, from its generator seed)
hold the dimension, and the independence case -- each FAILS with the calling layer and PASSES
with ``EQUIV_CALLING=plain`` (the plain calling of before), where its outputs are target_only's
own; target_only passes with the layer. ``ignores_storage_offset`` fails both ways (the guard
band before every input was there before). The tree gate's coverage names where every class of
every calling dimension was judged.
"""
import os
import sys
from functools import partial

import pytest

from equiv.ops.verify_tree.draws import calling_of
from equiv.ops.verify_tree.gate import _coverage
from equiv.ops.verify_tree.independence import independence_cases
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.paths import target_only
from equiv.ops.verify_tree.recipes import TreeRecipe

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
import calling_hostile as H  # noqa: E402

STAT = TreeRecipe.parse("realistic:seed=5,batch=3001,vocab=257,nodes=5,depth=2,fanout=2")
NEEDS = H.needs("tree", 3)   # what each hostile needs of its statistical case's calling


def _cases(name):
    """A statistical case whose dealt classes hold ``name``'s dimension, and the independence case."""
    seed = next(100 * k for k in range(24) if NEEDS[name](calling_of((100 * k, 100 * k))))
    return [Case(STAT, 1, seed, statistical=True)] + independence_cases("topk", 7)


@pytest.mark.parametrize("name", list(NEEDS))
def test_each_hostile_fails_with_the_layer_and_passed_before(name, monkeypatch):
    judge = partial(run_judge, getattr(H, name), device="cpu", drafts="topk", spec=name)
    H.check_round(name, judge, _cases(name), monkeypatch)


@pytest.mark.parametrize("name", ["tree_cache_by_pointer", "tree_lossy_under_inference_mode",
                                  "tree_dense_strides", "tree_restores_generator"])
def test_target_only_passes_the_same_cases(name, monkeypatch):
    monkeypatch.delenv("EQUIV_CALLING", raising=False)
    v = run_judge(target_only, _cases(name), device="cpu", drafts="topk", spec=name)
    assert v.passed, v.summary()


def test_the_gate_s_coverage_names_where_each_calling_class_was_judged():
    line = _coverage("quick", 0, "topk", "any", "cpu", {"properties", "statistics"})["calling"]
    stat, exact_only, missed = (part.split(": ", 1)[1] for part in line.split(" | "))
    assert "thread" in stat and "rewritten (no version bump)" in stat and "padded" in stat and "kept" in stat
    assert missed.startswith("none") and "side_stream" in missed, line
    assert _coverage("quick", 0, "topk", "any", "cpu", set()) == {}
