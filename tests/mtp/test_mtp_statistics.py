"""The statistics of equiv/mtp/statistics.py, each shown to pass AND to fail.

Plan: the paired TOST calls equal outcomes equivalent and a shift beyond the margin not, its
interval covers the true difference, and it raises on NaN / unpaired / too few inputs; the greedy
identity check finds the first mismatch; the PIT sampling fit passes a correct sampler (false-
positive rate measured over 200 seeds, at most the family-wise alpha plus noise), fails biased
samplers (temperature 0.8, argmax mixed in at 20 %, the resample-from-target verifier bug) at the
sample size of the CPU default run, does not fail a significant shift smaller than the TVD floor,
and raises on malformed input.
"""
import numpy as np
import pytest

from equiv.errors import InvalidArgument
from equiv.mtp.calibration import biased_law, sampling_power
from equiv.stats import (ACCEPT_LENGTH_MARGIN, TVD_FLOOR, equivalence_test, greedy_identity,
                                  pit, sampling_fit)


def test_identical_outcomes_are_equivalent_with_a_zero_width_interval():
    x = np.array([3.0, 2.5, 3.25, 2.0])
    r = equivalence_test(x, x)
    assert r.equivalent and r.ci_low == r.ci_high == 0.0 and r.mean_difference == 0.0
    assert r.margin == ACCEPT_LENGTH_MARGIN and r.ci_level == pytest.approx(0.9)


def test_a_shift_beyond_the_margin_is_not_equivalent():
    rng = np.random.default_rng(0)
    ref = rng.normal(3.0, 0.3, 400)
    far = equivalence_test(ref + 0.2 + rng.normal(0, 0.05, 400), ref)
    assert not far.equivalent and far.ci_low > 0.1 and far.p_value > 0.5
    near = equivalence_test(ref + rng.normal(0, 0.05, 400), ref)
    assert near.equivalent and near.ci_low < 0 < near.ci_high and near.p_value < 0.05


def test_interval_covers_the_true_difference_about_90_percent_of_the_time():
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(300):
        d = equivalence_test(rng.normal(0.03, 0.2, 30), np.zeros(30))
        covered += d.ci_low <= 0.03 <= d.ci_high
    assert 0.84 <= covered / 300 <= 0.95


def test_too_few_samples_of_noise_are_not_called_equivalent():
    r = equivalence_test([3.0, 2.0, 3.0], [2.0, 3.0, 3.0])
    assert not r.equivalent


@pytest.mark.parametrize("values, reference, needle", [
    ([1.0, float("nan")], [1.0, 1.0], "not finite"),
    ([1.0, 2.0, 3.0], [1.0, 2.0], "pair up"),
    ([1.0], [1.0], ">= 2 paired"),
])
def test_equivalence_raises_on_bad_input(values, reference, needle):
    with pytest.raises(InvalidArgument, match=needle):
        equivalence_test(values, reference)
    with pytest.raises(InvalidArgument, match="margin"):
        equivalence_test([1.0, 2.0], [1.0, 2.0], margin=0.0)


def test_greedy_identity_finds_the_first_mismatch():
    ref = np.arange(20).reshape(2, 10)
    ok = greedy_identity(ref.copy(), np.array([10, 7]), ref)
    assert ok.identical and ok.tokens_compared == 17 and ok.first_mismatch is None
    bad = ref.copy()
    bad[1, 4] = 99
    r = greedy_identity(bad, np.array([10, 7]), ref)
    assert not r.identical and r.mismatched_sequences == 1
    assert r.first_mismatch == {"sequence": 1, "position": 4, "emitted": 99, "greedy": 14}
    # a mismatch past the emitted length does not count
    assert greedy_identity(bad, np.array([10, 4]), ref).identical
    with pytest.raises(InvalidArgument, match="fewer than"):
        greedy_identity(ref, np.array([10, 7]), ref[:, :5])


def test_correct_sampler_false_positive_rate_is_at_most_alpha():
    r = sampling_power(2000, "none", reps=200, vocab=4096)
    assert r["failure_rate"] <= 0.01, r          # alpha = 0.001 family-wise; 200 seeds


@pytest.mark.parametrize("bias, strength", [("temperature", 0.8), ("argmax_mix", 0.2),
                                            ("residual_bug", 0.0)])
def test_biased_samplers_are_caught_at_the_cpu_default_size(bias, strength):
    r = sampling_power(10000, bias, strength, reps=10, vocab=4096)
    assert r["failure_rate"] == 1.0, r


def test_a_significant_shift_under_the_tvd_floor_passes():
    rng = np.random.default_rng(2)
    n = 2_000_000
    u = rng.random(n)
    u[: n // 200] = rng.random(n // 200) * 0.05        # 0.5 % of the mass moved into one bin
    fit = sampling_fit(u)
    pooled = fit.tests[0]
    assert pooled.significant and pooled.tvd < TVD_FLOOR and fit.passed
    u[: n // 20] = rng.random(n // 20) * 0.05          # 5 %: over the floor
    assert not sampling_fit(u).passed


def test_pit_of_exact_samples_is_uniform_and_of_greedy_tokens_is_not():
    probs = np.array([[0.5, 0.3, 0.2], [0.9, 0.05, 0.05]])
    rng = np.random.default_rng(3)
    levels = rng.integers(0, 2, 5000)
    ranks = np.array([rng.choice(3, p=probs[lv]) for lv in levels])
    assert sampling_fit(pit(probs, levels, ranks, rng)).passed
    assert not sampling_fit(pit(probs, levels, np.zeros_like(ranks), rng)).passed


@pytest.mark.parametrize("call, needle", [
    (lambda: sampling_fit(np.full(50, 0.5)), "needs >= 100 tokens"),
    (lambda: sampling_fit(np.array([0.5] * 200 + [1.0])), r"in \[0, 1\)"),
    (lambda: sampling_fit(np.array([0.5] * 199 + [np.nan])), "not finite"),
    (lambda: sampling_fit(np.full(200, 0.5), np.zeros(3)), "groups"),
    (lambda: pit(np.array([[0.5, 0.5]]), [0], [2], np.random.default_rng()), "ranks must be"),
    (lambda: pit(np.array([[0.5, 0.4]]), [0], [0], np.random.default_rng()), "summing to 1"),
])
def test_sampling_statistics_raise_on_bad_input(call, needle):
    with pytest.raises(InvalidArgument, match=needle):
        call()


def test_biased_laws_are_distributions_at_the_stated_distance():
    probs = np.array([[0.6, 0.3, 0.1]])
    for bias, s in (("temperature", 0.9), ("argmax_mix", 0.1), ("residual_bug", 0.0)):
        q = biased_law(probs, bias, s)
        assert np.allclose(q.sum(1), 1.0) and not np.allclose(q, probs)
    assert np.allclose(biased_law(probs, "argmax_mix", 0.1), [[0.64, 0.27, 0.09]])
    with pytest.raises(InvalidArgument, match="bias='tilt' is unknown"):
        biased_law(probs, "tilt", 0.1)
