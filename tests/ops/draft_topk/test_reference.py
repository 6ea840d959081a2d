"""The reference against an exact oracle (mpmath at 60 digits) on small V.

Checked: probabilities, canonical indices (ties to the lowest index), tie sets, -inf entries,
and the poisoned rows (NaN, one +inf, several +inf, all -inf); and all of it at every magnitude
the input dtypes hold, up to float32's 3.4e38, float16's 65504 and bfloat16's 3.39e38."""
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


# dtype: (stored mantissa bits, largest finite value, rounding of float64 values into the dtype)
def _round_bf16(v):
    torch = pytest.importorskip("torch")
    return torch.from_numpy(np.asarray(v, dtype=np.float32)).to(torch.bfloat16).float().numpy()


DTYPE_RANGE = {
    "float32": (23, float(np.finfo(np.float32).max), lambda v: np.asarray(v).astype(np.float32)),
    "float16": (10, 65504.0, lambda v: np.asarray(v).astype(np.float16)),
    "bfloat16": (7, 3.3895313892515355e38, _round_bf16),
}


def magnitude_rows(dtype, seed, vocab=9):
    """Rows of ``dtype`` values a few spacings apart (exact ties included) at a magnitude from
    2**10 up to the dtype's max, either sign: softmax is far from trivial there, and the
    largest-magnitude rows are where ``m + log(sum)`` rounds ``log(sum)`` away."""
    bits, top, cast = DTYPE_RANGE[dtype]
    rng = np.random.default_rng(seed)
    max_exp = int(np.floor(np.log2(top)))
    rows = []
    for e in (10, max_exp // 2, max_exp - 1, max_exp):
        spacing = 2.0 ** (e - bits)
        m = min(top, 2.0 ** e * (1 + rng.integers(0, 2 ** bits) * 2.0 ** -bits))
        steps = rng.integers(0, 4, size=vocab) * (rng.random(vocab) < 0.7)   # many exact ties
        for sign in (1.0, -1.0):
            row = np.asarray(cast(sign * (m - steps * spacing * rng.choice([1, 1.0 / 64]))), dtype=np.float64)
            rows.append(row)
    rows.append(np.array([top, top] + [-top] * (vocab - 2)))        # the ends of the range
    return np.stack(rows)


@pytest.mark.parametrize("dtype", sorted(DTYPE_RANGE))
@pytest.mark.parametrize("seed", range(4))
def test_exact_at_every_magnitude_of_the_dtype(dtype, seed):
    x = magnitude_rows(dtype, seed)
    k = 3
    ref = softmax_topk(x, k)
    assert not ref.poisoned.any()
    for b in range(x.shape[0]):
        exact_mp = exact_softmax(x[b])                   # ordered exactly: the floats underflow
        order = sorted(range(x.shape[1]), key=lambda j: (-exact_mp[j], j))[:k]
        exact = [float(e) for e in exact_mp]
        assert ref.topk_index[b].tolist() == order, f"row {b}: {x[b].tolist()}"
        np.testing.assert_allclose(ref.topk_p[b], [exact[j] for j in order], rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(ref.row_probs(b), exact, rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(ref.prob_of(np.array([order]).repeat(x.shape[0], 0))[b],
                                   [exact[j] for j in order], rtol=1e-13, atol=1e-300)
        ties = [j for j in range(x.shape[1]) if x[b, j] == x[b, order[0]]]
        assert ref.tie_set(b, 0).tolist() == ties


def test_two_equal_logits_at_any_magnitude_share_one_half():
    for v in (2.0 ** 41, 1e30, float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max), 65504.0):
        ref = softmax_topk(np.array([[v, v]], dtype=np.float32), 2)
        assert ref.topk_p.tolist() == [[0.5, 0.5]], v


def test_threaded_rows_give_the_row_by_row_answer(monkeypatch):
    import sys

    ref = sys.modules["equiv.reference.softmax_topk"]
    x = np.random.default_rng(3).standard_normal((40, 3000)).astype(np.float32)
    x[3, 5], x[4, :], x[5, 7], x[6, 1:3] = np.nan, -np.inf, np.inf, np.inf
    monkeypatch.setattr(ref, "THREADED_ELEMENTS", 1)
    monkeypatch.setattr(ref, "_threads", lambda: 4)
    threaded = ref.softmax_topk(x, 3)
    monkeypatch.setattr(ref, "THREADED_ELEMENTS", 10 ** 12)
    plain = ref.softmax_topk(x, 3)
    assert threaded.kind == plain.kind and threaded.kind[3:7] == ("nan", "all_neginf", "posinf", "multi_posinf")
    assert np.array_equal(threaded.topk_index, plain.topk_index)
    assert np.array_equal(threaded.topk_p, plain.topk_p, equal_nan=True)
    assert np.array_equal(threaded.log_sum, plain.log_sum, equal_nan=True)
