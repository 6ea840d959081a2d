"""The verify judge: each check passes correct outputs and fails a broken one, naming the place.

Test plan: the exact checks (layout, support, greedy) on hand-edited outputs of the correct
sampler; the statistical ones (binomial family, PIT fit) on counts and draws that are off by a
known amount; ``run_judge`` on candidates that raise, return the wrong dtype or shape, edit
their input, ignore the generator or hang; "nothing checked" is a failure, never a pass.
"""
import os

import numpy as np
import pytest
import torch

from equiv.ops.verify import judge
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe


RECIPE = VerifyRecipe(family="realistic", seed=1, batch=64, n=3, vocab=33, problems=4)


def _outputs(recipe=RECIPE, calls=2):
    d, q, p = recipe.build("cpu")
    return np.stack([torch_sampler(d, q, p, torch.Generator().manual_seed(s)).numpy() for s in range(calls)])


def _rejected_row(outs, recipe=RECIPE):
    stop = judge._stops(recipe, outs)
    c, b = (int(v[0]) for v in np.nonzero(stop < recipe.n - 1))
    return c, b, int(stop[c, b])


def test_correct_outputs_pass_every_exact_check():
    outs = _outputs()
    law = judge._law(RECIPE, with_drawn=True)
    assert judge.layout_problem(RECIPE, outs) is None
    assert judge.support_problem(RECIPE, outs, law) is None


@pytest.mark.parametrize("edit, message", [
    (lambda o, c, b, s: o[c, b].__setitem__(s, -1), "holds -1 but no rejection came before it"),
    (lambda o, c, b, s: o[c, b].__setitem__(s, 33), "holds token 33, outside [0, 33)"),
    (lambda o, c, b, s: o[c, b].__setitem__(s + 1, 5), "after the rejection at position"),
])
def test_layout_names_the_broken_position(edit, message):
    outs = _outputs()
    c, b, s = _rejected_row(outs)
    edit(outs, c, b, s)
    call, row, text = judge.layout_problem(RECIPE, outs)
    assert (call, row) == (c, b) and message in text


def test_support_fails_a_token_the_residual_forbids():
    outs = _outputs()
    pr = RECIPE.make_problems()
    stop = judge._stops(RECIPE, outs)
    for c, b in zip(*np.nonzero(stop < RECIPE.n)):          # a rejected row with a forbidden token
        i, s = RECIPE.rows()[b], stop[c, b]                  # other than its draft
        forbidden = [x for x in np.flatnonzero(pr.target[i, s] <= pr.draft[i, s]) if x != pr.tokens[i, s]]
        if forbidden:
            break
    outs[c, b, s] = forbidden[0]
    _, _, text = judge.support_problem(RECIPE, outs, judge._law(RECIPE, False))
    assert f"drew token {forbidden[0]} of probability 0 under the residual" in text


def test_support_fails_a_rejection_where_p_covers_q():
    r = RECIPE.with_(family="equal")
    outs = _outputs(r)
    outs[0, 0, 0] = (outs[0, 0, 0] + 1) % r.vocab                     # a "recovered" token at 0
    outs[0, 0, 1:] = -1
    _, _, text = judge.support_problem(r, outs, judge._law(r, False))
    assert "although p >= q there (acceptance probability 1)" in text


def test_greedy_fails_an_output_that_is_not_greedy_decoding():
    r = RECIPE.with_(family="onehot_target")
    outs = _outputs(r)
    assert judge.greedy_problem(r, outs) is None
    c, b, s = _rejected_row(outs, r)
    outs[c, b, s] = (outs[c, b, s] + 1) % r.vocab
    assert "where greedy verification gives" in judge.greedy_problem(r, outs)[2]


def test_acceptance_family_fails_only_significant_and_large_differences():
    base = {"recipe": "r", "problem": 0, "position": 0, "trials": 10000, "alpha": 0.5}
    ok, small, big = judge.acceptance_family([{**base, "successes": 5050}, {**base, "successes": 5080},
                                              {**base, "successes": 5300}], alpha=1e-4)
    assert not ok["failed"] and not big["p_value"] > 1e-6
    assert not small["failed"]                        # significant-ish, but under the 0.01 floor
    assert big["failed"]


