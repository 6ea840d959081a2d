"""The verify judge's calibration tools: the biased sampler's size, and a calibration run.

Test plan: ``biased_sampler(shape, tv, at="emitted")`` makes position 0 -- always emitted, drafts
drawn from q -- ``tv`` from the target's law in total variation, while ``at="drawn"`` biases only
the drawn token (so the position sees ``Z * tv``, ``Z`` the residual's mass), measured on 200,000
rows at V = 20 against the exact laws; ``run_calibration`` on a small plan passes a correct sampler
and fails a strongly biased one in every run. ``law_draws.LawSampler`` (the host's draws of the
same laws) is held to the same sizes, its unbiased draws to the reference's emission law at every
position (probability and one-hot drafters), and a calibration run on it passes and fails alike.
"""
from dataclasses import replace

import numpy as np
import pytest
import torch

from equiv.ops.verify.calibration import _alternative, biased_sampler, run_calibration
from equiv.ops.verify.judge import Case
from equiv.ops.verify.law_draws import LawSampler
from equiv.ops.verify.paths import torch_sampler
from equiv.ops.verify.recipes import VerifyRecipe

RECIPE = VerifyRecipe(family="realistic", seed=5, batch=200000, n=1, vocab=20, problems=1, drafts="sampled")


def _position0_tv(fn):
    if isinstance(fn, LawSampler):
        out = fn.draws(RECIPE, [0])[0, :, 0]
        p = torch.from_numpy(RECIPE.make_problems().target)
    else:
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
    assert _position0_tv(LawSampler(None, 0.0)) < 0.01
    assert abs(_position0_tv(LawSampler(shape, 0.05)) - 0.05) < 0.005 + noise
    assert abs(_position0_tv(LawSampler(shape, 0.05, at="drawn")) - z * min(0.05, reach)) < 0.005 + noise


@pytest.mark.parametrize("draft", ["probs", "onehot"])
def test_unbiased_law_draws_have_the_reference_emission_law(draft):
    from scipy.stats import chisquare

    from equiv.reference.verify import emission_laws

    recipe = VerifyRecipe(family="realistic", seed=3, batch=100000, n=3, vocab=6, problems=1, draft=draft)
    pr = recipe.make_problems()
    law = emission_laws(pr.tokens, pr.draft, pr.target)[0]                  # [n+1, V+1], slot 0: -1
    out = LawSampler(None, 0.0).draws(recipe, [1])[0]
    for j in range(recipe.n + 1):
        seen = np.bincount(out[:, j] + 1, minlength=recipe.vocab + 1)
        assert seen[law[j] == 0].sum() == 0, f"position {j} emitted an outcome of probability 0"
        live = law[j] > 0
        if live.sum() > 1:
            assert chisquare(seen[live], recipe.batch * law[j][live]).pvalue > 1e-4, (j, seen, law[j])


def test_a_calibration_run_passes_a_correct_sampler_and_fails_a_biased_one():
    case = Case(replace(RECIPE, batch=4096, vocab=33, n=2, problems=4), 1, 7, statistical=True)
    assert run_calibration(torch_sampler, [case], 2, device="cpu") == [[], []]
    failed = run_calibration(biased_sampler("flatter", 0.3, at="emitted"), [case], 2, device="cpu", guarded=False)
    assert all("marginal" in f for f in failed), failed
    assert run_calibration(LawSampler(None, 0.0), [case], 2, device="cpu") == [[], []]
    failed = run_calibration(LawSampler("flatter", 0.3), [case], 2, device="cpu")
    assert all("marginal" in f for f in failed), failed


def test_the_calibration_script_judges_host_law_draws_and_refuses_bad_parts(tmp_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    script = root / "scripts" / "verify_gpu_calibration.py"
    env = {**os.environ, "PYTHONPATH": str(root)}
    run = [sys.executable, str(script), "--out", str(tmp_path), "--device", "cpu", "--draws", "law",
           "--parts", "0", "--workers", "1"]
    got = subprocess.run(run + ["--parts-only", "null,power", "--runs", "1", "--power-runs", "1",
                                "--tv", "0.3", "--shapes", "flatter"], capture_output=True, text=True, env=env)
    assert got.returncode == 0, got.stderr
    rows = [json.loads(line) for line in (tmp_path / "calibration.jsonl").read_text().splitlines()]
    assert [(r["part"], r["rows"], r["failed_runs"]) for r in rows] == [("null", 161660, 0), ("power", 161660, 1)]
    assert "law_flatter_0.3_emitted" in (tmp_path / "table.md").read_text()
    bad = subprocess.run(run[:-4] + ["--parts", "-1"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--parts='-1': a number of calls is 0 or more" in bad.stderr
