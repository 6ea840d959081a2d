"""The comparison pipeline on the cases the foundation issue names, each able to fail."""
import pytest
import torch

import equiv
from equiv import Recipe, compare

TILE_EDGES = [1, 2, 33, 1023, 1025, 4097, 8193]


def test_hardcoded_one_fails_value_on_two_equal_logits():
    res = compare("hardcoded_one", torch.tensor([[0.0, 0.0]]))
    assert not res.passed
    assert [c.name for c in res.failed_checks] == ["value", "regression"]
    assert "topk_p=1 vs exact 0.5" in res.check("value").detail
    assert res.repro.startswith("REPRO:")


@pytest.mark.parametrize("path", ["softmax_topk", "identity_top1"])
@pytest.mark.parametrize("vocab", [129280] + TILE_EDGES)
def test_correct_paths_pass_random_float32(path, vocab):
    r = Recipe(seed=vocab, batch=3, vocab=vocab, scale=2.0)
    res = compare(path, r.build(), recipe=r)
    assert res.passed, res.summary()


def test_either_of_two_maxima_passes_and_a_non_maximum_fails():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0]])
    p = torch.softmax(x, -1)[:, 1:2]
    for j in (1, 2):
        assert compare(lambda l, k, j=j: (p.clone(), torch.tensor([[j]])), x).passed
    res = compare(lambda l, k: (p.clone(), torch.tensor([[0]])), x)
    assert not res.passed and not res.check("index").passed
    assert "tie set {1, 2}" in res.check("index").detail


def test_nan_row_hardcoded_one_fails_and_nan_probability_passes():
    x = torch.tensor([[0.0, float("nan"), 1.0], [0.0, 1.0, 2.0]])
    res = compare("hardcoded_one", x)
    assert not res.check("poisoning").passed
    assert "only NaN is acceptable" in res.check("poisoning").detail

    def nan_aware(l, k):
        p, i = equiv.get_path("softmax_topk")(l, k)
        return p, i

    assert compare(nan_aware, x).passed


def test_poison_leaking_into_neighbours_fails():
    x = torch.tensor([[0.0, float("nan"), 1.0], [0.0, 1.0, 2.0]])
    leaky = lambda l, k: (torch.full((2, 1), float("nan")), torch.zeros((2, 1), dtype=torch.int64))
    res = compare(leaky, x)
    assert not res.check("poisoning").passed and "healthy rows beside poisoned" in res.check("poisoning").detail


def test_single_posinf_limit_is_accepted_only_at_its_index():
    x = torch.tensor([[0.0, float("inf"), 1.0]])
    assert compare(lambda l, k: (torch.ones(1, 1), torch.tensor([[1]])), x).passed
    assert not compare(lambda l, k: (torch.ones(1, 1), torch.tensor([[2]])), x).passed


def test_wrong_output_shape_fails_the_contract():
    x = Recipe(batch=4, vocab=100).build()
    flat = lambda l, k: tuple(t.squeeze(-1) for t in equiv.get_path("softmax_topk")(l, k))
    res = compare(flat, x)
    assert not res.check("contract").passed and "shape [4]" in res.check("contract").detail
    assert not res.check("index").ran


def test_int32_indices_and_out_of_range_fail_the_contract():
    x = Recipe(batch=2, vocab=100).build()
    p, i = equiv.get_path("softmax_topk")(x, 1)
    assert "int32" in compare(lambda l, k: (p, i.int()), x).check("contract").detail
    assert "out of range" in compare(lambda l, k: (p, i + 100), x).check("contract").detail


def test_a_broken_contract_says_its_cause_as_data():
    """Diagnosis reads ``contract_cause``, never the wording: format, oov, or how the call ended."""
    x = Recipe(batch=2, vocab=100).build()
    p, i = equiv.get_path("softmax_topk")(x, 1)

    def boom(l, k):
        raise RuntimeError("no")

    assert compare(lambda l, k: (p, i.int()), x).contract_cause == "format"
    assert compare(lambda l, k: (p, i + 100), x).contract_cause == "oov"
    assert compare(boom, x).contract_cause == "raised"
    assert compare(lambda l, k: (p, i), x).contract_cause is None


def test_a_raising_candidate_is_a_failed_contract_not_a_crash():
    def boom(l, k):
        raise RuntimeError("kernel launch failed")

    res = compare(boom, torch.zeros(2, 3))
    assert not res.passed and "RuntimeError: kernel launch failed" in res.check("contract").detail
    assert "Traceback" in res.exception


def test_bfloat16_uses_the_bfloat16_row():
    r = Recipe(seed=1, batch=4, vocab=129280, dtype="bfloat16")
    res = compare("softmax_topk", r.build(), recipe=r)
    assert res.passed, res.summary()
    assert res.dtype == "bfloat16"
    assert "2.41e-06 x" not in res.check("value").detail
    assert f"{equiv.TOLERANCES['bfloat16'].rtol:.3g} rel" in res.check("value").detail
    # the same bf16-rounded probabilities judged against float32 input fail
    x32 = r.with_(dtype="float32").build()
    p, i = equiv.get_path("identity_top1")(x32, 1)
    assert not compare(lambda l, k: (p.bfloat16().float(), i), x32).passed


def test_k_greater_than_one_checks_order_and_distinct_indices():
    r = Recipe(seed=2, batch=3, vocab=1000)
    x = r.build()
    assert compare("softmax_topk", x, k=4).passed
    p, i = equiv.get_path("softmax_topk")(x, 4)
    assert not compare(lambda l, k: (p.flip(-1), i.flip(-1)), x, k=4).passed
    dup = i.clone()
    dup[:, 1] = dup[:, 0]
    assert not compare(lambda l, k: (p, dup), x, k=4).check("index").passed


def test_regression_rule_catches_a_worse_but_in_table_candidate():
    r = Recipe(seed=3, batch=4, vocab=4097)
    x = r.build()
    base = equiv.get_path("identity_top1")

    def sloppy(l, k):
        p, i = base(l, k)
        return p * (1 + 200 * 2.0 ** -24), i          # 200 ulp: inside the table, worse than 4x

    res = compare(sloppy, x)
    assert res.check("value").passed and not res.check("regression").passed


def test_result_is_json_serialisable_and_carries_inputs():
    import json

    r = Recipe(seed=7, batch=2, vocab=64)
    res = compare("hardcoded_one", r.build(), recipe=r)
    d = json.loads(json.dumps(res.to_json()))
    assert d["path"] == "hardcoded_one" and d["seed"] == 7 and d["recipe"] == str(r)
    assert d["passed"] is False and d["worst_row"] is not None
    assert "--recipe 'gaussian:seed=7,batch=2,vocab=64,dtype=float32'" in d["repro"]


def test_a_candidate_that_edits_its_input_fails_the_contract():
    def in_place(l, k):
        l -= l.max(-1, keepdim=True).values
        return equiv.get_path("identity_top1")(l, k)

    x = Recipe(batch=2, vocab=100).build()
    res = compare(in_place, x)
    assert not res.check("contract").passed and "modified its input" in res.check("contract").detail
