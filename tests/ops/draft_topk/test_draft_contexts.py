"""Issue 34, the draft step: calling contexts, guard bands, the new shape classes, long histories,
the default k, and the diagnosis of defects of the call.

Plan: the context mechanism sets what it names (``equiv.run.context``), reaches the candidate's
worker, and rotates with guard bands in a probe; the quick plan reaches V % 128 == 64,
V % 256 == 128, B > 4096 and every context for any seed; each hostile candidate of
tests/candidates/draft_contexts.py (one per class, wrong only there) fails the stage that must see
it, on a small targeted plan (the whole quick gate on each: scripts/draft_hostile_table.py),
while the correct ones pass; the diagnosis names k-dependence, context-dependence and
staleness N calls later by cause.
"""
import os
import threading

import numpy as np
import pytest
import torch

from equiv.checks import Check
from equiv.errors import InvalidArgument
from equiv.ops.draft_topk import history, ksupport, space
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.coverage import Shape, TolerancePlan, tolerance_plan
from equiv.ops.draft_topk.diagnose import dimensions
from equiv.ops.draft_topk.diagnose.core import diagnose
from equiv.ops.draft_topk.gate_stages import tolerance_checks
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe
from equiv.options import RunOptions, auto_ks
from equiv.run import runner_for
from equiv.run.context import CONTEXTS, available, check_context
from equiv.run.seeded import InputWritten, Rotating, call_in


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
HERE = os.path.join(TESTS, "candidates", "draft_contexts.py")


def spec(name: str) -> str:
    return f"{HERE}:{name}"


def _state(x, k):
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
            threading.current_thread() is threading.main_thread())


def test_call_in_sets_each_context_even_inside_inference_mode():
    want = {"grad": (True, False, True), "no_grad": (False, False, True),
            "inference_mode": (False, True, True), "thread": (True, False, False)}
    assert available("cpu") == tuple(want) and "side_stream" in CONTEXTS
    for outer in (torch.enable_grad, torch.inference_mode):
        with outer():
            assert {c: call_in(c, _state, (None, 1)) for c in available("cpu")} == want


def test_call_in_thread_hands_back_any_exception():
    def leaves(x, k):
        raise SystemExit(3)

    with pytest.raises(SystemExit):
        call_in("thread", leaves, (None, 1))
    with pytest.raises(InvalidArgument, match="side_stream needs a CUDA device"):
        check_context("side_stream", "cpu")


def test_rotating_deals_contexts_and_offsets_and_sees_input_writes():
    calls = Rotating(lambda x, k: (x.storage_offset(), torch.is_inference_mode_enabled()),
                     ("grad", "inference_mode"), (1, 5), "cpu")
    got = [calls(torch.zeros(2, 3), 1) for _ in range(4)]
    assert [g[1] for g in got] == [False, True, False, True]
    assert got[0][0] % 64 == 1 and got[1][0] % 64 == 5        # float32: 64 elements = 256 B aligned
    assert calls.used == {"grad": 2, "inference_mode": 2}

    def writes(x, k):
        x[0, 0] = 7.0
        return x

    with pytest.raises(InputWritten, match="modified its input logits in call 1"):
        Rotating(writes, ("grad",), (0,), "cpu")(torch.zeros(2, 3), 1)


@pytest.mark.parametrize("seed", range(6))
def test_quick_plan_reaches_the_new_classes(seed):
    plan = tolerance_plan(FAMILIES, ("float32", "bfloat16"), seed=seed, max_shape_elements=2 ** 25)
    vclasses = {c for v in plan.vocabs for c in space.vocab_classes(v)}
    bclasses = {c for b in plan.batches for c in space.batch_classes(b)}
    assert {"V % 128 == 64", "V % 256 == 128"} <= vclasses
    assert "past 4096" in bclasses
    big = [s for s in plan.shapes() if s.batch > 4096]
    assert big and all(s.vocab <= 1025 for s in big)             # cheap on a CPU
    dealt = space.context_draws(np.random.default_rng(seed), "cpu", len(plan.shapes()))
    assert set(dealt) == set(available("cpu"))


def test_space_classes():
    assert "V % 128 == 64" in space.vocab_classes(32064) and "real" in space.vocab_classes(32064)
    assert "V % 256 == 128" in space.vocab_classes(384) and "V % 128 == 64" not in space.vocab_classes(384)
    assert space.batch_classes(4097)[0] == "past 4096" and space.batch_classes(4096)[0] == "past 1024"
    assert space.context_of("a recipe", "cpu") == space.context_of("a recipe", "cpu")


