"""Hostile verifiers wrong in one dimension only (tests/candidates/verify_hostile.py) fail the
cases the plan draws for that dimension, at every one of three plan seeds; correct ones pass.

Test plan: each hostile verifier is judged in process on the slot of the quick plan that reaches
its dimension (``Case.purpose``: ``deep`` for position 3+, n >= 9 and an acceptance test wrong
from position 11 on (the side score), ``wide`` for V > 2**17 and a residual cut to its top 1024
past V = 160000,
``many rows`` and ``deep`` (batches never a multiple of 64) for the rows after the last one, ``independence`` for shared randomness,
``joint exact`` for the lossy block verifiers), and on the slots that do NOT reach it it must
pass: wrong only there. The whole gate on every candidate is ``scripts/verify_hostile_table.py``
(docs/verify.md has its table).
"""
import os
import sys

import pytest

from equiv.ops.verify.judge import run_judge
from equiv.ops.verify.plans import statistical_cases

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
import verify_hostile as H  # noqa: E402


# name: (the purposes whose case must catch it, a purpose whose case must not)
WHERE = {
    "wrong_from_position_3": ("deep", "wide"),
    "wrong_past_2_17": ("wide", "deep"),
    "wrong_after_last_64": ("many rows+deep", None),
    "wrong_for_n_ge_9": ("deep", "many rows"),
    "accepts_more_from_position_11": ("deep", "wide"),
    "top_1024_past_160000": ("wide", "deep"),
    "rows_share_uniforms": ("independence", None),
    "calls_share_state": ("independence", None),
    "block_weights_unclamped": ("joint exact", None),
    "block_keep_unweighted_mass": ("joint exact", None),
    "block_last_keep_one": ("joint exact", None),
}


def _cases(seed, purposes):
    return [c for c in statistical_cases("quick", seed=seed) if c.purpose in purposes.split("+")]


# An open gap, stated in docs/verify.md ("wrong_after_last_64"): since the lossless law reads a
# drawn draft as text (issue 42: a capped verifier is lossless), this hostile's wrong rows (1-16 %
# of a case) are seen only by the statistics: the slots drawn for it ("many rows", "deep") pass it
# at plan seeds 0-2, and only the whole plan's wide slot fails it at seed 0 (p 4.9e-11). Strict:
# the day those slots catch it, these cases fail here as XPASS.
GAPS = {("wrong_after_last_64", 0), ("wrong_after_last_64", 1), ("wrong_after_last_64", 2)}


def _with_gaps(names, seeds):
    return [pytest.param(n, s, marks=pytest.mark.xfail(strict=True, reason="open gap: docs/verify.md"))
            if (n, s) in GAPS else (n, s) for n in names for s in seeds]


@pytest.mark.parametrize("name, seed", _with_gaps(sorted(WHERE), [0, 1, 2]))
def test_hostile_fails_where_it_is_wrong(name, seed):
    H._STATE.clear()
    catch, spare = WHERE[name]
    cases = _cases(seed, catch)
    if name == "wrong_after_last_64":
        assert all(c.recipe.batch % 64 for c in cases)
    v = run_judge(getattr(H, name), cases, device="cpu", spec=name, seed=seed)
    assert not v.passed, f"{name} passed {[str(c.recipe) for c in cases]}"
    assert all(c.repro for c in v.failed if c.recipe)
    if spare:
        H._STATE.clear()
        assert run_judge(getattr(H, name), _cases(seed, spare), device="cpu", spec=name, seed=seed).passed


def test_a_top_1024_residual_fails_the_whole_plan_not_only_its_slot():
    # the wide cases' tokens are groups of their own (judge.OWN_GROUPS): pooled with the realistic
    # family's other cases per position, this hostile passed the whole plan (rank cells p 0.009)
    v = run_judge(H.top_1024_past_160000, statistical_cases("quick", seed=0), device="cpu", spec="h", seed=0)
    assert [c.name for c in v.failed] == ["marginal"] and ":wide:position" in v.failed[0].detail


@pytest.mark.parametrize("name", ["correct_torch", "correct_block", "correct_other_stream"])
def test_correct_ones_pass_the_new_slots(name):
    cases = [c for c in statistical_cases("quick", seed=1) if c.purpose in ("deep", "many rows", "independence",
                                                                             "joint exact")]
    v = run_judge(getattr(H, name), cases, device="cpu", spec=name, seed=1)
    assert v.passed, v.summary()


@pytest.mark.equiv_gpu
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_top_1024_residual_fails_the_gpu_plans_largest_vocabularies(seed):
    # with the CPU plan's three parts, the GPU's draws passed it at seed 0 (p = 6.9e-7 against a
    # level of 4.8e-7 in the whole plan): a GPU plan calls the case in LARGEST_PARTS_GPU parts
    cases = [c for c in statistical_cases("quick", seed=seed, device="cuda") if c.purpose == "wide" and c.recipe.part]
    v = run_judge(H.top_1024_past_160000, cases, device="cuda", spec="h", seed=seed)
    failed = {c.name: c.detail for c in v.failed}     # with 8 parts the joint test sees it too
    assert ":wide:position" in failed.get("marginal", ""), v.summary()
    assert run_judge(H.correct_torch, cases, device="cuda", spec="c", seed=seed).passed
