"""The two-sample test of emitted text (equiv/stats/twosample.py).

Plan: two samples of one Markov chain pass; greedy text against sampled text fails; rows shorter
than the positions count only where they reached; malformed input is refused; the calibration
function reports a false-positive rate under its alpha.
"""
import numpy as np
import pytest

from equiv.errors import InvalidArgument
from equiv.stats.twosample import _chain_sample, calibrate, text_law_test


def _samples(temperature=1.0, mix=0.0, prompts=4, n=32, positions=8, seed=1):
    rng = np.random.default_rng(seed)
    xs, ys, p = [], [], []
    for i in range(prompts):
        logits = rng.gumbel(size=(50, 50)) * 2.0
        xs.append(_chain_sample(rng, logits, n, positions))
        ys.append(_chain_sample(rng, logits, n, positions, temperature, mix))
        p += [i] * n
    return np.concatenate(xs), np.concatenate(ys), np.array(p)


def test_same_law_passes_and_greedy_text_fails():
    a, b, p = _samples()
    same = text_law_test(a, b, p, p, 8)
    assert same.same_law and same.tests > 0 and same.min_p_value > same.alpha / same.tests
    a, b, p = _samples(mix=1.0)
    diff = text_law_test(a, b, p, p, 8)
    assert not diff.same_law and diff.worst["p_value"] < diff.alpha / diff.tests


def test_lengths_limit_the_positions_compared():
    a, b, p = _samples(mix=1.0)
    short = text_law_test(a, b, p, p, 8, lengths_a=np.zeros(len(a), int))
    assert short.tests == 0 and short.same_law and short.min_p_value is None


def test_malformed_input_is_refused():
    a, b, p = _samples()
    with pytest.raises(InvalidArgument, match="positions"):
        text_law_test(a, b, p, p, 99)
    with pytest.raises(InvalidArgument, match="one prompt per row"):
        text_law_test(a, b, p[:3], p, 4)


def test_calibration_false_positives_stay_under_alpha():
    rows = dict(calibrate(trials=20, prompts=2, replicas=16, positions=4, vocab=30))
    assert rows["same law (false positives)"] <= 0.05
    assert rows["greedy text (argmax always)"] >= 0.9
