"""``equiv bench`` and ``equiv.ops.draft_topk.bench``: usage errors, output files, and a small GPU run.

Plan: without a GPU the command must say so in one line and exit 2 (checked as a subprocess,
as CI runs it); bad arguments exit 2 before any GPU work; the table, JSON and PNG writers are
checked on a hand-made result (the JSON must read back equal, no temporary file may be left);
on a GPU (marker ``equiv_gpu``) a small run must time every path at every point, with per-call
times that are positive and a ceiling in a plausible range.
"""
import json
import os
import subprocess
import sys

import pytest

import equiv
import torch

from equiv.ops.draft_topk.bench import BenchResult, BenchRow, SizedCeiling, run_bench, write_json, write_plot
from equiv.errors import InvalidArgument

HAS_CUDA = torch.cuda.is_available()


def run(*args):
    return subprocess.run([sys.executable, "-m", "equiv", "bench", *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.skipif(HAS_CUDA, reason="checks the no-GPU message")
def test_no_gpu_is_one_line_exit_2():
    out = run("--batch", "1")
    assert out.returncode == 2
    assert out.stderr.strip() == "equiv bench: error: equiv bench needs a CUDA GPU and none is visible"


@pytest.mark.parametrize("args, needle", [
    (("--batch", "0"), "batch=0 is invalid"),
    (("--batch", "1,x"), "'x' is not an integer"),
    (("--dtype", "float64"), "dtype='float64' is unknown"),
    (("--k", "9", "--vocab", "5"), "k=9 is invalid: k must be <= 5"),
    (("--paths", "no.such:thing"), "no module named"),
])
def test_usage_errors_exit_2(args, needle):
    out = run(*args)
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def _result():
    rows = tuple(BenchRow(p, "bfloat16", 1, b, 1000, us, 2000.0 / us, 50.0 / us, 4, 3, s, 90.0)
                 for p, us, s in (("softmax_topk", 10.0, 1.0), ("fused_triton", 2.0, 5.0))
                 for b in (1, 8))
    sized = tuple(SizedCeiling("bfloat16", b, 1000, 3.0, 1.8, 2.5 if b == 1 else 1.5)
                  for b in (1, 8))
    return BenchResult("Fake GPU", 132, 60 * 2 ** 20, 4000.0, "made up", rows, sized)


def test_table_has_one_line_per_row_and_the_size_matched_ceiling():
    table = _result().table()
    assert "| bfloat16 | 1 | fused_triton | 8 | 2.0 | 1000 | 25 | 90 | 5.0 |" in table
    assert sum(ln.startswith("| bfloat16 | 1 | ") and "_" in ln for ln in table.splitlines()) == 4
    assert "read ceiling 4000 GB/s" in table
    assert "| bfloat16 | 1 | 3.0 | 1.8 | 2.5 | 1.8 | 1 | 0 |" in table   # 2 KB in 1.8 us
    assert "| bfloat16 | 8 | 3.0 | 1.8 | 1.5 | 1.5 | 11 | 0 |" in table  # the fastest layout
    assert SizedCeiling("float32", 1, 10, 2.0, None).source == "torch"
    assert [s.source for s in _result().sized] == ["triton", "triton_wide"]


@pytest.mark.skipif(HAS_CUDA, reason="for machines without a GPU: choosing the interpreter here would "
                    "make every later Triton kernel of this process interpreted (the GPU test below "
                    "runs the compiled read-sum)")
def test_read_sum_kernel_sums_every_row_in_the_interpreter():
    from equiv.ops.draft_topk.paths.fused_triton import _kernels

    _kernels(interpret=True)                      # TRITON_INTERPRET before the kernel module
    from equiv.ops.draft_topk.kernels import read_sum as rs

    x = torch.randn(5, 70000, dtype=torch.float64)
    got = rs.read_sum(x.float())
    assert torch.allclose(got.double(), x.float().double().sum(-1), rtol=0, atol=1e-2)
    assert got.shape == (5,) and got.dtype == torch.float32
    x[2, 69999] += 1000.0                         # the ragged tail is read
    assert float(rs.read_sum(x.float())[2] - got[2]) == pytest.approx(1000.0, abs=1e-2)
    for layout in ({"splits": 1, "stages": 3}, {"splits": 3, "rows": 2}):   # other layouts
        assert torch.allclose(rs.read_sum(x.float(), **layout).double(), x.float().double().sum(-1),
                              rtol=0, atol=1e-2)
    assert torch.allclose(rs.read_sum_wide(x.float()).double(), x.float().double().sum(-1),
                          rtol=0, atol=1e-2)
    y = x.float() / 100                           # the sweep's diagnostic reads: e^x, log sum e^x
    want = torch.exp(y.double()).sum(-1)
    assert torch.allclose(rs.read_sum(y, splits=1, work="exp").double(), want, rtol=1e-5, atol=0)
    assert torch.allclose(rs.read_sum_wide(y, work="exp").double(), want, rtol=1e-5, atol=0)
    assert torch.allclose(rs.read_sum(y, splits=1, stages=3, work="softmax").double(),
                          torch.log(want), rtol=0, atol=1e-5)
    with pytest.raises(InvalidArgument, match="work='max' is invalid"):
        rs.read_sum(y, work="max")


def test_json_and_plot_are_written_whole(tmp_path):
    res = _result()
    write_json(res, str(tmp_path / "b.json"))
    assert json.loads((tmp_path / "b.json").read_text()) == {"equiv_version": equiv.__version__, **res.to_json()}
    pytest.importorskip("matplotlib")
    write_plot(res, str(tmp_path / "b.png"))
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(os.listdir(tmp_path)) == ["b.json", "b.png"]   # no temporary files left


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_small_gpu_run_times_every_point():
    res = run_bench(dtypes=("bfloat16",), ks=(1, 2), batches=(1, 8), vocab=4097, replays=3)
    assert 500 < res.ceiling_gbps < 20000
    seen = {(r.path, r.k, r.batch) for r in res.rows}
    assert ("fused_triton", 2, 8) in seen and ("identity_top1", 1, 1) in seen
    assert ("identity_top1", 2, 1) not in seen          # k = 1 only paths skip k = 2
    assert len(seen) == 2 * 4 + 2 * 2
    assert all(r.us > 0 and r.buffers >= 2 for r in res.rows)
    assert all(r.buffers * r.batch * r.vocab * 2 > 2 * res.l2_bytes for r in res.rows)
    assert [(s.batch, s.triton_sum_us > 0, s.wide_sum_us > 0, s.torch_sum_us > 0)
            for s in res.sized] == [(1, True, True, True), (8, True, True, True)]
    assert all(r.pct_sized is not None and r.pct_sized > 0 for r in res.rows)
