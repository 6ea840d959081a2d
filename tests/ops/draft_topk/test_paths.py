"""The built-in paths' own argument checks and metadata."""
import pytest
import torch

import equiv


@pytest.mark.parametrize("name", ["softmax_topk", "hardcoded_one", "identity_top1"])
def test_empty_batch(name):
    p, i = equiv.get_path(name)(torch.zeros(0, 10), 1)
    assert p.shape == (0, 1) and i.shape == (0, 1) and i.dtype == torch.int64


@pytest.mark.parametrize("k, msg", [(0, "k must be >= 1"), (11, "k must be <= V"), ("2", "must be an integer")])
def test_bad_k(k, msg):
    with pytest.raises(equiv.InvalidArgument, match=msg):
        equiv.get_path("softmax_topk")(torch.zeros(2, 10), k)


def test_k1_only_paths_refuse_k2():
    with pytest.raises(equiv.InvalidArgument, match="not supported by path 'hardcoded_one'"):
        equiv.get_path("hardcoded_one")(torch.zeros(2, 10), 2)


def test_unknown_path_suggests_a_name():
    with pytest.raises(equiv.InvalidArgument, match="did you mean 'identity_top1'"):
        equiv.get_path("identity_top")


def test_every_path_describes_itself():
    for name in equiv.path_names():
        meta = equiv.get_path(name).to_json()
        assert meta["description"] and meta["topk_p_meaning"]
