"""The joint law of the emitted block (equiv/ops/verify/block_law.py, equiv.stats.joint).

Test plan: ``table_test`` counts codes against the law it is given (a uniform table passes, a
shifted one fails) and refuses a bad law; the code of a block is ``sum x_j V**j`` and the exact
table built for it is the product law in that order (checked against an explicit enumeration);
on the plan's kind of enumerable case (V = 3, n = 4, 2**17 rows) the block_law check passes the
correct verifiers (token-level, block verification, another random stream) and fails each lossy
block verifier of tests/candidates/verify_hostile.py at its full share (emitted-text TV 0.04-0.14)
while the per-position marginal tests alone do not all see them; at a realistic V the pair scores
pass a correct verifier.
"""
import itertools
import os
import sys

import numpy as np
import pytest

from equiv.ops.verify.block_law import block_tests
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.paths import block_verification, torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.stats.joint import table_test

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
sys.path.insert(0, os.path.join(TESTS, "candidates"))
import verify_hostile as H  # noqa: E402


EXACT = Case(VerifyRecipe(family="realistic", seed=11, batch=2 ** 17 + 77, n=4, vocab=3, problems=1, noise=0.55,
                          drafts="sampled", part=1), 1, 700, statistical=True, purpose="joint exact")


def test_table_test():
    rng = np.random.default_rng(1)
    law = np.full(8, 1 / 8)
    assert table_test("u", rng.integers(0, 8, 4000), law).p_value > 1e-4
    assert table_test("s", np.minimum(rng.integers(0, 9, 4000), 7), law).p_value < 1e-6
    with pytest.raises(ValueError):
        table_test("bad", [0, 1], [0.5, -0.5])


def test_the_block_code_and_the_exact_table_agree():
    r = EXACT.recipe.with_(batch=64)
    laws = r.make_problems().target[0].astype(np.float64)
    laws /= laws.sum(1, keepdims=True)
    whole = laws[0]
    for j in range(1, r.n + 1):
        whole = np.outer(whole, laws[j]).ravel()
    whole = whole.reshape([r.vocab] * (r.n + 1)).transpose(list(range(r.n, -1, -1))).ravel()
    for x in itertools.islice(itertools.product(range(r.vocab), repeat=r.n + 1), 0, None, 17):
        code = sum(t * r.vocab ** j for j, t in enumerate(x))
        assert whole[code] == pytest.approx(np.prod([laws[j, t] for j, t in enumerate(x)]))


@pytest.mark.parametrize("fn", [torch_sampler, block_verification, H.correct_other_stream])
def test_correct_verifiers_pass(fn):
    v = run_judge(fn, [EXACT], device="cpu", spec=fn.__name__)
    assert v.passed, v.summary()


@pytest.mark.parametrize("name", sorted(H.LOSSY))
def test_lossy_block_verifiers_fail_the_block_law(name):
    v = run_judge(H.lossy(name, 1.0), [EXACT], device="cpu", spec=name)
    (check,) = [c for c in v.checks if c.name == "block_law"]
    assert not check.passed and check.evidence["cause"] == "joint law of the emitted block", check.detail


def test_pair_scores_pass_a_correct_verifier_at_a_real_vocabulary():
    case = Case(VerifyRecipe(family="realistic", seed=3, batch=300, n=3, vocab=32064, problems=4, drafts="sampled"),
                1, 900, statistical=True)
    d, q, p = case.recipe.build()
    import torch

    from equiv.ops.verify.draws import Draws
    out = torch_sampler(d, q, p, torch.Generator().manual_seed(1)).numpy()
    tests = block_tests([(case, Draws(str(case.recipe), (1, 1), np.stack([out, out])))], seed=0)
    assert tests and all(t["kind"] == "pair score" and not t["failed"] for _, t in tests)
