"""The tree verifier's judge: built-ins pass what they declare, fail what they do not; the exact
checks fail on broken outputs.

Test plan: a small plan (``SMALL``: the exhaustive case at V = 4, a ragged truncated case at
V = 64, one-hot targets) so that every built-in is judged in seconds on two CPU cores; the gate's
own plan is larger (plans.py). Each built-in passes under its declared construction; SpecInfer
fails on ``topk`` trees and target-only on ``iid`` trees (the table of docs/verify_tree.md);
outputs that break the contract (a path that is not a chain, a shape, an input written) fail the
``contract`` check with their cause, and a failure carries an ``equiv check --op verify_tree``
REPRO.
"""
import pytest
import torch

from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.paths import VERIFIERS
from equiv.ops.verify_tree.plans import constructions_of
from equiv.ops.verify_tree.recipes import TreeRecipe

SMALL = (("flat:vocab=4,nodes=6,depth=2,fanout=2", 6000),
         ("flat_far:vocab=4,nodes=6,depth=2,fanout=3", 6000),
         ("truncated:vocab=64,nodes=10,depth=3,fanout=3,ragged=1", 3000),
         ("onehot_target:vocab=64,nodes=8,depth=3,fanout=3", 512))


def small_cases(drafts, seed=0):
    return [Case(TreeRecipe.parse(t).with_(drafts=c, batch=b, seed=seed), 1, seed, statistical=True)
            for c in constructions_of(drafts) for t, b in SMALL]


def judged(fn, drafts, name="x"):
    targets = getattr(fn, "targets", None)
    cases = small_cases(drafts)
    if targets == "onehot":
        cases = [Case(c.recipe.with_(family="onehot_target"), 1, 0, True) for c in cases]
    return run_judge(fn, cases, device="cpu", drafts=drafts, spec=name)


@pytest.mark.parametrize("name", sorted(VERIFIERS))
def test_every_builtin_passes_its_declared_construction(name):
    fn = VERIFIERS[name]
    v = judged(fn, fn.drafts if fn.drafts != "any" else "topk", name)
    assert v.passed, v.summary()
    assert {c.name for c in v.checks} >= {"contract", "support", "marginal", "joint", "exhaustive"}


@pytest.mark.parametrize("name,drafts,check", [("specinfer", "topk", "exhaustive"),
                                               ("target_only", "iid", "exhaustive"),
                                               ("recursive_rejection", "topk", "exhaustive"),
                                               ("specinfer", "wor", "exhaustive")])
def test_builtins_fail_constructions_they_do_not_declare(name, drafts, check):
    v = judged(VERIFIERS[name], drafts, name)
    assert not v.passed and check in [c.name for c in v.failed], v.summary()
    assert all(c.repro.startswith("REPRO: equiv check --op verify_tree") for c in v.failed if c.repro)


def test_greedy_used_for_sampling_fails():
    v = run_judge(VERIFIERS["greedy"], small_cases("topk"), device="cpu", drafts="topk", spec="greedy")
    assert not v.passed and "marginal" in [c.name for c in v.failed]


def test_efficiency_of_target_only_is_the_tree_optimum():
    v = judged(VERIFIERS["target_only"], "topk")
    for e in v.efficiency:
        assert e["token_optimum"] is not None
        assert abs(e["accept_length"] - e["token_optimum"]) < 5 * e["stderr"] + 1e-9, e


def _broken(kind):
    def fn(parents, tokens, q, p, gen):
        path, out = VERIFIERS["target_only"](parents, tokens, q, p, gen)
        if kind == "not a chain":
            path[:, 1] = torch.where(path[:, 1] > 0, parents.shape[1] - 1, path[:, 1])
        elif kind == "shape":
            return path[:, :-1], out
        elif kind == "input write":
            p[0, 0, 0] = 0.5
        elif kind == "tokens":
            out[:, 0] = torch.where(path[:, 1] > 0, out[:, 0] + 1, out[:, 0])
        return path, out
    return fn


@pytest.mark.parametrize("kind,cause", [("not a chain", "path layout"), ("shape", "output type"),
                                        ("input write", "input write"), ("tokens", "path layout")])
def test_contract_failures_name_their_cause(kind, cause):
    case = Case(TreeRecipe.parse("realistic:batch=64,vocab=64,nodes=12,depth=3,fanout=3"), 1, 0)
    v = run_judge(_broken(kind), [case], device="cpu", drafts="topk", spec="broken")
    bad = [c for c in v.failed if c.name == "contract"]
    assert bad and bad[0].evidence["cause"] == cause, v.summary()
    assert bad[0].repro.startswith("REPRO: equiv check --op verify_tree")
