"""The GPU probes of ``equiv/ops/draft_topk/gpu_probes.py``: that they skip cleanly, and that each can fail.

Plan
- CPU: both probes skip with the reason without a CUDA device; a bad payload is one line; the
  row-agreement rule accepts a tie broken another way and rejects a wrong index; the
  batch-invariance measurement (which runs on any device) passes ``softmax_topk`` with bitwise
  required, and passes the batch-size-dependent reduction mutant without the requirement and
  fails it with; the static-buffer mutant shows its aliasing on plain eager calls.
- GPU (marker ``equiv_gpu``): ``graph_replay`` passes the four built-in paths and kills the
  static-buffer mutant, and reports a candidate that synchronises with the host as not
  capturable; ``batch_invariance`` passes the built-in paths within tolerance (bitwise is
  printed: which paths are batch-invariant is measured, not assumed) and kills the mutant only
  with the requirement.
"""
import pytest
import torch

import equiv
from equiv.ops.draft_topk import gpu_probes
from equiv.ops.draft_topk.mutants import GPU_MUTANTS

BUILTINS = ("softmax_topk", "hardcoded_one", "identity_top1", "fused_triton")
SMALL = {"vocab": 4097, "batches": (3, 64, 256)}


@pytest.mark.parametrize("probe", ["graph_replay", "batch_invariance"])
def test_skips_without_cuda_with_the_reason(probe):
    res = getattr(gpu_probes, probe)(equiv.get_path("softmax_topk"), "cpu")
    assert res.status == "skipped" and res.passed is False
    assert res.reason == "needs a CUDA device; this run is on cpu"
    assert res.to_json()["status"] == "skipped"


def test_unknown_payload_key_is_one_line():
    with pytest.raises(equiv.InvalidArgument, match=r"^payload key 'batch' is unknown: use .*b_max"):
        gpu_probes.graph_replay(equiv.get_path("softmax_topk"), "cpu", {"batch": 3})


def test_row_agreement_accepts_ties_and_rejects_a_wrong_index():
    x = torch.full((2, 10), -5.0)
    x[:, 3] = x[:, 7] = 2.0                       # an exact tie: index 3 or 7
    x[1, 1] = 1.0
    p = torch.softmax(x, -1)[:, 3:4]
    assert gpu_probes._disagreement(x, (p, torch.tensor([[7], [3]])), (p, torch.tensor([[3], [3]])), 1) is None
    problem = gpu_probes._disagreement(x, (p, torch.tensor([[3], [1]])), (p, torch.tensor([[3], [3]])), 1)
    assert problem is not None and problem.startswith("row 1:")
    off = gpu_probes._disagreement(x, (p * 1.01, torch.tensor([[3], [3]])), (p, torch.tensor([[3], [3]])), 1)
    assert off is not None and off.startswith("row 0:")


def test_probe_rows_are_distinct_deterministic_and_start_with_the_recipe():
    from equiv.ops.draft_topk.recipes import Recipe

    p = {**gpu_probes.BATCH_DEFAULTS, "vocab": 1000}
    x = gpu_probes._rows(p, 200, 5, "cpu")
    assert x.shape == (200, 1000) and x.is_contiguous() and torch.equal(x, gpu_probes._rows(p, 200, 5, "cpu"))
    assert torch.equal(x[:gpu_probes.BASE_ROWS], Recipe("gaussian", seed=5, batch=gpu_probes.BASE_ROWS, vocab=1000).build("cpu"))
    assert len({tuple(r) for r in x.tolist()}) == 200             # no row repeats another
    assert len(set(x.argmax(1).tolist())) > 150                   # and the maxima move with the block


def test_batch_invariance_measures_bits_and_requires_them_only_when_asked():
    base = gpu_probes.measure_batch_invariance(equiv.get_path("softmax_topk"), "cpu",
                                               {**SMALL, "require_bitwise": True})
    assert base.status == "pass" and base.facts["bitwise_invariant"], base.summary()
    mutant = GPU_MUTANTS["batch_dependent_reduction"]
    loose = gpu_probes.measure_batch_invariance(mutant, "cpu", SMALL)
    assert loose.status == "pass" and not loose.facts["bitwise_invariant"], loose.summary()
    strict = gpu_probes.measure_batch_invariance(mutant, "cpu", {**SMALL, "require_bitwise": True})
    assert strict.status == "fail" and strict.reason == "bitwise", strict.summary()
    assert "REPRO: python -m equiv.ops.draft_topk.gpu_probes batch_invariance batch_dependent_reduction" in strict.summary()


def test_static_buffer_mutant_returns_aliased_outputs():
    fn = GPU_MUTANTS["static_output_buffer"]
    first = fn(torch.randn(4, 100), 1)
    kept = first[1].clone()
    fn(-torch.arange(400.0).view(4, 100), 1)        # argmax 0 everywhere
    assert not torch.equal(first[1], kept) and (first[1] == 0).all()


def test_main_usage_and_repro_parse():
    assert gpu_probes.main(["nope"]) == 2
    assert gpu_probes._repro("graph_replay", "pkg.mod:fn", {**gpu_probes.GRAPH_DEFAULTS, "k": 4}) == \
        "REPRO: python -m equiv.ops.draft_topk.gpu_probes graph_replay pkg.mod:fn --k=4"


# --------------------------------------------------------------------------------------------- GPU

def _host_sync(logits, k):
    if torch.isnan(logits).any().item():          # a host synchronisation: cannot be captured
        pass
    return equiv.get_path("softmax_topk")(logits, k)


@pytest.mark.equiv_gpu
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", BUILTINS)
@pytest.mark.parametrize("probe", ["graph_replay", "batch_invariance"])
def test_probes_pass_the_builtin_paths(probe, name, dtype):
    res = getattr(gpu_probes, probe)(equiv.get_path(name), "cuda", {"dtype": dtype, "name": name})
    print(res.summary(), res.facts)
    assert res.status == "pass", res.summary()


@pytest.mark.equiv_gpu
def test_graph_replay_kills_the_static_buffer_and_reports_host_syncs():
    res = gpu_probes.graph_replay(GPU_MUTANTS["static_output_buffer"], "cuda")
    assert res.status == "fail" and "REPRO:" in res.summary(), res.summary()
    sync = gpu_probes.graph_replay(_host_sync, "cuda")
    assert sync.status == "not_capturable" and sync.passed, sync.summary()
    after = gpu_probes.graph_replay(equiv.get_path("fused_triton"), "cuda")   # the device still works
    assert after.status == "pass", after.summary()


@pytest.mark.equiv_gpu
def test_batch_invariance_kills_the_mutant_only_when_required():
    mutant = GPU_MUTANTS["batch_dependent_reduction"]
    assert gpu_probes.batch_invariance(mutant, "cuda").status == "pass"
    strict = gpu_probes.batch_invariance(mutant, "cuda", {"require_bitwise": True})
    assert strict.status == "fail" and strict.reason == "bitwise", strict.summary()
