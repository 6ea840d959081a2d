"""The k values ``--k auto`` judges are drawn per seed from classes up to 64, not a fixed list
(issue 43): every k from 1 to 16 occurs over the seeds, non-powers of two included; the gate and
its property run agree on them; tiny vocabularies meet every k past the first; the coverage says
which k classes were judged."""
import pytest

from equiv.errors import InvalidArgument
from equiv.ops.draft_topk import space
from equiv.ops.draft_topk.coverage import TINY_V_FAMILIES, tiny_shapes
from equiv.ops.draft_topk.recipes import Recipe
from equiv.options import AUTO_KS, K_CLASSES, MAX_K, RunOptions, auto_ks, k_class


def test_each_seed_draws_one_k_of_every_class_and_the_seeds_reach_every_k_to_16():
    seen = set()
    for seed in range(300):
        ks = auto_ks(seed)
        assert ks[0] == 1 and len(set(ks)) == len(ks) == len(K_CLASSES)
        assert [k_class(k) for k in ks] == list(K_CLASSES)
        assert max(ks) <= MAX_K
        seen.update(ks)
    assert set(range(1, 17)) <= seen                     # 3, 5, 6, 10, 12, 16 ... every one
    assert any(auto_ks(s) != AUTO_KS for s in range(5))  # not the old fixed list


def test_auto_crosses_to_the_property_run_with_its_seed():
    opts = RunOptions.make("softmax_topk", k="auto", seed=7)
    assert opts.ks == auto_ks(7) and opts.k_auto
    arg = next(a for a in opts.pytest_args() if a.startswith("--equiv-k="))
    again = RunOptions.make("softmax_topk", k=arg.split("=", 1)[1])   # the subprocess has seed 0
    assert again.ks == auto_ks(7) and again.k_auto
    with pytest.raises(InvalidArgument, match="auto:SEED"):
        RunOptions.make("softmax_topk", k="auto:x")


def test_tiny_vocabularies_meet_every_k_past_the_first():
    for k in auto_ks(3)[1:]:
        for family in TINY_V_FAMILIES:
            (shape,) = tiny_shapes(family, k, 3)
            assert k <= shape.vocab <= 2 * k + 3
    assert tiny_shapes("zipf", 5, 0) == ()


def test_the_coverage_names_the_k_classes_judged_and_missed():
    got = space.reach([Recipe(family="gaussian", batch=2, vocab=64)], ["grad"], ks=(1, 3))
    k = got["judged"]["k"]
    assert k["exact checks only"] == ["1", "3-7"] and k["not reached"] == ["power of two", "9-16", "17-64"]
    line = next(x for x in space.table_lines(got) if x.split()[0] == "k" and "judged" not in x and "values" not in x)
    assert "exact checks only: 1, 3-7" in line and "not reached: power of two" in line