def _plan(shapes, family="gaussian", dtype="float32"):
    return TolerancePlan(0, (((family, dtype), tuple(shapes)),))


def _tolerance(name, shapes, ks=(1,), thin=()):
    checks, stage = tolerance_checks(spec(name), ks=ks, device="cpu", dtypes=("float32",), batch=2, seeds=1,
                                     seed=0, vocab=1025, timeout=60, plan=_plan(shapes), thin_ks=thin)
    return checks, stage


@pytest.mark.parametrize("name,bad", [("wrong_under_inference_mode", "inference_mode"),
                                      ("wrong_under_no_grad", "no_grad"),
                                      ("wrong_off_main_thread", "thread")])
def test_context_hostiles_fail_the_tolerance_stage_in_their_context(name, bad):
    checks, stage = _tolerance(name, [Shape(2, 1025)] * 4)       # four runs: each context once
    assert [c.passed for c in checks] == [False]                  # it stops at the first failing run
    assert checks[0].evidence["context"] == bad and f"--context {bad}" in checks[0].repro
    for ctx in available("cpu"):                                  # wrong there only
        res = compare(spec(name), Recipe(family="gaussian", seed=0, batch=2, vocab=1025), context=ctx, timeout=60)
        assert res.passed == (ctx != bad), ctx


def test_correct_candidate_passes_every_context():
    checks, stage = _tolerance("correct_reference", [Shape(2, 1025)] * 4)
    assert all(c.passed for c in checks) and set(stage.ran["contexts"]) == set(available("cpu"))


@pytest.mark.parametrize("name,bad,good", [("wrong_at_half_tile", Shape(2, 32064), Shape(2, 32000)),
                                           ("wrong_past_4096_rows", Shape(4097, 33), Shape(4096, 33))])
def test_shape_hostiles_fail_only_at_their_class(name, bad, good):
    checks, _ = _tolerance(name, [good])
    assert all(c.passed for c in checks)
    checks, _ = _tolerance(name, [good, bad])
    assert not checks[0].passed and str(bad.vocab) in checks[0].counterexample


def test_every_vocabulary_class_reaches_the_finest_dtype_gaussian_check():
    """A shape bug that moves 0.2 % of the softmax is seen in float32's tolerance only: each
    vocabulary class of the space is on the float32 gaussian check, whatever the seed."""
    for seed in range(20):
        plan = tolerance_plan(FAMILIES, ("float32", "bfloat16"), seed=seed)
        fine = dict(plan.checks)[("gaussian", "float32")]
        classes = {c for s in fine for c in space.vocab_classes(s.vocab)}
        assert {"V % 128 == 64", "V % 256 == 128", "prime", "power of two"} <= classes, (seed, classes)


def test_a_skipped_half_tile_fails_the_float32_gaussian_check():
    res = compare(spec("skips_half_tile"), Recipe(family="gaussian", seed=0, batch=2, vocab=32064), timeout=60)
    assert not res.passed
    res = compare(spec("skips_half_tile"), Recipe(family="gaussian", seed=0, batch=2, vocab=32000), timeout=60)
    assert res.passed


def _history(name, **kw):
    plan = history.plan_for("quick", 0, max_batch=2, max_vocab=1009, **kw)
    out = runner_for(spec(name), "cpu", 120).probe("equiv.ops.draft_topk.history:probe", plan.payload(), timeout=120)
    assert out.ok, out.problem
    return plan, history.problems(plan, out.value)


def test_history_reaches_200_calls_and_16_later_rereads():
    plan, found = _history("correct_reference")
    assert found == [] and plan.calls >= 200 and plan.keep - 1 == 16
    assert set(plan.contexts) == set(available("cpu")) and len(set(plan.offsets)) > 4


def test_history_catches_an_output_overwritten_8_calls_later():
    _, found = _history("stale_ring_8")
    assert found[0].what == "reread" and found[0].later == 8 and "later:8" in found[0].parts


def test_history_catches_a_switch_after_100_calls():
    _, found = _history("switches_after_100_calls")
    assert found[0].what == "run" and found[0].call >= 100


