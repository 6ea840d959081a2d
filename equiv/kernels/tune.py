"""The variant sweep behind docs/kernel-notes.md: ``python -m equiv.kernels.tune [OUT.json]``.

Plan: on one GPU, under the timing protocol of ``equiv/bench.py`` (CUDA-graph replays over
buffers that exceed twice the L2, median per call), time for float32 and bfloat16 at
B = 1, 8, 64, 256, 1024, V = 129280:
- ``argmax_only``: a split-V kernel with the same layout that only finds the argmax and writes
  1.0: the floor this kernel is held to (issue 7: within 1.1x of such a kernel);
- ``fused_triton`` with the wrapper's defaults (twice, for the run-to-run spread) and with one
  change at a time: programs per SM, tile height, warps, how the partials are combined;
- the defaults at k = 2, 4, 8, and k = 4 with other programs per SM and tile height.
Prints one line per point and writes every point as JSON.
"""
from __future__ import annotations

import json
import sys

import torch
import triton
import triton.language as tl

from equiv.bench import make_buffers, read_ceiling, time_path
from equiv.kernels import fused_softmax_topk as fk
from equiv.paths.fused_triton import with_layout

VOCAB = 129280
BATCHES = (1, 8, 64, 256, 1024)


@triton.jit
def _argmax_only_kernel(x_ptr, stride_row, V, CHUNK, SPLITS, part_m_ptr, part_i_ptr, count_ptr,
                        p_ptr, idx_ptr, S_PAD: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.program_id(1) * CHUNK
    stop = tl.minimum(start + CHUNK, V)
    lane = tl.arange(0, BLOCK)
    x_row = x_ptr + row.to(tl.int64) * stride_row
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    at = tl.zeros([BLOCK], tl.int32) + start
    for off in range(start, stop, BLOCK):
        x = tl.load(x_row + off + lane, mask=off + lane < stop, other=float("-inf")).to(tl.float32)
        gt = x > m
        m = tl.where(gt, x, m)
        at = tl.where(gt, off, at)
    M = tl.max(m, 0)
    top = tl.min(tl.where(m == M, at + lane, fk.BIG_INDEX), 0)
    if SPLITS == 1:
        tl.store(p_ptr + row, 1.0)
        tl.store(idx_ptr + row, top.to(tl.int64))
    else:
        part = row * SPLITS + tl.program_id(1)
        tl.store(part_m_ptr + part, M)
        tl.store(part_i_ptr + part, top)
        tl.debug_barrier()
        if tl.atomic_add(count_ptr + row, 1, sem="acq_rel") == SPLITS - 1:
            js = tl.arange(0, S_PAD)
            pm = tl.load(part_m_ptr + row * SPLITS + js, mask=js < SPLITS, other=float("-inf"),
                         cache_modifier=".cg")
            pi = tl.load(part_i_ptr + row * SPLITS + js, mask=js < SPLITS, other=fk.BIG_INDEX,
                         cache_modifier=".cg")
            best = tl.min(tl.where(pm == tl.max(pm, 0), pi, fk.BIG_INDEX), 0)
            tl.store(p_ptr + row, 1.0)
            tl.store(idx_ptr + row, best.to(tl.int64))
            tl.store(count_ptr + row, 0)


def argmax_only(logits, k):
    batch, vocab = logits.shape
    cfg = fk.choose_config(batch, vocab, logits.element_size(), logits.device, rows=1,
                           block=4 * fk.GPU_WARPS * 32 * 16 // logits.element_size())
    p = torch.empty((batch, 1), dtype=torch.float32, device=logits.device)
    idx = torch.empty((batch, 1), dtype=torch.int64, device=logits.device)
    part_m = torch.empty(batch * cfg.splits, dtype=torch.float32, device=logits.device)
    part_i = torch.empty(batch * cfg.splits, dtype=torch.int32, device=logits.device)
    count = torch.zeros(batch, dtype=torch.int32, device=logits.device)
    _argmax_only_kernel[(batch, cfg.splits)](
        logits, logits.stride(0), vocab, cfg.chunk, cfg.splits, part_m, part_i, count, p, idx,
        S_PAD=triton.next_power_of_2(cfg.splits), BLOCK=cfg.block, num_warps=cfg.num_warps)
    return p, idx


def variants():
    """(name, fn, k): the floor, the defaults twice, one change at a time from the defaults."""
    out = [("argmax_only", argmax_only, 1), ("default", with_layout(), 1)]
    out += [(f"ppsm{n}", with_layout(programs_per_sm=n), 1) for n in (4, 16)]
    out += [(f"r{r}", with_layout(rows=r), 1) for r in (2, 8)]
    out += [("w8", with_layout(num_warps=8), 1), ("separate", with_layout(combine="separate"), 1),
            ("fused_zeros", with_layout(combine="fused_zeros"), 1), ("default_again", with_layout(), 1)]
    out += [(f"k{k}", with_layout(), k) for k in (2, 4, 8)]
    out += [("k4_ppsm4", with_layout(programs_per_sm=4), 4), ("k4_r1", with_layout(rows=1), 4)]
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ceiling, how = read_ceiling()
    print(f"ceiling {ceiling:.0f} GB/s ({how}); defaults: rows {fk.GPU_ROWS} (k > 1: "
          f"{fk.GPU_ROWS_TOPK}), warps {fk.GPU_WARPS}, {fk.PROGRAMS_PER_SM} programs/SM", flush=True)
    points = []
    for dtype in (torch.float32, torch.bfloat16):
        for batch in BATCHES:
            bufs = make_buffers(batch, VOCAB, dtype, l2)
            nbytes = bufs[0].numel() * bufs[0].element_size()
            cells = []
            for name, fn, k in variants():
                try:
                    us = time_path(fn, bufs, k, replays=20)
                except Exception as exc:          # one broken variant must not end the sweep
                    cells.append(f"{name}=ERROR")
                    print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    continue
                pct = 100 * nbytes / (us * 1e-6) / 1e9 / ceiling
                points.append({"dtype": str(dtype), "batch": batch, "variant": name, "k": k,
                               "us": us, "pct_ceiling": pct})
                cells.append(f"{name}={us:.2f}")
            print(f"{str(dtype)[6:]:8} B={batch:<5} " + " ".join(cells), flush=True)
            del bufs
            torch.cuda.empty_cache()
    if argv:
        with open(argv[0], "w") as f:
            json.dump({"ceiling_gbps": ceiling, "points": points}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
