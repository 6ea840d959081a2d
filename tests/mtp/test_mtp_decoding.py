"""The decoding loop, its consumers and the metrics (equiv/mtp/decoding.py, metrics.py, harness.py).

Plan: on a small synthetic model (V = 2048, CPU; the GPU runs the same code), greedy-verified
consumers emit exactly plain greedy decoding; target_only passes the sampling fit while the
greedy consumer's tokens, judged as samples, fail it; the metrics follow the engine definitions
(checked against a hand-built outcome); a path returning out-of-range indices or NaN is counted
invalid and fails its record while staying lossless; confidence drafting with topk_p = 1 never
stops; the tree consumer beats the chain and is not applicable to k = 1-only paths; a crashing or
malformed path becomes a failed record with the error; the run is deterministic.
"""
import numpy as np
import pytest
import torch

from equiv.mtp import SyntheticLM, acceptance_metrics, decode, greedy_reference, run_mtp
from equiv.mtp.decoding import DecodeOutcome
from equiv.mtp.harness import _sampling_lossless
from equiv.stats import greedy_identity
from equiv.ops.draft_topk.paths import get_path

V, B, R = 2048, 24, 10
SMALL = dict(vocab=V, sequences=B, rounds=R, device="cpu")


@pytest.fixture(scope="module")
def model():
    return SyntheticLM(V, seed=0)


@pytest.fixture(scope="module")
def run():
    return run_mtp(**SMALL)


def _decode(model, consumer, path="softmax_topk", **kw):
    p = get_path(path) if isinstance(path, str) else path
    return decode(model, p, consumer, steps=3, rounds=R, sequences=B, seed=0, name=str(path), **kw)


@pytest.mark.parametrize("consumer", ["greedy", "confidence", "tree"])
def test_greedy_verified_consumers_emit_plain_greedy_decoding(model, consumer):
    out = _decode(model, consumer)
    ref = greedy_reference(model, B, R * 4)
    assert greedy_identity(out.tokens, out.lengths, ref).identical
    assert (out.lengths >= R).all() and (out.lengths <= 4 * R).all()


def test_target_only_passes_the_sampling_fit_and_greedy_tokens_fail_it(model):
    out = decode(model, get_path("softmax_topk"), "target_only", steps=3, rounds=40, sequences=64,
                 seed=0)
    ok, fit = _sampling_lossless(model, out, seed=0)
    assert ok and fit.tokens == int(out.lengths.sum()) and len(fit.tests) > 1
    greedy = decode(model, get_path("softmax_topk"), "greedy", steps=3, rounds=40, sequences=64, seed=0)
    judged_as_samples = DecodeOutcome(**{**greedy.__dict__, "consumer": "target_only"})
    bad, fit = _sampling_lossless(model, judged_as_samples, seed=0)
    assert not bad and fit.min_p_value < 1e-6


def test_an_emitted_token_outside_the_vocabulary_is_not_lossless(model):
    out = decode(model, get_path("softmax_topk"), "target_only", steps=3, rounds=4, sequences=4, seed=0)
    tokens = out.tokens.copy()
    tokens[2, 1] = V
    ok, detail = _sampling_lossless(model, DecodeOutcome(**{**out.__dict__, "tokens": tokens}), 0)
    assert not ok and detail.to_json() == {"invalid_emitted_tokens": 1,
                                           "first": {"sequence": 2, "position": 1, "token": V}}


def test_metrics_follow_the_engine_definitions():
    out = DecodeOutcome("greedy", 3, accepted=np.array([[3, 0], [1, 2]]),
                        proposed=np.array([[3, 3], [3, 3]]), active=np.ones((2, 2), bool),
                        tokens=np.zeros((2, 8), np.int64), lengths=np.array([5, 5]),
                        invalid_outputs=1, draft_outputs=12)
    m = acceptance_metrics(out)
    assert m.accept_length == 10 / 4 and m.accept_rate == 6 / 12
    assert m.per_position == (0.75, 0.5, 0.25) and m.histogram == (1, 1, 1, 1)
    assert m.drafted_per_emitted == 12 / 10 and m.invalid_output_rate == 1 / 12
    broken = DecodeOutcome(**{**out.__dict__, "lengths": np.array([5, 4])})
    with pytest.raises(ValueError, match="inconsistent"):
        acceptance_metrics(broken)


def test_calibrated_first_position_acceptance(run):
    greedy = run.record("softmax_topk", "greedy").metrics
    assert 0.75 < greedy.per_position[0] <= 0.97           # 0.85-0.90 at the default sizes
    assert greedy.per_position[0] > greedy.per_position[1] > greedy.per_position[2]
    assert run.record("softmax_topk", "tree").accept_length > greedy.accept_length


def test_hardcoded_one_changes_acceptance_only_under_confidence(run):
    for consumer in ("greedy", "target_only"):
        r = run.record("hardcoded_one", consumer)
        assert r.passed and r.tokens_match_reference and r.equivalence.mean_difference == 0.0
    conf = run.record("hardcoded_one", "confidence")
    assert conf.lossless and conf.tokens_match_reference and not conf.equivalent_to_reference
    assert conf.failed_checks == ("equivalent_to_reference",) and conf.expected_failure
    assert conf.metrics.drafted_per_emitted > run.record("softmax_topk", "confidence").metrics.drafted_per_emitted
    tree = run.record("hardcoded_one", "tree")
    assert not tree.applicable and "topk == 1" in tree.reason and tree.passed is None
    assert run.passed and not run.failures


