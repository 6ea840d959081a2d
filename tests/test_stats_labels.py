"""Group labels as codes (equiv.stats.labels): every per-group test gives the same result, bit for
bit, whether its tokens' labels come as a string array or as ``Labels``."""
import numpy as np
import pytest

from equiv.ops.verify import lossless
from equiv.ops.verify.laws import rank_fit
from equiv.stats import Labels, sampling_fit


def _strings(rng, n):
    fams = np.array(["realistic", "ties", "wide:realistic"])
    fam = fams[rng.integers(0, 3, n)]
    pos = rng.integers(0, 5, n)
    return np.char.add(np.char.add(fam, ":position"), pos.astype(str))


def test_masks_and_names_are_the_string_arrays():
    rng = np.random.default_rng(0)
    s = _strings(rng, 5000)
    labels = Labels.of(s)
    assert labels.present() == sorted(set(s.tolist()))
    for name in labels.present() + ["absent:position0"]:
        assert np.array_equal(labels.mask(name), s == name)
    # concatenation under one table, and renaming (two names that become one merge)
    a, b = Labels.of(s[:3000]), Labels.of(s[3000:])
    both = Labels.concat([a, b, Labels(("x",), np.zeros(0, np.int64))])
    assert [both.names[c] for c in both.codes] == s.tolist()
    merged = labels.renamed(lambda g: g.split(":position")[0])
    assert [merged.names[c] for c in merged.codes] == [g.split(":position")[0] for g in s.tolist()]
    with pytest.raises(ValueError, match="repeat"):
        Labels(("a", "a"), [0, 1])


def test_tests_give_the_same_bits_with_labels_or_strings():
    rng = np.random.default_rng(1)
    n = 20000
    s = _strings(rng, n)
    labels = Labels.of(s)
    u = rng.random(n)
    assert sampling_fit(u, s) == sampling_fit(u, labels)
    cells = rng.integers(0, 4, n)
    expected = rng.dirichlet(np.ones(4), n)
    assert rank_fit(cells, expected, s, alpha=1e-3) == rank_fit(cells, expected, labels, alpha=1e-3)
    scores = {kind: (rng.normal(size=n), rng.random(n), rng.random(n) + 1) for kind in ("target", "side")}
    assert lossless.score_tests(scores, s, 1e-3) == lossless.score_tests(scores, labels, 1e-3)
    # a label that names no position: the suffix groups give way to per-label groups alike
    odd = s.copy()
    odd[:10] = "realistic:bonus"
    assert lossless.score_tests(scores, odd, 1e-3) == lossless.score_tests(scores, Labels.of(odd), 1e-3)


def test_suffix_groups_are_each_familys_positions_from_m_on():
    rng = np.random.default_rng(2)
    s = _strings(rng, 4000)
    family = np.array([g.rpartition(":position")[0] for g in s.tolist()])
    position = np.array([int(g.rpartition(":position")[2]) for g in s.tolist()])
    want = {f"{fam}:from position{m}": (family == fam) & (position >= m)
            for fam in sorted(set(family.tolist())) for m in sorted(set(position[family == fam].tolist()))}
    for groups in (s, Labels.of(s)):
        got = lossless._suffix_groups(groups)
        assert list(got) == list(want)
        assert all(np.array_equal(got[k], want[k]) for k in want)
    assert lossless._suffix_groups(np.array(["realistic:bonus", "realistic:position0"])) is None
