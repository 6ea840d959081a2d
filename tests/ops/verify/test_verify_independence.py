"""Shared randomness between rows and between calls (equiv/ops/verify/independence.py).

Test plan: the swap sign test (equiv.stats.joint) is exact: on 2000 sets of independent draws
of a skewed law its rejection rate at level 0.05 stays under 0.05 plus three standard errors,
and it rejects when the tested pairing copies; a bad input raises. On a small identical-rows case
(one problem, drafts fixed, two calls) the check passes correct verifiers (torch_sampler, block
verification, a sampler with another random stream) and fails a verifier whose row 2i+1 reuses
row 2i's uniforms and one that keeps its uniforms across calls, each naming its cause.
"""
import os
import sys

import numpy as np
import pytest

from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.paths import block_verification, torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.stats.joint import swap_sign_test

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
import verify_hostile as H  # noqa: E402


CASE = Case(VerifyRecipe(family="realistic", seed=2, batch=611, n=3, vocab=40, problems=1, drafts="fixed",
                         pad=3), 2, 500, purpose="independence")


def test_the_swap_sign_test_holds_its_level_and_sees_copies():
    rng = np.random.default_rng(0)
    law = np.array([0.5, 0.3, 0.15, 0.05])
    rejected = 0
    for _ in range(2000):
        a, b, a2, b2 = (rng.choice(4, size=200, p=law) for _ in range(4))
        t = swap_sign_test("x", (a == b).astype(int) + (a2 == b2), (a == b2).astype(int) + (a2 == b))
        rejected += t.p_value < 0.05
    assert rejected / 2000 < 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
    a, a2 = rng.choice(4, size=200, p=law), rng.choice(4, size=200, p=law)
    t = swap_sign_test("copy", np.full(200, 2), (a == a2).astype(int) * 2)
    assert t.p_value < 1e-10 and t.rate_gap > 0.5
    with pytest.raises(ValueError):
        swap_sign_test("x", np.zeros(3), np.zeros(4))


@pytest.mark.parametrize("fn", [torch_sampler, block_verification, H.correct_other_stream])
def test_correct_verifiers_pass(fn):
    v = run_judge(fn, [CASE], device="cpu", spec=fn.__name__)
    (check,) = [c for c in v.checks if c.name == "independence"]
    assert check.passed, check.detail


@pytest.mark.parametrize("name,cause", [("rows_share_uniforms", "shared randomness between rows"),
                                        ("calls_share_state", "shared randomness between calls")])
def test_shared_randomness_fails(name, cause):
    H._STATE.clear()
    v = run_judge(getattr(H, name), [CASE], device="cpu", spec=name)
    (check,) = [c for c in v.checks if c.name == "independence"]
    assert not check.passed and check.evidence["cause"] == cause, check.detail
    assert check.repro.startswith("REPRO: equiv check --op verify") and "--calls 2" in check.repro
    assert [c.name for c in v.failed] == ["independence"]          # the marginal law is right
