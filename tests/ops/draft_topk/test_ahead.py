"""The tolerance stage's host work done ahead in other processes (equiv/ops/draft_topk/ahead.py).

Plan: a worker's job gives the very bits this process would build and the reference it would
compute; the stage with workers gives the same checks as without them, on a correct path and on
a mutant; a caller's script with no ``__main__`` guard runs once, not again in each worker; a
pool that fails makes ``take`` give None from then on, so the stage goes on in its own process;
the workers run below the gate's priority.
"""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from equiv import reference
from equiv.ops.draft_topk import ahead
from equiv.ops.draft_topk.coverage import Shape, TolerancePlan, judged_rows
from equiv.ops.draft_topk.gate_stages import tolerance_checks
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe, _host_values


def _same_bits(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(torch.int16 if a.dtype.itemsize == 2
                                                                            else torch.int32),
                                                                     b.view(torch.int16 if b.dtype.itemsize == 2
                                                                            else torch.int32))


def test_a_job_gives_the_bits_and_the_reference_of_this_process():
    for r in (Recipe(family="poison_mix", seed=3, batch=9, vocab=1025, dtype="bfloat16"),
              Recipe(family="near_ties", seed=1, batch=5, vocab=4097, dtype="float32", pad=3, offset=2)):
        host, judged, ref = ahead.prepare(r, 2)
        mine = _host_values(r)
        assert _same_bits(host, mine)
        assert np.array_equal(judged, judged_rows(r.batch, r.vocab, seed=r.seed))
        own = reference.softmax_topk(mine.float().numpy(), 2)
        assert ref.rows is None
        assert np.array_equal(ref.topk_index, own.topk_index)
        assert np.array_equal(ref.topk_p, own.topk_p, equal_nan=True)
        assert ref.kind == own.kind


def _small_plan():
    return TolerancePlan(0, tuple(((f, d), (Shape(7, 1000), Shape(3, 4097, pad=5))) for f in FAMILIES
                                  for d in ("float32", "bfloat16")))


def _checks(spec, monkeypatch, workers):
    monkeypatch.setenv("EQUIV_HOST_WORKERS", str(workers))
    got, stage = tolerance_checks(spec, ks=(1, 2), device="cpu", dtypes=("float32", "bfloat16"), batch=8,
                                  seeds=1, seed=5, vocab=1000, timeout=None, plan=_small_plan(), context="grad")
    return [(c.name, c.passed, c.detail) for c in got], stage.ran["calls"]


def test_the_stage_with_workers_gives_the_checks_of_the_stage_without(monkeypatch):
    for spec in ("softmax_topk", "equiv.ops.draft_topk.mutants:contiguous_stride_assumed"):
        alone = _checks(spec, monkeypatch, 0)
        assert _checks(spec, monkeypatch, 2) == alone
        assert any(not passed for _, passed, _ in alone[0]) == (spec != "softmax_topk")


def test_a_script_without_a_main_guard_runs_once(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text("print('TOP OF THE SCRIPT')\n"
                      "from equiv.ops.draft_topk.ahead import Ahead\n"
                      "from equiv.ops.draft_topk.recipes import Recipe\n"
                      "r = Recipe(family='gaussian', seed=0, batch=4, vocab=100)\n"
                      "with Ahead([(r, 1)], n_workers=2) as a:\n"
                      "    import time\n"
                      "    t = time.time()\n"
                      "    while not a._ready.is_set() and time.time() - t < 120:\n"
                      "        time.sleep(0.1)\n"
                      "    print('GOT', a.take(r, 1) is not None)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(ahead.__file__)))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root] + [p for p in sys.path if p]))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert out.stdout.count("TOP OF THE SCRIPT") == 1, out.stdout + out.stderr
    assert "GOT True" in out.stdout, out.stdout + out.stderr


def test_a_failing_pool_hands_the_work_back():
    r = Recipe(family="gaussian", seed=0, batch=4, vocab=100)
    with ahead.Ahead([("not a recipe", 1), (r, 1)], n_workers=1) as a:
        assert a._ready.wait(120)
        assert a.take("not a recipe", 1) is None   # the job raised in its worker
        assert a.take(r, 1) is None                # and the pool is closed: this process does the rest
        assert a._pool is None


def test_no_workers_on_a_small_host(monkeypatch):
    monkeypatch.delenv("EQUIV_HOST_WORKERS", raising=False)
    monkeypatch.setattr(ahead, "cores", lambda: 2)
    assert ahead.workers() == 0
    monkeypatch.setattr(ahead, "cores", lambda: 16)
    assert ahead.workers() == ahead.MAX_WORKERS
    with ahead.Ahead([(Recipe(family="gaussian", seed=0, batch=2, vocab=10), 1)], n_workers=0) as a:
        assert a.take(Recipe(family="gaussian", seed=0, batch=2, vocab=10), 1) is None


def test_the_workers_yield_to_the_gate():
    # the suite and the gate's own process are the critical path: the pool takes what they leave
    if not hasattr(os, "nice"):
        pytest.skip("this platform has no process priority (os.nice)")
    with ahead.Ahead([], n_workers=1) as a:
        assert a._ready.wait(120)
        assert a._pool.submit(os.nice, 0).result(timeout=60) >= os.nice(0) + ahead.NICE


def test_the_judge_reads_the_kept_values_unpadded():
    # compare reads the recipe's values through recipes.host: the kept tensor itself (no padded
    # copy, no second draw), while a call gets build's own tensor with the recipe's layout
    from equiv.ops.draft_topk import recipes

    r = Recipe(family="near_ties", seed=2, batch=5, vocab=1000, dtype="bfloat16", pad=3, offset=7)
    values = recipes.host(r)
    assert values.is_contiguous() and values.shape == (5, 1000) and values.storage_offset() == 0
    assert recipes.host(r) is values                 # kept: read again, not drawn again
    built = r.build("cpu")
    assert built.stride() == (1003, 1) and built.storage_offset() == 7
    assert _same_bits(built.contiguous(), values) and built.data_ptr() != values.data_ptr()
