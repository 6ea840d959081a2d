"""A plain read-sum of a ``[B, V]`` tensor: the bench's size-matched ceiling (issue 14).

Plan: the least a draft top-k kernel must do is read the logits once, so the time of a kernel
that only reads them (and adds them up, so the reads cannot be skipped) is the limit for that
exact size, fixed costs included: the launch, the first DRAM round trip, the tail of the last
wave. ``equiv bench`` times this and ``torch.sum(dim=-1)`` in its own protocol and takes the
faster as the size-matched ceiling.

The kernel reads the same tiles as ``fused_softmax_topk`` (ROWS x LANES logits, one 16-byte load
per thread and row, whole tiles unmasked) and splits rows the same way (one wave of programs,
``split_rows``), so a gap between the two is the fused kernel's own work, not a layout choice.
Split rows add their partial sums into a zeroed output (a memset and an atomic add per program).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from equiv.errors import InvalidArgument
from equiv.ops.draft_topk.kernels.fused_softmax_topk import INTERP_LANES, INTERPRETED, WIDE, _sm_count, split_rows

ROWS = 4
WARPS = 4
PROGRAMS_PER_SM = 8


LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def _fold_work(x, m, acc, WORK: tl.constexpr):
    """One tile into the per-lane state of the tuning sweep's diagnostic reads: WORK 1, the sum
    of e^x (the fused kernel's exp alone); 2, the online softmax's running max and rescaled sum
    of e^(x - max) (the fused kernel without its index)."""
    x = x.to(tl.float32)
    if WORK == 1:
        acc += tl.sum(tl.exp2(x * LOG2E), 0)
    else:
        m_new = tl.maximum(m, tl.max(x, 0))
        acc = acc * tl.exp2((m - m_new) * LOG2E) + tl.sum(tl.exp2((x - m_new[None, :]) * LOG2E), 0)
        m = m_new
    return m, acc


@triton.jit
def _read_sum_kernel(x_ptr, stride_row, V, CHUNK, out_ptr, ROWS: tl.constexpr,
                     LANES: tl.constexpr, SPLIT: tl.constexpr, STAGES: tl.constexpr,
                     WORK: tl.constexpr):
    row = tl.program_id(0)
    start = tl.program_id(1) * CHUNK
    stop = tl.minimum(start + CHUNK, V)
    lane = tl.arange(0, LANES)
    tile = tl.arange(0, ROWS)[:, None] * LANES + lane[None, :]
    x_row = x_ptr + row.to(tl.int64) * stride_row
    acc = tl.zeros([LANES], tl.float32)
    full_stop = start + (stop - start) // (ROWS * LANES) * (ROWS * LANES)
    if WORK == 0:                     # the ceiling: nothing but the sum
        if STAGES > 0:
            for off in tl.range(start, full_stop, ROWS * LANES, num_stages=STAGES):
                acc += tl.sum(tl.load(x_row + off + tile).to(tl.float32), 0)
        else:
            for off in range(start, full_stop, ROWS * LANES):
                acc += tl.sum(tl.load(x_row + off + tile).to(tl.float32), 0)
        if full_stop < stop:
            offs = full_stop + tile
            acc += tl.sum(tl.load(x_row + offs, mask=offs < stop, other=0.0).to(tl.float32), 0)
        total = tl.sum(acc, 0)
    else:
        m = tl.full([LANES], float("-inf"), tl.float32)
        for off in tl.range(start, full_stop, ROWS * LANES, num_stages=STAGES):
            m, acc = _fold_work(tl.load(x_row + off + tile), m, acc, WORK)
        if full_stop < stop:
            offs = full_stop + tile
            m, acc = _fold_work(tl.load(x_row + offs, mask=offs < stop, other=float("-inf")),
                                m, acc, WORK)
        if WORK == 2:                 # log(sum e^x) of the chunk: exact with one program a row
            M = tl.max(m, 0)
            total = M + tl.log(tl.sum(acc * tl.exp2((m - M) * LOG2E), 0))
        else:
            total = tl.sum(acc, 0)
    if SPLIT:
        tl.atomic_add(out_ptr + row, total, sem="relaxed")
    else:
        tl.store(out_ptr + row, total)


def read_sum(x: torch.Tensor, *, splits: int | None = None, num_warps: int = WARPS,
             stages: int = 0, rows: int = ROWS, work: str = "sum") -> torch.Tensor:
    """``x.float().sum(-1)`` (up to summation order), reading ``x`` once: ``[B]`` float32.
    ``splits`` (programs a row), ``num_warps``, ``rows`` (the tile's height) and ``stages``
    (software pipelining, as the fused kernel's knob) override the layout; the bench uses the
    defaults, the tuning sweep times others to tell the fused kernel's own work from its
    layout's cost. ``work`` "exp" sums
    e^x instead, "softmax" returns log(sum e^x) by the online softmax (exact only with one
    program a row): how much of that own work the exp and the running max are (GPU run 11,
    docs/kernel-notes.md)."""
    works = {"sum": 0, "exp": 1, "softmax": 2}
    if work not in works:
        raise InvalidArgument(f"work={work!r} is invalid: give one of {', '.join(works)}")

    batch, vocab = x.shape
    if x.stride(1) != 1:
        x = x.contiguous()
    if INTERPRETED or x.device.type != "cuda":
        lanes, slots = INTERP_LANES, 4
        x = x.float()
    else:
        lanes = num_warps * 32 * (16 // x.element_size())
        slots = PROGRAMS_PER_SM * _sm_count(x.device)
    block = rows * lanes
    tiles = triton.cdiv(vocab, block)
    splits = max(1, min(splits or split_rows(batch, slots), tiles))
    chunk = triton.cdiv(tiles, splits) * block
    splits = triton.cdiv(vocab, chunk)
    out = (torch.zeros if splits > 1 else torch.empty)(batch, dtype=torch.float32, device=x.device)
    _read_sum_kernel[(batch, splits)](x, x.stride(0), vocab, chunk, out, ROWS=rows, LANES=lanes,
                                      SPLIT=splits > 1, STAGES=stages, WORK=works[work],
                                      num_warps=num_warps)
    return out


def read_sum_wide(x: torch.Tensor, work: str = "sum") -> torch.Tensor:
    """``read_sum`` in the fused kernel's wide layout (``WIDE``: one pipelined program a row),
    which k = 1 takes from B = 256 while one wave holds the batch. Where that layout reads
    faster than the split one, the size-matched ceiling is this. ``work`` as ``read_sum``'s."""
    return read_sum(x, work=work, **WIDE)

