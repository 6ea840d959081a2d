"""The tolerance stage's candidate-independent work kept on disk (equiv/ops/draft_topk/disk_cache.py).

Plan: a value read back is the very bits drawn (every family, every dtype, NaN and inf rows); a
reference read back equals the one computed; the stage with a warm cache gives the checks of the
stage without one, on a correct path and on a mutant; a torn file, a file of another shape and a
reference of other judged rows are made again, never trusted; ``EQUIV_CACHE=0`` writes nothing;
a folder that cannot be written leaves the run as it was; the cache keeps under its size, the
files read least recently going first; a change of any source module gives another folder.
"""
import os

import numpy as np
import pytest
import torch

from equiv import disk_cache as shared
from equiv import reference
from equiv.ops.draft_topk import disk_cache, recipes
from equiv.ops.draft_topk.coverage import Shape, TolerancePlan, judged_rows
from equiv.ops.draft_topk.gate_stages import tolerance_checks
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe, _host_values, host


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("EQUIV_CACHE", "1")
    monkeypatch.delenv("EQUIV_CACHE_MAX_MB", raising=False)
    recipes._LAST.clear()                        # nothing kept in this process from an earlier test
    return tmp_path / "c"


def _bits(t):
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def _files(root):
    return sorted(p for p in root.rglob("*") if p.is_file())


def test_values_read_back_are_the_bits_drawn(cache):
    for fam in FAMILIES:
        for dtype in ("float32", "bfloat16", "float16"):
            r = Recipe(family=fam, seed=3, batch=6, vocab=515, dtype=dtype)
            drawn = disk_cache.values(r, lambda: _host_values(r))
            read = disk_cache.values(r, lambda: pytest.fail("made again although it was written"))
            assert read.dtype == drawn.dtype and read.shape == drawn.shape
            assert torch.equal(_bits(read), _bits(_host_values(r))), (fam, dtype)


def test_a_reference_read_back_equals_the_one_computed(cache):
    r = Recipe(family="poison_mix", seed=2, batch=9, vocab=1025, dtype="bfloat16")
    x = _host_values(r).float().numpy()
    judged = judged_rows(r.batch, r.vocab, seed=r.seed)
    own = reference.softmax_topk(x, 4)
    disk_cache.reference(r, 4, judged, lambda: own)
    got = disk_cache.reference(r, 4, judged, lambda: pytest.fail("computed again although it was written"))
    assert got.k == 4 and got.kind == own.kind and got.rows is None
    for field in ("topk_p", "topk_index", "row_max", "log_sum"):
        assert np.array_equal(getattr(got, field), getattr(own, field), equal_nan=True), field
    made = []
    disk_cache.reference(r, 4, judged[:-1], lambda: made.append(1) or own)   # other judged rows
    assert made == [1]


def _plan():
    return TolerancePlan(0, tuple(((f, d), (Shape(7, 1000), Shape(3, 4097, pad=5))) for f in FAMILIES
                                  for d in ("float32", "bfloat16")))


def _checks(spec):
    got, stage = tolerance_checks(spec, ks=(1, 3), device="cpu", dtypes=("float32", "bfloat16"), batch=8,
                                  seeds=1, seed=5, vocab=1000, timeout=None, plan=_plan(), context="grad")
    return [(c.name, c.passed, c.detail) for c in got], stage.ran["calls"]


def test_a_warm_cache_gives_the_checks_of_no_cache(cache, monkeypatch):
    monkeypatch.setenv("EQUIV_HOST_WORKERS", "0")
    for spec in ("softmax_topk", "equiv.ops.draft_topk.mutants:contiguous_stride_assumed"):
        monkeypatch.setenv("EQUIV_CACHE", "0")
        before = _files(cache) if cache.exists() else []
        without = _checks(spec)
        assert (_files(cache) if cache.exists() else []) == before
        monkeypatch.setenv("EQUIV_CACHE", "1")
        cold = _checks(spec)
        written = _files(cache)
        assert written and any(p.suffix == ".npz" for p in written)
        with monkeypatch.context() as m:         # warm: nothing drawn, no reference computed
            m.setattr(recipes, "_host_values", lambda r: pytest.fail(f"drew {r} again"))
            m.setattr(reference, "softmax_topk", lambda *a: pytest.fail("computed a reference again"))
            warm = _checks(spec)
        assert cold == without and warm == without, spec


