"""The verifiers' candidate-independent laws kept on disk (equiv.disk_cache): the chain's problems
(``recipes._problems``), the tree's banks (``verify_tree.recipes.tree_model``) and its drawn
trees (``verify_tree.recipes.make_trees``).

Plan: what is read back is the very bits made, for every family and draft kind; a warm read
makes nothing; a torn file, a file of another shape or with an array missing is made again,
never trusted; ``EQUIV_CACHE=0`` writes nothing; each op keeps its own folder.
"""
import numpy as np
import pytest

from equiv.ops.verify import recipes as chain
from equiv.ops.verify.recipes import DRAFTS, FAMILIES, VerifyRecipe
from equiv.ops.verify_tree import recipes as tree


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("EQUIV_CACHE", "1")
    chain._problems.cache_clear()
    tree.tree_model.cache_clear()
    yield tmp_path / "c"
    chain._problems.cache_clear()
    tree.tree_model.cache_clear()


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def _chain(r):
    chain._problems.cache_clear()
    return r.make_problems()


def _same(a, b):
    for field in ("target", "draft", "tokens", "proposal"):
        x, y = getattr(a, field), getattr(b, field)
        assert (x is None) == (y is None), field
        if x is not None:
            assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x.view(np.uint8), y.view(np.uint8)), field


def test_chain_problems_read_back_are_the_bits_made(cache, monkeypatch):
    for family in FAMILIES:
        for draft in DRAFTS:
            r = VerifyRecipe(family=family, seed=4, batch=3, n=2, vocab=37, problems=3, draft=draft)
            with monkeypatch.context() as m:
                m.setenv("EQUIV_CACHE", "0")
                fresh = _chain(r)
            made = _chain(r)
            with monkeypatch.context() as m:     # warm: nothing made
                m.setattr(chain, "_one_problem", lambda *a: pytest.fail(f"made {r} again"))
                read = _chain(r)
            _same(fresh, made)
            _same(fresh, read)
    assert all(p.parent.name.startswith("verify-") for p in _files(cache))


def test_chain_a_torn_or_foreign_file_is_made_again(cache):
    r = VerifyRecipe(family="realistic", seed=1, batch=2, n=3, vocab=50, problems=2)
    want = _chain(r)
    (path,) = _files(cache)
    path.write_bytes(path.read_bytes()[:200])    # torn
    _same(_chain(r), want)
    other = VerifyRecipe(family="realistic", seed=1, batch=2, n=3, vocab=51, problems=2)
    _chain(other)
    (b,) = [p for p in _files(cache) if p != path]
    path.write_bytes(b.read_bytes())             # another shape under the recipe's name
    _same(_chain(r), want)
    np.savez(path, target=want.target, tokens=want.tokens)   # arrays missing
    _same(_chain(r), want)


def test_chain_row_drafts_read_back_are_the_draws_made(cache, monkeypatch):
    """The per-row drafts of a sampled recipe (``recipes._row_tokens``) come back from the disk
    cache as drawn, the draws not made again; a part draws its own."""
    r = VerifyRecipe(family="realistic", seed=3, batch=40, n=3, vocab=61, problems=4, drafts="sampled")
    parts = [r, VerifyRecipe.parse(f"{r},part=2")]
    with monkeypatch.context() as m:
        m.setenv("EQUIV_CACHE", "0")
        fresh = [_rows(x) for x in parts]
    made = [_rows(x) for x in parts]
    with monkeypatch.context() as m:             # warm: nothing drawn
        m.setattr(chain, "cdf_draw", lambda *a: pytest.fail("drew the drafts again"))
        read = [_rows(x) for x in parts]
    for a, b, c in zip(fresh, made, read):
        assert a.dtype == np.int64 and np.array_equal(a, b) and np.array_equal(a, c)
    assert not np.array_equal(fresh[0], fresh[1])


def _rows(r):
    chain._row_tokens.cache_clear()
    return r.row_tokens()


def test_tree_banks_read_back_are_the_bits_made(cache, monkeypatch):
    for family in tree.FAMILIES:
        tree.tree_model.cache_clear()
        with monkeypatch.context() as m:
            m.setenv("EQUIV_CACHE", "0")
            fresh = tree.tree_model(family, 2, 29)
        tree.tree_model.cache_clear()
        tree.tree_model(family, 2, 29)
        tree.tree_model.cache_clear()
        with monkeypatch.context() as m:
            m.setattr(tree, "_bank_laws", lambda *a: pytest.fail(f"drew {family} again"))
            read = tree.tree_model(family, 2, 29)
        for field in ("target", "draft", "target32", "draft32"):
            assert np.array_equal(getattr(fresh, field), getattr(read, field)), (family, field)
    assert all(p.parent.name.startswith("verify_tree-") for p in _files(cache))