def test_history_sees_an_input_written_in_its_guard_band(tmp_path):
    path = tmp_path / "writes.py"
    path.write_text("import torch\n"
                    "def f(x, k):\n"
                    "    p = torch.softmax(x.float(), -1).topk(k, -1)\n"
                    "    x.view(-1)[-1] = 0.5\n"
                    "    return p\n")
    plan = history.plan_for("quick", 0, max_batch=2, max_vocab=65)
    out = runner_for(f"{path}:f", "cpu", 60).probe("equiv.ops.draft_topk.history:probe", plan.payload(), timeout=60)
    found = history.problems(plan, out.value)
    assert found[0].what == "written" and "modified its input" in found[0].line


def test_k_support_declared_or_refused():
    def taken(name):
        return ksupport.accepted(runner_for(spec(name), "cpu", 60), timeout=60)

    assert taken("correct_declares_k").accepted == (1, 2)
    refused = taken("correct_refuses_k8")
    assert refused.accepted == (1, 2, 4) and "NotImplementedError" in refused.refused[8]
    assert taken("wrong_at_k_ge_2").accepted == (1, 2, 4, 8)     # a wrong answer is judged, not excused


def test_default_k_is_auto_and_crosses_to_the_suite():
    opts = RunOptions.make("softmax_topk", k="auto")
    assert opts.ks == auto_ks(0) and opts.k_auto and "--equiv-k=auto" in opts.pytest_args()
    assert not RunOptions.make("softmax_topk", k="1,4").k_auto


def test_k_hostile_fails_only_at_k_2_in_the_thin_plan():
    checks, stage = _tolerance("wrong_at_k_ge_2", [Shape(3, 1025), Shape(2, 4097)], ks=(1, 2), thin=(2,))
    assert [(c.evidence or {}).get("k") for c in checks if not c.passed] == [2]
    assert stage.ran["calls"] == 3                               # k = 2: one shape of the check


def _failing(name, k=1, context=None, recipe="gaussian:seed=0,batch=2,vocab=1025,dtype=float32", **kw):
    res = compare(spec(name), Recipe.parse(recipe), k=k, context=context, timeout=60)
    assert not res.passed
    return Check("tolerance", f"tolerance:gaussian:float32:k{k}", False, "x", subject="gaussian:float32",
                 recipe=res.recipe, repro=res.repro, evidence={"k": k, "context": context}, **kw)


def test_diagnosis_names_k_dependence():
    found, claimed, calls = dimensions.by_dimension(spec("wrong_at_k_ge_2"), [_failing("wrong_at_k_ge_2", k=2)],
                                                    (1, 2, 4, 8), "cpu", 60)
    assert [d.cause for d in found] == ["k_dependent"] and claimed == {"tolerance:gaussian:float32:k2"}
    assert "right at k = 1" in found[0].evidence and calls == 2


def test_diagnosis_names_context_dependence():
    check = _failing("wrong_under_no_grad", context="no_grad")
    found, claimed, _ = dimensions.by_dimension(spec("wrong_under_no_grad"), [check], (1,), "cpu", 60)
    assert [d.cause for d in found] == ["context_dependent"] and found[0].data["failing_contexts"] == ["no_grad"]


@pytest.mark.parametrize("name,n", [("stale_ring_3", 3), ("stale_ring_8", 8)])
def test_diagnosis_names_staleness_n_calls_later(name, n):
    check = Check("properties", "property:call_history", False, "x", parts=("history:reread", f"later:{n}"))
    if n == 3:                                   # what the per-call re-check of equiv.run reports
        check = Check("tolerance", "tolerance:gaussian:float32", False, "contract: overwrote the outputs",
                      subject="gaussian:float32", recipe="gaussian:seed=0,batch=2,vocab=1025,dtype=float32",
                      outcome="outputs", cause="outputs", parts=("contract",))
    diag = diagnose(spec(name), [check], k=1, device="cpu", timeout=60, budget_s=60)
    assert [d.cause for d in diag.defects] == ["output_reused"], diag.summary()
    assert f"overwritten {n} calls later" in diag.defects[0].evidence


@pytest.mark.equiv_gpu
def test_side_stream_runs_off_the_current_stream_on_a_gpu():
    assert "side_stream" in available("cuda")

    def where(x, k):
        return torch.cuda.current_stream().cuda_stream, x.sum().item()

    x = torch.ones(4, 8, device="cuda")
    stream, total = call_in("side_stream", where, (x, 1), "cuda")
    assert stream != torch.cuda.current_stream().cuda_stream and total == 32.0
    res = compare(spec("correct_reference"), Recipe(family="gaussian", seed=0, batch=2, vocab=1025),
                  device="cuda", context="side_stream", timeout=120)
    assert res.passed and res.context == "side_stream"