def test_confidence_with_topk_p_one_never_stops(model):
    out = _decode(model, "confidence", "hardcoded_one")
    assert (out.proposed == 3).all()
    soft = _decode(model, "confidence")
    assert (soft.proposed < 3).any()


def _garbage(logits, k):
    """Valid-looking shapes, wrong content: out-of-range indices and NaN probabilities."""
    idx = torch.full((logits.shape[0], k), logits.shape[1] + 5, dtype=torch.int64)
    return torch.full((logits.shape[0], k), float("nan")), idx


def test_invalid_outputs_are_counted_and_fail_the_record_while_staying_lossless():
    res = run_mtp([_garbage], ["greedy", "target_only", "tree"], **SMALL)
    for r in res.records:
        assert r.metrics.invalid_output_rate == 1.0 and r.metrics.accepted_tokens == 0
        assert r.lossless and "invalid_output" in r.failed_checks and not r.equivalent_to_reference
        assert r.expected_failure is None
    assert not res.passed and len(res.failures) == 3


def _random_tokens(logits, k):
    g = torch.Generator().manual_seed(logits.shape[0])
    idx = torch.randint(0, logits.shape[1], (logits.shape[0], k), generator=g)
    return torch.full((logits.shape[0], k), 0.9), idx


def test_a_wrong_but_valid_path_is_lossless_and_not_equivalent():
    r = run_mtp([_random_tokens], ["greedy"], **SMALL).records[0]
    assert r.lossless and r.metrics.invalid_outputs == 0
    assert not r.equivalent_to_reference and r.equivalence.ci_high < -1.0
    assert r.failed_checks == ("equivalent_to_reference",) and r.repro.startswith("equiv mtp --paths")


def _crash(logits, k):
    raise RuntimeError("kernel exploded")


def _flat(logits, k):
    return torch.ones(logits.shape[0]), torch.zeros(logits.shape[0], dtype=torch.int64)


@pytest.mark.parametrize("fn, needle", [(_crash, "RuntimeError: kernel exploded"),
                                        (_flat, "shape (%d,), expected (%d, 1)" % (B, B))])
def test_crashing_or_malformed_paths_are_failed_records(fn, needle):
    res = run_mtp([fn], ["greedy"], **SMALL)
    r = res.records[0]
    assert r.failed_checks == ("error",) and needle in r.error and not res.passed


def test_same_seed_same_json_other_seed_other_json():
    a = run_mtp(["identity_top1"], ["target_only", "tree"], **SMALL).to_json()
    b = run_mtp(["identity_top1"], ["target_only", "tree"], **SMALL).to_json()
    c = run_mtp(["identity_top1"], ["target_only", "tree"], seed=1, **SMALL).to_json()
    assert a == b and a["results"] != c["results"]


def test_json_records_carry_the_promised_keys(run):
    keys = {"path", "consumer", "accept_length", "accept_rate", "per_position", "histogram",
            "lossless", "equivalent_to_reference", "tokens_match_reference", "repro"}
    for rec in run.to_json()["results"]:
        assert keys <= rec.keys()
    assert run.config["vocab"] == V and run.model["kind"] == "synthetic"


@pytest.mark.parametrize("kw, needle", [
    (dict(consumers="greedy,beam"), "consumers='beam' is unknown"),
    (dict(steps=0), "steps=0 is invalid"),
    (dict(paths="softmax_topk,softmax_topk"), "more than once"),
    (dict(paths="no.such:thing"), "no module named"),
    (dict(budget="huge"), "budget='huge' is unknown"),
    (dict(sequences=1), "sequences=1 is invalid"),
])
def test_bad_arguments_raise_usage_errors(kw, needle):
    from equiv.errors import UsageError

    args = {**SMALL, **kw}
    with pytest.raises(UsageError, match=needle):
        run_mtp(args.pop("paths", None), args.pop("consumers", None), **args)


def test_full_vocabulary_quick_path_runs_on_cpu():
    res = run_mtp(["identity_top1"], ["greedy"], budget="quick", sequences=2, rounds=2, device="cpu")
    assert res.config["vocab"] == 129280 and res.records[0].passed


@pytest.mark.equiv_gpu
def test_cuda_runs_the_same_code_and_emits_the_cpu_greedy_tokens():
    kw = dict(vocab=129280, sequences=16, rounds=8)
    gpu = run_mtp(["softmax_topk", "identity_top1"], None, device="cuda", **kw)
    cpu_model, gpu_model = SyntheticLM(129280), SyntheticLM(129280, device="cuda")
    assert gpu_model._rows.fast, "the unfolded-view read fell back to take() on this GPU"
    assert np.array_equal(greedy_reference(cpu_model, 16, 32), greedy_reference(gpu_model, 16, 32))
    for r in gpu.records:
        assert r.passed is not False, (r.path, r.consumer, r.failed_checks, r.error)
