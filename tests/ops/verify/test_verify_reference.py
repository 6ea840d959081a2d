"""reference/verify.py: the law of a rejection sampler, against exact rational arithmetic.

Test plan: on small V (<= 6) every output sequence of a verifier can be enumerated; its
probability is computed with ``fractions.Fraction`` from the float32 inputs (exact) and compared
with ``emission_laws`` (float64, so to ~1e-15). Also: the law is lossless (drafts drawn from q
give every position the target's marginal), ``sample`` draws from it (chi-square), greedy inputs
give one deterministic output, and inputs outside the contract raise ``ValueError`` naming the
place.
"""
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from equiv.reference import verify as rv


def _inputs(rng, B=3, n=3, V=5, onehot=False, zeros=False):
    p = rng.dirichlet(np.ones(V), size=(B, n + 1)).astype(np.float32)
    q = rng.dirichlet(np.ones(V), size=(B, n)).astype(np.float32)
    if zeros:
        p[..., -1] = 0.0
    d = np.array([[rng.choice(V, p=row.astype(np.float64) / row.astype(np.float64).sum()) for row in qb] for qb in q])
    return d, (None if onehot else q), p


def _exact_law(d, q, p, b):
    """``[n+1][V+1]`` Fractions: the marginal of each output position of row ``b``."""
    n, V = d.shape[1], p.shape[2]
    P = [[Fraction(float(x)) for x in row] for row in p[b]]
    Q = [[Fraction(1) if x == d[b, j] else Fraction(0) for x in range(V)] for j in range(n)] if q is None \
        else [[Fraction(float(x)) for x in row] for row in q[b]]
    law = [[Fraction(0)] * (V + 1) for _ in range(n + 1)]
    reach = Fraction(1)
    for j in range(n):
        t = int(d[b, j])
        alpha = min(Fraction(1), P[j][t] / Q[j][t])
        resid = [max(Fraction(0), P[j][x] - Q[j][x]) for x in range(V)]
        mass = sum(resid)
        law[j][t + 1] += reach * alpha
        for x in range(V):
            if mass:
                law[j][x + 1] += reach * (1 - alpha) * resid[x] / mass
        for k in range(j + 1, n + 1):
            law[k][0] += reach * (1 - alpha)
        reach *= alpha
    total = sum(P[n])
    for x in range(V):
        law[n][x + 1] += reach * P[n][x] / total
    return law


@pytest.mark.parametrize("onehot, zeros", [(False, False), (True, False), (False, True)])
def test_emission_law_matches_exact_fractions(onehot, zeros):
    rng = np.random.default_rng(7)
    d, q, p = _inputs(rng, onehot=onehot, zeros=zeros)
    got = rv.emission_laws(d, q, p)
    for b in range(d.shape[0]):
        want = np.array([[float(x) for x in row] for row in _exact_law(d, q, p, b)])
        np.testing.assert_allclose(got[b], want, rtol=0, atol=1e-14)
    np.testing.assert_allclose(got.sum(-1), 1.0, atol=1e-14)


def test_lossless_marginal_when_drafts_are_drawn_from_q():
    rng = np.random.default_rng(3)
    V = 6
    p = rng.dirichlet(np.ones(V), size=(1, 2)).astype(np.float64)
    q = rng.dirichlet(np.ones(V), size=(1, 1)).astype(np.float64)
    mix = np.zeros(V + 1)
    for t in range(V):                       # average position 0 over d ~ q
        mix += q[0, 0, t] * rv.emission_laws(np.array([[t]]), q, p)[0, 0]
    np.testing.assert_allclose(mix[1:], p[0, 0], atol=1e-15)


def test_sample_draws_from_the_law():
    rng = np.random.default_rng(11)
    d, q, p = _inputs(rng, B=1, n=2, V=5, zeros=True)
    N = 40000
    rows = np.zeros(N, dtype=np.int64)
    out = rv.sample(d[rows], q[rows], p[rows], np.random.default_rng(0))
    law = rv.emission_laws(d, q, p)[0]
    for j in range(3):
        observed = np.bincount(out[:, j] + 1, minlength=6)
        support = law[j] > 0
        assert observed[~support].sum() == 0, f"position {j} emitted an outcome of probability 0"
        if support.sum() > 1:
            assert stats.chisquare(observed[support], N * law[j][support]).pvalue > 1e-4


def test_one_hot_targets_give_the_greedy_output():
    V, n = 5, 3
    argmax = np.array([[2, 4, 1, 0]])
    p = np.zeros((1, n + 1, V), dtype=np.float32)
    p[0, np.arange(n + 1), argmax[0]] = 1.0
    d = np.array([[2, 4, 3]])                 # two agree, the third does not
    assert rv.deterministic_output(d, None, p).tolist() == [[2, 4, 1, -1]]
    q = np.full((1, n, V), 0.2, dtype=np.float32)
    assert rv.deterministic_output(d, q, p).tolist() == [[2, 4, 1, -1]]
    with pytest.raises(ValueError, match="random"):
        rv.deterministic_output(d, q, np.full((1, n + 1, V), 0.2, dtype=np.float32))


@pytest.mark.parametrize("edit, message", [
    (lambda d, q, p: q.__setitem__((0, 1, d[0, 1]), 0.0), r"draft_probs\[0, 1, \d+\] = 0 at the draft token"),
    (lambda d, q, p: p.__setitem__((0, 2, 3), -0.1), r"target_probs\[0, 2, 3\] = .*finite and >= 0"),
    (lambda d, q, p: p.__setitem__((0, 0, 0), np.nan), r"target_probs\[0, 0, 0\]"),
    (lambda d, q, p: q.__setitem__((0, 1, 2), np.inf), r"draft_probs\[0, 1, 2\] = inf"),
    (lambda d, q, p: p.__setitem__((0, 1, 4), -np.inf), r"target_probs\[0, 1, 4\] = -inf"),
    (lambda d, q, p: d.__setitem__((0, 0), 9), r"draft_token_ids\[0, 0\] = 9 is outside \[0, 5\)"),
])
def test_inputs_outside_the_contract_are_named(edit, message):
    d, q, p = _inputs(np.random.default_rng(0), B=1)
    edit(d, q, p)
    with pytest.raises(ValueError, match=message):
        rv.emission_laws(d, q, p)


def test_an_empty_residual_with_a_possible_rejection_is_refused():
    p = np.array([[[0.5, 0.5], [0.5, 0.5]]], dtype=np.float32)
    q = np.array([[[0.6, 0.6]]], dtype=np.float32)            # q >= p everywhere: not a law
    with pytest.raises(ValueError, match="max\\(0, p - q\\) has no mass"):
        rv.drawn_laws(np.array([[0]]), q, p)
