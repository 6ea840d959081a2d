"""Shared randomness in a tree verifier: rows of one tree in one call, and calls with different
generator seeds (equiv/ops/verify_tree/independence.py, the judge's ``independence`` check).

Test plan: a recipe with ``problems=P`` repeats row ``b % P``'s tree and targets exactly. On the
gate's independence cases the check passes the correct verifiers -- every built-in that draws
(under each construction it is judged on), a from-scratch target-only verifier and one that draws
from a NumPy stream seeded by the generator with its rows permuted -- and fails, naming the cause,
a verifier whose rows ``2k`` and ``2k+1`` share their coins and one that ignores its generator
(tests/candidates/tree_verifiers_random.py); their marginal laws are exact, so ``independence`` is
the only check that fails. Through the gate (statistics stage, small plan) the check is in the
console and the JSON with its defect, and the REPRO line's ``equiv check`` fails it again. The
check's level over >= 1000 seeds: docs/verify_tree.md ("Independence").
"""
import json
import os
import sys

import numpy as np
import pytest

from equiv.gate import run_gate
from equiv.ops.verify_tree import gate, paths
from equiv.ops.verify_tree.independence import independence_cases
from equiv.ops.verify_tree.judge import run_judge
from equiv.ops.verify_tree.recipes import TreeRecipe

from test_verify_tree_judge import small_cases

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
HERE = TESTS
sys.path.insert(0, os.path.join(HERE, "candidates"))
import tree_verifiers_random as R  # noqa: E402


SPEC = os.path.join(HERE, "candidates", "tree_verifiers_random.py")


def _independence(v):
    (check,) = [c for c in v.checks if c.name == "independence"]
    return check


def test_problems_repeat_one_tree_and_its_targets():
    r = TreeRecipe.parse("flat:batch=7,vocab=4,nodes=6,depth=2,fanout=2,drafts=iid,problems=2")
    assert TreeRecipe.parse(str(r)) == r and list(r.rows()) == [0, 1, 0, 1, 0, 1, 0]
    parents, tokens, q, p = (t.numpy() for t in r.build())
    for a in (parents, tokens, q, p):
        assert (a[2:] == a[:-2]).all()
    assert (tokens[0] != tokens[1]).any() or (parents[0] != parents[1]).any() or (p[0] != p[1]).any()
    two = TreeRecipe.parse("flat:batch=2,vocab=4,nodes=6,depth=2,fanout=2,drafts=iid")   # its problems
    assert two.n_problems == 2 and (two.trees().tokens == r.trees().tokens[:2]).all()


@pytest.mark.parametrize("fn,drafts", [(paths.target_only, "topk"), (paths.eagle_onehot, "any"),
                                       (paths.specinfer, "iid"), (paths.recursive_rejection, "wor"),
                                       (paths.target_only, "wor"), (R.correct, "topk"),
                                       (R.numpy_stream_permuted, "topk")])
def test_correct_verifiers_pass(fn, drafts):
    cases = independence_cases(drafts, seed=1)
    v = run_judge(fn, cases, device="cpu", drafts=drafts, spec=fn.__name__)
    check = _independence(v)
    assert v.passed and check.passed, v.summary()
    assert f"{3 * len(cases)} swap sign tests" in check.detail


def test_one_hot_targets_get_no_independence_case():
    assert independence_cases("topk", targets="onehot") == []


@pytest.mark.parametrize("name,cause,label", [("pair_shared_coins", "shared randomness between rows", "rows"),
                                              ("ignores_generator", "shared randomness between calls", "calls")])
def test_shared_randomness_fails_with_its_cause(name, cause, label):
    v = run_judge(f"{SPEC}:{name}", independence_cases("topk", seed=2), device="cpu", drafts="topk", spec=name)
    check = _independence(v)
    assert not check.passed and check.evidence["cause"] == cause, check.detail
    assert check.detail.startswith(label)
    assert [c.name for c in v.failed] == ["independence"]
    assert "problems=1" in check.repro and "--calls 2" in check.repro


@pytest.fixture
def small_plan(monkeypatch):
    def small(budget="quick", drafts="topk", seed=0, targets="any", **_):
        return small_cases(drafts, seed)
    monkeypatch.setattr(gate, "statistical_cases", small)      # the gate's plan (imported at its top)


def test_the_gate_names_the_cause_in_console_json_and_repro(small_plan):
    from equiv.api import check

    r = run_gate(f"{SPEC}:pair_shared_coins", op="verify_tree", stages="statistics", device="cpu")
    assert not r.passed
    doc = json.loads(json.dumps(r.to_json()))
    failed = [c for c in doc["checks"] if not c["passed"]]
    assert [c["name"] for c in failed] == ["statistics:independence"]
    assert [d["cause"] for d in doc["defects"]] == ["shared randomness between rows"]
    assert "statistics:independence" in r.summary() and "shared randomness between rows" in r.summary()
    assert "--recipe" in failed[0]["repro"] and "--calls 2" in failed[0]["repro"]
    recipe = failed[0]["repro"].split("--recipe '")[1].split("'")[0]
    again = check(f"{SPEC}:pair_shared_coins", recipe, op="verify_tree", calls=2, device="cpu")
    assert not again.passed
    assert any(c.name == "independence" and not c.passed for c in again.result.checks)
    ok = run_gate(f"{SPEC}:numpy_stream_permuted", op="verify_tree", stages="statistics", device="cpu")
    assert ok.passed, ok.summary()
    assert any(c["name"] == "statistics:independence" and c["passed"] for c in ok.to_json()["checks"])


def test_an_independent_verifier_matches_at_the_crossed_rate():
    """What the check compares: identical rows of a correct verifier match no more often than
    rows of different calls (here both near 0.1); the hostile's rows match always."""
    r = independence_cases("topk")[0].recipe
    built = r.build()
    import torch

    a = R.correct(*built, torch.Generator().manual_seed(0))[1].numpy()
    b = R.pair_shared_coins(*built, torch.Generator().manual_seed(0))[1].numpy()
    same = lambda o: float((o[0::2] == o[1::2]).all(-1).mean())          # noqa: E731
    assert same(a) < 0.3 and same(b) == 1.0
    assert np.isfinite(same(a))
