"""The reference against an exact oracle (mpmath at 60 digits) on small V.

Checked: probabilities, canonical indices (ties to the lowest index), tie sets, -inf entries,
and the poisoned rows (NaN, one +inf, several +inf, all -inf)."""
import mpmath
import numpy as np
import pytest

from equiv import reference
from equiv.reference import softmax_topk

mpmath.mp.dps = 60


def exact_softmax(row):
    xs = [mpmath.mpf(float(v)) for v in row]
    finite = [x for x in xs if mpmath.isfinite(x)]
    m = max(finite)
    s = mpmath.fsum(mpmath.e ** (x - m) for x in finite)
    return [mpmath.e ** (x - m) / s if mpmath.isfinite(x) else mpmath.mpf(0) for x in xs]


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("vocab", [1, 2, 7, 33])
def test_probabilities_match_mpmath(seed, vocab):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((3, vocab)) * rng.choice([0.1, 3, 30])).astype(np.float32)
    if vocab > 2:
        x[1, rng.integers(vocab)] = -np.inf
    k = min(3, vocab)
    ref = softmax_topk(x, k)
    for b in range(3):
        exact = exact_softmax(x[b])
        order = sorted(range(vocab), key=lambda j: (-exact[j], j))[:k]
        assert ref.topk_index[b].tolist() == order
        for r, j in enumerate(order):
            assert abs(ref.topk_p[b, r] - float(exact[j])) <= 1e-14 * float(exact[j]) + 1e-300
        probs = ref.row_probs(b)
        assert np.allclose(probs, [float(e) for e in exact], rtol=1e-13, atol=0)


def test_exact_ties_break_to_lowest_index_and_tie_set_lists_all():
    x = np.array([[0.0, 3.0, 1.0, 3.0, 3.0]], dtype=np.float32)
    ref = softmax_topk(x, 2)
    assert ref.topk_index.tolist() == [[1, 3]]
    assert ref.tie_set(0, 0).tolist() == [1, 3, 4]
    assert ref.in_tie_set(np.array([[4, 1]])).all()
    assert not ref.in_tie_set(np.array([[2, 1]]))[0, 0]


def test_near_tie_enters_tie_set_only_within_tolerance():
    top = np.float32(5.0)
    below = np.nextafter(top, np.float32(0))
    x = np.array([[top, below, 0.0]], dtype=np.float32)
    ref = softmax_topk(x, 1)
    assert ref.tie_set(0, 0).tolist() == [0]
    assert ref.tie_set(0, 0, tie_rtol=2.0 ** -19).tolist() == [0, 1]


def test_poisoned_rows():
    x = np.array([[0.0, np.nan, 1.0], [0.0, np.inf, 1.0], [np.inf, np.inf, 0.0],
                  [-np.inf, -np.inf, -np.inf], [-np.inf, 2.0, -np.inf]])
    ref = softmax_topk(x, 2)
    assert ref.kind == (reference.POISON_NAN, reference.POISON_POSINF, reference.POISON_MULTI_POSINF,
                        reference.POISON_ALL_NEGINF, reference.HEALTHY)
    assert np.isnan(ref.topk_p[0]).all() and np.isnan(ref.topk_p[2]).all() and np.isnan(ref.topk_p[3]).all()
    assert ref.topk_p[1].tolist() == [1.0, 0.0] and ref.topk_index[1, 0] == 1
    assert ref.topk_p[4].tolist() == [1.0, 0.0] and ref.topk_index[4, 0] == 1
    assert ref.poisoned.tolist() == [True, True, True, True, False]


def test_bfloat16_values_embed_exactly():
    torch = pytest.importorskip("torch")
    t = torch.randn(2, 50).to(torch.bfloat16)
    ref = softmax_topk(t.float().numpy(), 1)
    exact = exact_softmax(t[0].float().numpy())
    assert abs(ref.topk_p[0, 0] - float(max(exact))) < 1e-15


@pytest.mark.parametrize("bad, msg", [(np.zeros(3), "2-D"), (np.zeros((2, 3), dtype=np.int64), "floating")])
def test_rejects_bad_input(bad, msg):
    with pytest.raises(ValueError, match=msg):
        softmax_topk(bad, 1)


@pytest.mark.parametrize("k", [0, 4])
def test_rejects_bad_k(k):
    with pytest.raises(ValueError, match="k="):
        softmax_topk(np.zeros((1, 3)), k)
