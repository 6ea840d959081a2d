"""The contract as users write code: float64 ``topk_p``, outputs of any strides, ``--timeout inf``,
and tie sets that know the output format's underflow.

Each test names the failure it guards against (seen before its fix):
- a correct kernel returning float64 ``topk_p`` failed ``compare``'s contract on its dtype;
- transposed / strided outputs crashed the MTP tree consumer (``.view`` in equiv/mtp/decoding.py);
- ``timeout=inf`` raised OverflowError inside ``Thread.join`` (the time-out itself, not the
  candidate, failed ``softmax_topk``);
- ``softmax_topk`` at k >= 2 failed the index check where ranks underflow the output format
  (float16 under 3e-8, float32 under 7e-46): they all round to 0 and any order is correct.
"""
import math
import os

import pytest
import torch

import equiv
from equiv.ops.draft_topk.compare import _contract, underflow_atol
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run.timeouts import limit_seconds


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
HERE = TESTS
DODGERS = os.path.join(HERE, "candidates", "shape_dodgers.py")
WELL_WRITTEN = ("float64_probabilities", "transposed_outputs", "strided_outputs")


@pytest.mark.parametrize("fn", WELL_WRITTEN)
@pytest.mark.parametrize("k", [1, 4])
def test_well_written_candidates_pass_compare(fn, k):
    r = Recipe(family="ties_max", batch=5, vocab=1000, pad=7)
    res = equiv.compare(f"{DODGERS}:{fn}", r.build(), k, recipe=r)
    assert res.passed, res.summary()


def test_float64_ulps_are_float32_ulps():
    x = Recipe(batch=3, vocab=100).build()
    p, idx = torch.topk(torch.softmax(x.double(), -1), 1, -1)
    res = equiv.compare(lambda logits, k: (p * (1 + 2.0 ** -20), idx), x, 1)
    assert 6 <= res.max_ulp <= 17            # 2^-20 relative is 8-16 float32 ulps, not 2^33 float64 ulps
    assert "ulp (float32)" in res.check("value").detail


def test_other_output_dtypes_are_refused_with_the_allowed_set():
    from equiv.run.invoke import to_host

    out = to_host((torch.zeros(2, 1, dtype=torch.float16), torch.zeros(2, 1, dtype=torch.int64)))
    msg = _contract(out, 2, 5, 1, "float32", "cpu")
    assert msg == ("topk_p has dtype float16, expected one of float32, float64 "
                   "(float32, float64 or the input dtype)")


@pytest.mark.parametrize("fn", WELL_WRITTEN)
def test_mtp_consumers_read_any_output_layout(fn):
    from equiv.mtp import SyntheticLM, decode
    from equiv.candidate import load_candidate

    model = SyntheticLM(2048, seed=0)
    cand = load_candidate(f"{DODGERS}:{fn}")
    for consumer in ("greedy", "confidence", "tree"):
        out = decode(model, cand, consumer, steps=3, rounds=2, sequences=4, seed=0, name=fn)
        assert out.invalid_outputs == 0 and out.accepted.shape == (4, 2)


def test_inf_timeout_means_no_limit():
    assert limit_seconds(math.inf) is None and limit_seconds(None) is None and limit_seconds(5) == 5.0
    assert limit_seconds(1e300) is None                    # past threading.TIMEOUT_MAX
    r = Recipe(batch=2, vocab=100)
    assert equiv.compare("softmax_topk", r.build(), 1, recipe=r, timeout=math.inf).passed


def test_underflow_term_is_half_the_smallest_subnormal():
    assert underflow_atol("float16") == 2.0 ** -25
    assert underflow_atol("float32") == 2.0 ** -150
    assert underflow_atol("bfloat16") == 2.0 ** -134


@pytest.mark.parametrize("recipe", ["ties_max:seed=168,batch=1,vocab=33,dtype=float16,scale=16.0",
                                    "dominant:seed=0,batch=1,vocab=33,dtype=float32,scale=16.0"])
def test_softmax_topk_passes_where_ranks_underflow(recipe):
    r = Recipe.parse(recipe)
    res = equiv.compare("softmax_topk", r.build(), 4, recipe=r)
    assert res.passed, res.summary()


def test_underflow_term_does_not_admit_a_visible_wrong_index():
    # float16 output: rank 1 (p ~ 0.0067) swapped for rank 3 (p ~ 0.00091): far above 2^-25.
    x = torch.tensor([[5.0, 0.0, -1.0, -2.0, -20.0]], dtype=torch.float16)
    p, idx = torch.topk(torch.softmax(x, -1), 4, -1)
    wrong = idx.clone()
    wrong[0, [1, 3]] = wrong[0, [3, 1]]
    res = equiv.compare(lambda logits, k: (p, wrong), x, 4)
    assert not res.passed and not res.check("index").passed
