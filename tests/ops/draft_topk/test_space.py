"""The input space of issue 23: every dimension is planned, drawn, reported, and can fail.

Plan: the quick CPU plan places every class of every dimension (and the CUDA full plan a shape
past 2**31 elements); the confident and masked families build what they promise; for each
dimension the zoo's mutant that is wrong only there fails ``compare`` (or the call history) on
the input the plan draws for it while the correct paths and legal variants pass the same
input; the coverage table reaches the gate's JSON and console; a slow input build does not
count against the candidate's time-out. The whole quick gate per mutant is in the selftest
(``equiv selftest``); these checks take seconds.
"""
from __future__ import annotations

import pytest
import torch

from equiv import Recipe, compare
from equiv.ops.draft_topk import history, space
from equiv.ops.draft_topk.confidence import BAND_NAMES, row_bands
from equiv.ops.draft_topk.coverage import tolerance_plan
from equiv.ops.draft_topk.recipes import FAMILIES

CORRECT = ("softmax_topk", "identity_top1", "equiv.ops.draft_topk.mutants:ties_to_last_index",
           "equiv.ops.draft_topk.mutants:float64_compute")


def _plan_recipes(dtypes=("float32", "bfloat16"), **kw):
    plan = tolerance_plan(FAMILIES, dtypes, **kw)
    return [Recipe(family=f, batch=s.batch, vocab=s.vocab, dtype=d, pad=s.pad, offset=s.offset)
            for (f, d), shapes in plan.checks for s in shapes]


@pytest.mark.parametrize("seed", range(4))
def test_the_quick_plan_reaches_every_class(seed):
    reach = space.reach(_plan_recipes(seed=seed, max_shape_elements=2 ** 25))
    assert {"real", "power of two", "power of two +-1", "multiple of 2**j", "multiple of 2**j +-1",
            "prime", "unlisted"} <= set(reach["vocab"])
    assert {"1", "past 1024", "tree", "power of two", "power of two +-1"} <= set(reach["batch"])
    assert {"base not 16 B aligned", "row stride % 16 B != 0", "view into a larger buffer",
            "contiguous"} <= set(reach["layout"])
    assert set(reach["mask"]) == set(space.MASKS)
    assert set(reach["confidence"]) == set(BAND_NAMES)


def test_the_full_cuda_plan_has_a_shape_past_2_to_the_31():
    plain = tolerance_plan(FAMILIES, ("float32", "bfloat16", "float16"), max_shape_elements=2 ** 28)
    huge = tolerance_plan(FAMILIES, ("float32", "bfloat16", "float16"), max_shape_elements=2 ** 28, huge=True)
    assert max(s.elements for s in plain.shapes()) < 2 ** 31
    assert any(s.elements > 2 ** 31 for s in huge.shapes_for("gaussian", "bfloat16"))


def test_the_gate_asks_for_the_huge_shape_on_cuda_full_only_when_the_memory_budget_holds_it():
    from equiv import memory
    from equiv.ops.draft_topk.coverage import reaches_huge

    assert not reaches_huge("cuda", "full")              # 4 GiB of logits x 6 copies: past the default 8 GiB
    memory.use_budget(25 * memory.GiB)
    try:
        assert reaches_huge("cuda", "full") and reaches_huge("cuda:0", "full")
        assert not reaches_huge("cuda", "quick") and not reaches_huge("cpu", "full")
    finally:
        memory.use_budget(None)
    plan = tolerance_plan(FAMILIES, ("bfloat16",), huge=True)
    assert space.HUGE_SHAPE in {(s.batch, s.vocab) for s in plan.shapes()}
    assert space.HUGE_SHAPE[0] * space.HUGE_SHAPE[1] > 2 ** 31


def test_confident_rows_span_the_bands_and_reach_the_shortcut():
    r = Recipe(family="confident", batch=64, vocab=32000, seed=0)
    p = torch.softmax(r.build().double(), -1).max(-1).values.numpy()
    assert p.min() < 1e-3 and 1 - p.max() < 1e-6
    assert ((1 - p > 2.0 ** -11) & (1 - p <= 1e-3)).any()       # where 1.0 is out of tolerance
    assert row_bands(r) == tuple(sorted(BAND_NAMES))
    one = Recipe(family="confident", batch=6, vocab=4097, band="1-p 1e-5..1e-7", dtype="float32")
    q = 1 - torch.softmax(one.build().double(), -1).max(-1).values.numpy()
    assert ((q > 5e-8) & (q < 2e-5)).all()


@pytest.mark.parametrize("family", FAMILIES)
def test_without_a_layout_request_every_family_is_row_major(family):
    """The layout is the recipe's pad / offset alone: the confident family's arithmetic once left a
    column-major array (``rng.permuted``), so its logits were non-contiguous; the values must stay."""
    import numpy as np

    from equiv.ops.draft_topk.confidence import confident_rows

    r = Recipe(family=family, batch=8, vocab=4097, seed=3)
    x = r.build()
    assert x.is_contiguous() and x.stride() == (4097, 1) and x.storage_offset() == 0
    if family == "confident":
        expected = confident_rows(np.random.default_rng(r.seed), r).astype(np.float32)
        assert not expected.flags["C_CONTIGUOUS"]          # what the family's arithmetic gives
        assert np.array_equal(x.numpy(), expected)           # the same values, now row-major
    assert r.with_(offset=1).build().storage_offset() == 1              # asked for: a layout


