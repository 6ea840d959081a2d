"""The verify judge's calibration tools: the biased sampler's size, and a calibration run.

Test plan: ``biased_sampler(shape, tv, at="emitted")`` makes position 0 -- always emitted, drafts
drawn from q -- ``tv`` from the target's law in total variation, while ``at="drawn"`` biases only
the drawn token (so the position sees ``Z * tv``, ``Z`` the residual's mass), measured on 200,000
rows at V = 20 against the exact laws; ``run_calibration`` on a small plan passes a correct sampler
and fails a strongly biased one in every run.
"""
from dataclasses import replace

import numpy as np
import pytest
import torch

from equiv.ops.verify.calibration import _alternative, biased_sampler, run_calibration
from equiv.ops.verify.judge import Case
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe

RECIPE = VerifyRecipe(family="realistic", seed=5, batch=200000, n=1, vocab=20, problems=1, drafts="sampled")


def _position0_tv(fn):
    d, q, p = RECIPE.build("cpu")
    out = fn(d, q, p, torch.Generator().manual_seed(0))[:, 0].numpy()
    law = p[0, 0].double().numpy()
    return 0.5 * np.abs(np.bincount(out, minlength=20) / out.size - law / law.sum()).sum()


@pytest.mark.parametrize("shape", ["sharper", "flatter", "swap_top2"])
def test_the_emitted_bias_is_tv_at_the_position_and_the_drawn_bias_is_diluted(shape):
    pr = RECIPE.make_problems()
    p, q = pr.target[0, 0].astype(np.float64), pr.draft[0, 0].astype(np.float64)
    res = np.maximum(0.0, p - q)
    z, r = res.sum(), res / res.sum()                      # the residual's mass (rejections), its law
    reach = 0.5 * np.abs(_alternative(r[None], shape)[0] - r).sum()     # the most a draw can move
    assert 0.2 < z < 0.8 and z * reach > 0.05
    noise = _position0_tv(torch_sampler)                   # a correct sampler: sampling noise only
    assert noise < 0.01
    assert abs(_position0_tv(biased_sampler(shape, 0.05, at="emitted")) - 0.05) < 0.005 + noise
    assert abs(_position0_tv(biased_sampler(shape, 0.05, at="drawn")) - z * min(0.05, reach)) < 0.005 + noise


def test_a_calibration_run_passes_a_correct_sampler_and_fails_a_biased_one():
    case = Case(replace(RECIPE, batch=4096, vocab=33, n=2, problems=4), 1, 7, statistical=True)
    assert run_calibration(torch_sampler, [case], 2, device="cpu") == [[], []]
    failed = run_calibration(biased_sampler("flatter", 0.3, at="emitted"), [case], 2, device="cpu", guarded=False)
    assert all("marginal" in f for f in failed), failed