def test_a_torn_or_foreign_file_is_made_again(cache):
    r = Recipe(family="gaussian", seed=1, batch=4, vocab=300, dtype="float32")
    want = _host_values(r)
    disk_cache.values(r, lambda: want)
    (path,) = _files(cache)
    path.write_bytes(path.read_bytes()[:100])    # torn
    assert torch.equal(disk_cache.values(r, lambda: want), want)
    np.save(path, np.zeros((3, 300), dtype=np.float32))   # another shape under the recipe's name
    assert torch.equal(disk_cache.values(r, lambda: want), want)
    assert torch.equal(disk_cache.values(r, lambda: pytest.fail("written again but not read")), want)
    b = r.with_(dtype="bfloat16")                 # the recipe's shape in another dtype under its name
    want = _host_values(b)
    np.save(disk_cache._name(b, ".npy"), np.zeros((4, 300), dtype=np.float32))
    got = disk_cache.values(b, lambda: want)
    assert got.dtype == torch.bfloat16 and torch.equal(_bits(got), _bits(want))


def test_off_writes_nothing_and_an_unwritable_folder_changes_nothing(cache, monkeypatch, tmp_path):
    r = Recipe(family="gaussian", seed=1, batch=4, vocab=300, dtype="float16")
    monkeypatch.setenv("EQUIV_CACHE", "0")
    assert torch.equal(disk_cache.values(r, lambda: _host_values(r)), _host_values(r))
    assert not cache.exists()
    blocker = tmp_path / "a file"
    blocker.write_text("")
    monkeypatch.setenv("EQUIV_CACHE", "1")
    monkeypatch.setenv("EQUIV_CACHE_DIR", str(blocker / "below"))   # cannot be made
    assert torch.equal(host(r), _host_values(r))
    monkeypatch.delenv("EQUIV_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(shared.Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home")))
    recipes._LAST.clear()
    assert torch.equal(host(r), _host_values(r))  # no folder can be named: no cache


def test_the_cache_keeps_under_its_size_least_recently_read_first(cache, monkeypatch):
    rs = [Recipe(family="gaussian", seed=s, batch=64, vocab=4096, dtype="float32") for s in range(4)]  # 1 MiB each
    for r in rs[:3]:
        disk_cache.values(r, lambda r=r: _host_values(r))
    first = disk_cache._name(rs[0], ".npy")
    os.utime(first, (1, 1))                      # read long ago ...
    disk_cache.values(rs[1], lambda: pytest.fail("not kept"))
    monkeypatch.setenv("EQUIV_CACHE_MAX_MB", "3.5")
    disk_cache.values(rs[3], lambda: _host_values(rs[3]))
    assert not first.exists()                    # ... so it went first
    assert sum(p.stat().st_size for p in _files(cache)) <= 3.5 * 2 ** 20
    assert disk_cache._name(rs[3], ".npy").exists() and disk_cache._name(rs[1], ".npy").exists()


def test_a_source_change_gives_another_folder(cache, monkeypatch, tmp_path):
    before = disk_cache.folder()
    fake = tmp_path / "m.py"
    fake.write_text("x = 1\n")

    class Module:
        __file__ = str(fake)

    real = shared.importlib.import_module
    monkeypatch.setattr(shared.importlib, "import_module",
                        lambda name: Module if name == disk_cache.SOURCES[-1] else real(name))
    monkeypatch.setattr(shared, "_folders", {})
    assert disk_cache.folder() != before