def test_masked_rows_put_neginf_where_their_kind_says():
    r = Recipe(family="masked", batch=14, vocab=300, seed=2)
    x = r.build()
    kinds = space.mask_kinds(r)
    assert x.isfinite().any(-1).all()
    for b, kind in enumerate(kinds):
        ninf = torch.isinf(x[b])
        if kind == "front":
            assert ninf[0] and not ninf[-1]
        if kind in ("first_only", "last_only", "one_left"):
            assert int((~ninf).sum()) == 1
        if kind == "first_only":
            assert not ninf[0]


def _fails(spec, recipe, k=1) -> str:
    res = compare(spec, recipe, k=k)
    return "" if res.passed else "; ".join(f"{c.name}: {c.detail}" for c in res.failed_checks)


DIMENSION_CASES = {
    "generic_vocab_broken": Recipe(family="gaussian", batch=3, vocab=65536, seed=1),
    "rows_past_1024_unwritten": Recipe(family="gaussian", batch=1280, vocab=33, seed=1),
    "aligned_base_assumed": Recipe(family="zipf", batch=3, vocab=4099, seed=1, offset=3),
    "trims_at_first_neginf": Recipe(family="masked", batch=14, vocab=4097, seed=0),
    "confident_rounded_to_one": Recipe(family="confident", batch=64, vocab=32000, seed=0),
    "tensor_subclass_output": Recipe(family="gaussian", batch=2, vocab=33),
}


@pytest.mark.parametrize("name", list(DIMENSION_CASES))
def test_each_dimension_mutant_fails_its_dimension_only(name):
    recipe = DIMENSION_CASES[name]
    assert _fails(f"equiv.ops.draft_topk.mutants:{name}", recipe)
    old = Recipe(family="gaussian", batch=4, vocab=129280, seed=1)    # the old catalogue's input
    if name != "tensor_subclass_output":
        assert not _fails(f"equiv.ops.draft_topk.mutants:{name}", old)
    for spec in CORRECT:
        assert not _fails(spec, recipe), spec


def test_a_tensor_subclass_is_a_contract_failure_naming_its_type():
    detail = _fails("equiv.ops.draft_topk.mutants:tensor_subclass_output", DIMENSION_CASES["tensor_subclass_output"])
    assert detail.startswith("contract:") and "tensor subclass" in detail and "_ReportedTensor" in detail


@pytest.mark.parametrize("name, needle, what", [("recycled_output_ring", "kept alive, changed", "reread"),
                                                ("keyed_by_data_ptr", "rewritten in place", "in_place"),
                                                ("changes_after_48_calls", "after 48 calls", "run")])
def test_call_history_mutants_fail_and_correct_paths_pass(name, needle, what):
    from equiv.ops.draft_topk import mutants
    from equiv.ops.draft_topk.history_plan import RUN_CALLS
    from equiv.ops.draft_topk.paths import get_path
    from equiv.ops.draft_topk.recipes import Recipe

    mutants._CALLS_PER_SHAPE.clear()     # the worker is fresh in a gate; here the process is shared
    mutants._RING.clear()                # (buffers another test made under inference_mode included)
    plan = history.plan_for("quick", 0)
    payload = plan.payload()
    found = history.problems(plan, history.probe(getattr(mutants, name), "cpu", payload))
    assert found and needle in found[0].line and found[0].what == what          # as data too
    assert f"history:{what}" in found[0].parts
    recipe = Recipe.parse(found[0].recipe)              # the call's recipe, with its guard-band offset
    assert str(recipe.with_(offset=0)) in plan.recipes and recipe.offset in (0, plan.offsets[found[0].call])
    assert plan.calls > 48 and RUN_CALLS["full"] > RUN_CALLS["quick"]
    for fn in (get_path("softmax_topk"), mutants.ties_to_last_index):
        assert history.judge(plan, history.probe(fn, "cpu", payload)) == []


def test_the_gate_result_carries_the_coverage_table():
    from equiv.checks import Stage
    from equiv.verdict import GateResult
    from equiv.ops.draft_topk.history_plan import gate_coverage

    tol = Stage("tolerance", "pass", 1, 1, ran={"coverage": space.reach(DIMENSION_CASES.values())})
    props = Stage("properties", "pass", 1, 1, ran={"examples": {"call_history": 70}})
    cov = gate_coverage((tol, props), "quick")
    assert {"vocab", "batch", "layout", "mask", "confidence", "history", "calls per shape"} <= set(cov)
    res = GateResult("x", True, (), (1,), "cpu", ("float32",), "quick", 0, 1.0, stages=(tol, props),
                     coverage=cov, coverage_lines=tuple(space.table_lines(cov)))
    assert res.to_json()["coverage"] == cov
    assert "coverage:" in res.summary() and "calls per shape" in res.summary()
    assert "not run" in gate_coverage((tol,), "quick")["history"]


class SlowInput:
    """An input whose build takes ``seconds`` (our builder's time, not the candidate's)."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def build(self, device="cpu"):
        import time

        time.sleep(self.seconds)
        return Recipe(batch=2, vocab=64).build(device)


def test_the_time_out_counts_the_call_not_the_input_build():
    from equiv.run import CandidateSpec
    from equiv.run.supervisor import WorkerRunner

    runner = WorkerRunner(CandidateSpec.parse("tests/candidates/misbehaving.py:correct"), "cpu", timeout=60.0)
    try:
        assert runner.call(Recipe(batch=1, vocab=8), 1).ok             # loaded
        out = runner.call(SlowInput(3.0), 1, timeout=1.0)
        assert out.ok, out.problem
        hung = WorkerRunner(CandidateSpec.parse("tests/candidates/misbehaving.py:hangs"), "cpu", timeout=1.0)
        try:
            out = hung.call(SlowInput(2.0), 1)
            assert out.kind == "timeout" and "within 1 s during the call" in out.problem
        finally:
            hung.close()
    finally:
        runner.close()