def test_tree_a_file_of_another_shape_is_made_again_and_off_writes_nothing(cache, monkeypatch):
    want = tree.tree_model("realistic", 1, 40)
    (path,) = _files(cache)
    tree.tree_model.cache_clear()
    np.savez(path, target32=want.target32[:, :20], draft32=want.draft32[:, :20])
    assert np.array_equal(tree.tree_model("realistic", 1, 40).target, want.target)
    monkeypatch.setenv("EQUIV_CACHE", "0")
    tree.tree_model.cache_clear()
    chain._problems.cache_clear()
    before = _files(cache)
    tree.tree_model("flat", 3, 40)
    VerifyRecipe(seed=9, batch=2, n=1, vocab=30).make_problems()
    assert _files(cache) == before


def _trees(r):
    tree.make_trees.cache_clear()
    return tree.make_trees(r)


def test_tree_drawn_trees_read_back_are_the_trees_made(cache, monkeypatch):
    """Every construction's trees (holes, shared problems, parts too) come back from the disk cache
    as drawn, nothing drawn again; a part's are its own; EAGLE's trees are made (not kept)."""
    recipes = [tree.TreeRecipe.parse(text) for text in (
        "realistic:seed=2,batch=30,vocab=40,nodes=9,depth=3,fanout=3,drafts=wor",
        "sparse:seed=2,batch=30,vocab=40,nodes=9,depth=3,fanout=3,drafts=wor,part=1",
        "flat:seed=2,batch=30,vocab=40,nodes=9,depth=3,fanout=2,drafts=iid,holes=1",
        "peaked:seed=2,batch=30,vocab=40,nodes=7,depth=2,fanout=2,drafts=topk,problems=4,probs=0")]
    with monkeypatch.context() as m:
        m.setenv("EQUIV_CACHE", "0")
        fresh = [_trees(r) for r in recipes]
    made = [_trees(r) for r in recipes]
    with monkeypatch.context() as m:             # warm: nothing drawn
        m.setattr(tree, "_drawn_trees", lambda r: pytest.fail(f"drew {r} again"))
        read = [_trees(r) for r in recipes]
    for r, a, b, c in zip(recipes, fresh, made, read):
        for field in ("parents", "tokens", "index", "state", "depth", "max_depth"):
            x, y, z = getattr(a, field), getattr(b, field), getattr(c, field)
            assert np.array_equal(x, y) and np.array_equal(x, z) and np.asarray(z).dtype == np.asarray(x).dtype, (r, field)
    assert not np.array_equal(fresh[0].tokens, _trees(recipes[0].with_(part=1)).tokens)
    eagle = tree.TreeRecipe.parse("realistic:seed=2,batch=5,vocab=40,nodes=9,depth=3,fanout=3,eagle=1")
    before = _files(cache)
    _trees(eagle)
    assert [p for p in _files(cache) if p.parent.name.startswith("verify_tree_trees-")] == \
        [p for p in before if p.parent.name.startswith("verify_tree_trees-")]


def test_tree_a_torn_trees_file_is_drawn_again(cache):
    r = tree.TreeRecipe.parse("realistic:seed=5,batch=12,vocab=30,nodes=6,depth=2,fanout=2,drafts=wor")
    want = _trees(r)
    (path,) = [p for p in _files(cache) if p.parent.name.startswith("verify_tree_trees-")]
    path.write_bytes(path.read_bytes()[:300])
    got = _trees(r)
    assert np.array_equal(got.tokens, want.tokens) and np.array_equal(got.parents, want.parents)


def test_the_arrays_format_gives_back_every_name_shape_dtype_and_bit(tmp_path):
    """``disk_cache.save_arrays`` / ``load_arrays`` (the entries' format, not an ``.npz``): 0-d,
    empty, Fortran-ordered and strided arrays come back as they went in; a cut file raises."""
    from equiv import disk_cache

    named = {"scalar": np.array(3.5), "empty": np.zeros((0, 3), np.float32),
             "fortran": np.asfortranarray(np.arange(12, dtype=np.int64).reshape(3, 4)),
             "strided": np.arange(20, dtype=np.float64)[::3], "labels": np.array(["a", "bc"])}
    path = tmp_path / "x.arrays"
    with open(path, "wb") as f:
        disk_cache.save_arrays(f, named)
    with open(path, "rb") as f:
        got = disk_cache.load_arrays(f)
    assert list(got) == list(named)
    for name, value in named.items():
        assert got[name].shape == value.shape and got[name].dtype == value.dtype
        assert np.array_equal(got[name], value)
    path.write_bytes(path.read_bytes()[:-9])
    with open(path, "rb") as f, pytest.raises(ValueError):
        disk_cache.load_arrays(f)