def test_drawn_tokens_fit_their_law_for_a_correct_sampler_and_not_for_a_biased_one():
    from equiv.stats import sampling_fit

    r = RECIPE.with_(batch=2048, vocab=1025)
    outs = _outputs(r, calls=1)

    def fits(outputs):
        u, groups, cells, expected, _ = judge.pit_values(r, outputs, np.random.default_rng(0))
        ranks = judge.rank_fit(cells, expected, groups, alpha=1e-4)
        return sampling_fit(u, groups, alpha=1e-4).passed, not any(t["failed"] for t in ranks)

    assert fits(outs) == (True, True)
    stop = judge._stops(r, outs)
    bonus = stop == r.n                                   # every bonus becomes the top token of p_n
    top = r.make_problems().target[:, -1].argmax(-1)[r.rows()]
    biased = outs.copy()
    biased[bonus, r.n] = np.broadcast_to(top, stop.shape)[bonus]
    assert fits(biased) == (False, False)
    law = r.make_problems().target[:, -1]                 # bonus drawn as the second token where
    second = np.argsort(-law, -1, kind="stable")[:, 1][r.rows()]   # it was the first: rank cells see it
    swap = bonus & (outs[..., r.n] == np.broadcast_to(top, stop.shape))
    swapped = outs.copy()
    swapped[swap, r.n] = np.broadcast_to(second, stop.shape)[swap]
    assert fits(swapped)[1] is False


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
VERIFIERS = os.path.join(TESTS, "candidates", "verifiers.py")


@pytest.mark.parametrize("fn, message", [
    ("raises", "raised RuntimeError: CUDA error"),
    ("int32_output", "returned dtype int32, not int64"),
    ("drops_bonus", "returned shape [5, 3], not [5, 4]"),          # 8 rows go as 5, 2 and 1 (calling.last_rows_apart)
    ("edits_target_probs", "modified its input target_probs during the call"),
    ("ignores_generator", "the same generator seed gave"),
    ("hangs", "did not return within 6 s"),
    ("exits", "exited with code 0"),
    ("interrupts", "raised KeyboardInterrupt"),
])
def test_misbehaving_verifiers_fail_the_contract_with_the_reason(fn, message):
    spec = f"{VERIFIERS}:{fn}"
    v = run_judge(spec, [Case(RECIPE.with_(batch=8), 1, 0)], device="cpu", spec=spec, timeout=3.0)
    assert not v.passed
    contract = next(c for c in v.checks if c.name == "contract")
    assert not contract.passed and message in contract.detail, contract.detail
    assert contract.repro.startswith(f"REPRO: equiv check --op verify --candidate {spec}")


def test_a_correct_verifier_in_the_worker_passes():
    spec = f"{VERIFIERS}:correct"
    assert run_judge(spec, [Case(RECIPE, 2, 0, statistical=True)], device="cpu", spec=spec, law="token").passed
    sampled = RECIPE.with_(batch=256, drafts="sampled")             # losslessness: drafts drawn from q
    assert run_judge(spec, [Case(sampled, 1, 0, statistical=True)], device="cpu", spec=spec).passed


def test_a_verifier_with_the_wrong_signature_is_a_usage_error():
    from equiv.errors import CandidateLoadError
    from equiv.ops.verify.gate import run_verify_check

    with pytest.raises(CandidateLoadError, match="cannot be called as fn\\(draft_token_ids"):
        run_verify_check(f"{VERIFIERS}:two_arguments", RECIPE, device="cpu")


def raises(d, q, p, g):
    raise RuntimeError("CUDA error")


def test_nothing_checked_is_a_failure():
    recipe = RECIPE.with_(batch=8)
    for law, stats in (("token", ("acceptance", "distribution", "tail")), ("lossless", ("marginal", "joint", "tail"))):
        v = run_judge(raises, [Case(recipe, 1, 0, statistical=True)], device="cpu", spec="x", law=law)
        by = {c.name: c for c in v.checks}
        assert not v.passed
        assert "nothing checked" in by["support"].detail
        assert all("nothing checked" in by[c].detail for c in stats), v.summary()
