"""The chain verifier called as engines call it (equiv/run/calling.py): the hostile round of issue 43.

Test plan: each verifier of tests/candidates/calling_hostile.py is torch_sampler with one defect
that only one calling dimension shows (a cache keyed by pointer and shape, or also by version; a
static output buffer; a lossy path under inference_mode, under no_grad, on another thread; dense
strides on a padded target; a generator it never advances). On a small plan of its own -- a
statistical case whose dealt classes (``calls.calling_of``, from its generator seed) hold the
dimension, and the independence case -- each FAILS with the calling layer, and PASSES with
``EQUIV_CALLING=plain`` (the plain calling of before: caller's context, inputs as built, fresh
generators, no history), where its outputs are torch_sampler's own; torch_sampler passes with
the layer. ``ignores_storage_offset`` fails both ways (the guard band before every input was
there before). The deal is deterministic from the case (REPRO replays it) and the coverage line
names where every class was judged.
"""
import os
import sys
from functools import partial

import pytest

from equiv.ops.verify.draws import calling_of
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.plans import plan
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.run.calling import reach

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
import calling_hostile as H  # noqa: E402

STAT = VerifyRecipe(family="realistic", seed=5, batch=3001, n=2, vocab=257, problems=8, draft="probs",
                    drafts="sampled")
INDEPENDENCE = VerifyRecipe(family="realistic", seed=6, batch=611, n=3, vocab=40, problems=1, drafts="fixed")
NEEDS = H.needs("chain", 2)   # what each hostile needs of its statistical case's calling


def _cases(name):
    """A statistical case whose dealt classes hold ``name``'s dimension, and the independence case."""
    seed = next(1000 * k for k in range(24) if NEEDS[name](calling_of((1000 * k, 1000 * k))))
    return [Case(STAT, 1, seed, statistical=True),
            Case(INDEPENDENCE, 2, 777_000, purpose="independence")]


@pytest.mark.parametrize("name", list(NEEDS))
def test_each_hostile_fails_with_the_layer_and_passed_before(name, monkeypatch):
    H.check_round(name, partial(run_judge, getattr(H, name), device="cpu", spec=name), _cases(name), monkeypatch)


@pytest.mark.parametrize("name", ["chain_cache_by_pointer", "chain_lossy_under_inference_mode",
                                  "chain_dense_strides", "chain_restores_generator"])
def test_torch_sampler_passes_the_same_cases(name, monkeypatch):
    monkeypatch.delenv("EQUIV_CALLING", raising=False)
    v = run_judge(torch_sampler, _cases(name), device="cpu", spec=name)
    assert v.passed, v.summary()


def test_the_deal_is_the_case_s_and_every_class_is_judged_statistically():
    cases = plan("quick", 0)
    assert calling_of(cases[3].seeds) == calling_of(tuple(cases[3].seeds))      # REPRO: seeds alone
    line = reach([(calling_of(c.seeds), c.statistical or c.purpose == "independence") for c in cases])
    stat, exact_only, missed = (part.split(": ", 1)[1] for part in line.split(" | "))
    assert "thread" in stat and "rewritten (no version bump)" in stat and "sliced" in stat and "kept" in stat
    assert exact_only == "none" and missed.startswith("none"), line
