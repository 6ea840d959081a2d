"""One read of the logits: per row the max, the online-rescaled sum of exp(x - max), and the top-k.

Plan
----
What the baseline moves, per row of V logits of ``e`` bytes (float32: e = 4, bf16/f16: e = 2):
``softmax`` reads V e and writes V e, ``max``/``topk`` read V e again: 3 V e bytes, plus a
launch each. This kernel reads V e bytes once and writes k x (4 + 8) bytes; per program it also
writes a partial of 12 + 8 K_PAD bytes that one program per row reads back. At B = 1024,
V = 129280 that is 529 MB (float32) or 265 MB (bf16) against 12 KB of partials, so the floor is
B V e / (read bandwidth): 121 us / 61 us at the 4.36 TB/s measured. At B = 1 the data (517 KB / 259 KB) takes
0.1 us to stream and the time is launch and latency: the kernel must be one launch, one pass.

The kernel, per program (a row ``r`` and a chunk ``[start, start + CHUNK)`` of its vocabulary):
1. Walk the chunk in tiles of ROWS x LANES consecutive logits. LANES is one 16-byte load per
   thread across the program, so a thread holds ROWS elements of each of its lanes and the
   reductions over ROWS stay in registers. Per lane keep the running max ``m`` (and the offset
   of the element that holds it) and ``s``, the sum of exp(x - m): a tile's column max m' and
   its row come first, then ``s = s exp(m - m') + sum exp(x - m')``. State is per lane, not
   per element, so registers go to loads in flight (docs/kernel-notes.md: v1 kept it per
   element and ran out). Whole tiles load unmasked; the ragged end is one masked tile.
2. For k > 1, also keep an unsorted list of the K best (value, index) of the chunk. A tile is
   merged only when its max beats the list's worst entry, and then only as many elements as beat
   it are moved in, so after the first tiles most tiles cost one extra max-reduction.
3. Reduce the lanes to (M, S, index) for the chunk. With one chunk per row, finish the row here;
   otherwise write the partial, and the last program of the row to arrive (an atomic counter,
   cached per stream and reset by that program, so no memset runs per call) combines the
   row's partials: one launch, no host synchronization, no data-dependent allocation, so it
   can be captured in a CUDA graph.

Non-finite input (the poisoning rule of reference/softmax_topk.py):
- NaN never wins the ``>`` against ``m``, so ``m`` is never NaN, while exp(NaN - m') makes
  ``s`` NaN; NaN survives every later rescale and combine, so the row's p is NaN.
- A +inf makes the lane's max +inf; combining that lane needs exp(m - M) = exp(inf - inf) = NaN,
  so any +inf row gives NaN (one +inf may give NaN by the rule; several must).
- -inf is exp(-inf) = 0. The differences are taken against ``max(m', -FLT_MAX)``, never
  against a bare -inf, so a lane or a whole chunk of -inf padding contributes 0, not exp(-inf + inf) = NaN.
  An all -inf row ends with S = 0, and p = NaN is written for S <= 0 or S NaN.
Ties: the column max takes the first row, the strict ``>`` keeps the first tile; lanes, list
entries and partials are compared on (value, lowest index): the lowest index of a tie wins.

The wrapper at the end picks the tile, warps and the split of V from the batch size, k and the
device's multiprocessor count (the figures behind the choice are in docs/kernel-notes.md).
The measured result (one H200, V = 129280): float32 B = 1024 in 122 us, 99% of the read
ceiling; B = 1 in 3.7-3.8 us.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

# Read once, when the kernels are decorated: the Triton interpreter is chosen at that moment.
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# Kernels may read module globals only when they are constexpr.
INTERPRETED_NAN_GUARD = tl.constexpr(INTERPRETED)
LOG2E = tl.constexpr(1.4426950408889634)
NEG_FLT_MAX = tl.constexpr(-3.4028234663852886e38)
BIG_INDEX = tl.constexpr(2147483647)   # loses every "lowest index" comparison; never returned


@triton.jit
def _finish(p_ptr, idx_ptr, row, M, S, top_index, cand_v, cand_j,
            K: tl.constexpr, K_PAD: tl.constexpr):
    """Write topk_p / topk_index of one row from its (M, S) and its candidates."""
    bad = ~(S > 0.0)                 # all -inf (S == 0) or poisoned (S NaN)
    if K == 1:
        p = tl.where(bad, float("nan"), 1.0 / S)
        tl.store(p_ptr + row, p)
        tl.store(idx_ptr + row, top_index.to(tl.int64))
    else:
        rank = tl.arange(0, K_PAD)
        out_v = tl.full([K_PAD], float("-inf"), tl.float32)
        out_j = tl.full([K_PAD], 0, tl.int32)
        # Extract in (value desc, index asc) order; a taken entry is retired by its index,
        # which is unique among real entries (chunks are disjoint).
        for r in tl.static_range(K):
            v = tl.max(cand_v, 0)
            j = tl.min(tl.where(cand_v == v, cand_j, BIG_INDEX), 0)
            out_v = tl.where(rank == r, v, out_v)
            out_j = tl.where(rank == r, j, out_j)
            hit = cand_j == j
            cand_v = tl.where(hit, float("-inf"), cand_v)
            cand_j = tl.where(hit, BIG_INDEX, cand_j)
        m_safe = tl.maximum(M, NEG_FLT_MAX)
        p = tl.exp2((out_v - m_safe) * LOG2E) / S
        p = tl.where(bad, float("nan"), p)
        tl.store(p_ptr + row * K + rank, p, mask=rank < K)
        tl.store(idx_ptr + row * K + rank, out_j.to(tl.int64), mask=rank < K)


@triton.jit
def _combine_row(row, SPLITS, part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr, part_j_ptr, p_ptr,
                 idx_ptr, S_PAD: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr):
    """Fold the SPLITS partials of one row. Loads bypass L1 (.cg): other programs wrote them."""
    js = tl.arange(0, S_PAD)
    live = js < SPLITS
    base = row * SPLITS
    pm = tl.load(part_m_ptr + base + js, mask=live, other=float("-inf"), cache_modifier=".cg")
    ps = tl.load(part_s_ptr + base + js, mask=live, other=0.0, cache_modifier=".cg")
    M = tl.max(pm, 0)
    S = tl.sum(ps * tl.exp2((pm - tl.maximum(M, NEG_FLT_MAX)) * LOG2E), 0)
    if K == 1:
        pi = tl.load(part_i_ptr + base + js, mask=live, other=BIG_INDEX, cache_modifier=".cg")
        top = tl.min(tl.where(pm == M, pi, BIG_INDEX), 0)
        _finish(p_ptr, idx_ptr, row, M, S, top, pm, pi, K, K_PAD)
    else:
        cs = tl.arange(0, S_PAD * K_PAD)
        clive = cs < SPLITS * K_PAD
        cv = tl.load(part_v_ptr + base * K_PAD + cs, mask=clive, other=float("-inf"),
                     cache_modifier=".cg")
        cj = tl.load(part_j_ptr + base * K_PAD + cs, mask=clive, other=BIG_INDEX,
                     cache_modifier=".cg")
        _finish(p_ptr, idx_ptr, row, M, S, 0, cv, cj, K, K_PAD)


@triton.jit
def _tile_step(x_row, off, stop, tile, rank, m, s, at, list_v, list_j, worst_v, worst_j,
               MASKED: tl.constexpr, K: tl.constexpr, LANES: tl.constexpr):
    """Fold one ROWS x LANES tile at ``off`` into the running state (steps 1 and 2 of the plan)."""
    offs = off + tile
    if MASKED:
        inside = offs < stop
        x = tl.load(x_row + offs, mask=inside, other=float("-inf")).to(tl.float32)
    else:
        x = tl.load(x_row + offs).to(tl.float32)
    if INTERPRETED_NAN_GUARD:          # NumPy's argmax refuses all-NaN columns; CUDA's does not
        x_cmp = tl.where(x == x, x, float("-inf"))
    else:
        x_cmp = x
    col_max, col_row = tl.max(x_cmp, 0, return_indices=True,
                              return_indices_tie_break_left=True)
    gt = col_max > m                                # NaN never wins: m is never NaN
    m_new = tl.where(gt, col_max, m)
    ref = tl.maximum(m_new, NEG_FLT_MAX)
    # Subtract before scaling by log2(e): x * log2(e) would round |x| u, too much at |x| ~ 1e4.
    s = (s * tl.exp2((m - ref) * LOG2E)
         + tl.sum(tl.exp2((x - ref[None, :]) * LOG2E), 0))
    m = m_new
    if K == 1:
        at = tl.where(gt, off + col_row * LANES, at)
    else:
        # NaN rows: p is NaN whatever is listed; keys without NaN keep the indices valid.
        tile_v = tl.max(tl.where(col_max == col_max, col_max, float("-inf")), 0)
        if (tile_v > worst_v) | (worst_j == BIG_INDEX):
            key = tl.where(x == x, x, float("-inf"))
            if MASKED:
                key_j = tl.where(inside, offs, BIG_INDEX)
            else:
                key_j = offs
            tile_v = tl.max(key)
            tile_j = tl.min(tl.where(key == tile_v, key_j, BIG_INDEX))
            while (tile_v > worst_v) | ((tile_v == worst_v) & (tile_j < worst_j)):
                # Replace the worst slot (the highest-numbered one of equal entries).
                worst = (rank < K) & (list_v == worst_v) & (list_j == worst_j)
                slot = tl.max(tl.where(worst, rank, -1), 0)
                list_v = tl.where(rank == slot, tile_v, list_v)
                list_j = tl.where(rank == slot, tile_j, list_j)
                taken = key_j == tile_j
                key = tl.where(taken, float("-inf"), key)
                key_j = tl.where(taken, BIG_INDEX, key_j)
                worst_v = tl.min(tl.where(rank < K, list_v, float("inf")), 0)
                worst_j = tl.max(tl.where((rank < K) & (list_v == worst_v), list_j, -1), 0)
                tile_v = tl.max(key)
                tile_j = tl.min(tl.where(key == tile_v, key_j, BIG_INDEX))
    return m, s, at, list_v, list_j, worst_v, worst_j


@triton.jit
def _draft_topk_kernel(x_ptr, stride_row, V, CHUNK, SPLITS, p_ptr, idx_ptr,
                       part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr, part_j_ptr, count_ptr,
                       ONE_CHUNK: tl.constexpr, S_PAD: tl.constexpr, K: tl.constexpr,
                       K_PAD: tl.constexpr, ROWS: tl.constexpr, LANES: tl.constexpr,
                       FUSED_COMBINE: tl.constexpr):
    row = tl.program_id(0)
    split = tl.program_id(1)
    start = split * CHUNK
    stop = tl.minimum(start + CHUNK, V)
    lane = tl.arange(0, LANES)
    # A tile is ROWS x LANES consecutive logits; LANES is one 16-byte load per thread across the
    # program, so each thread holds whole columns and the reduction over ROWS stays in registers.
    tile = tl.arange(0, ROWS)[:, None] * LANES + lane[None, :]
    x_row = x_ptr + row.to(tl.int64) * stride_row     # B x stride may pass 2**31

    m = tl.full([LANES], float("-inf"), tl.float32)
    s = tl.zeros([LANES], tl.float32)
    at = tl.zeros([LANES], tl.int32) + start           # offset of the row of each lane's max
    rank = tl.arange(0, K_PAD)
    list_v = tl.full([K_PAD], float("-inf"), tl.float32)
    list_j = tl.full([K_PAD], BIG_INDEX, tl.int32)     # BIG_INDEX marks an empty slot
    worst_v = tl.full([], float("-inf"), tl.float32)
    worst_j = tl.full([], BIG_INDEX, tl.int32)
    # Whole tiles load unmasked (no per-element predicates); the ragged end is one masked tile.
    full_stop = start + (stop - start) // (ROWS * LANES) * (ROWS * LANES)
    for off in range(start, full_stop, ROWS * LANES):
        m, s, at, list_v, list_j, worst_v, worst_j = _tile_step(
            x_row, off, stop, tile, rank, m, s, at, list_v, list_j, worst_v, worst_j,
            False, K, LANES)
    if full_stop < stop:
        m, s, at, list_v, list_j, worst_v, worst_j = _tile_step(
            x_row, full_stop, stop, tile, rank, m, s, at, list_v, list_j, worst_v, worst_j,
            True, K, LANES)

    M = tl.max(m, 0)
    S = tl.sum(s * tl.exp2((m - tl.maximum(M, NEG_FLT_MAX)) * LOG2E), 0)
    top = tl.min(tl.where(m == M, at + lane, BIG_INDEX), 0)
    if ONE_CHUNK:
        _finish(p_ptr, idx_ptr, row, M, S, top, list_v, list_j, K, K_PAD)
    else:
        part = row * SPLITS + split
        tl.store(part_m_ptr + part, M)
        tl.store(part_s_ptr + part, S)
        if K == 1:
            tl.store(part_i_ptr + part, top)
        else:
            tl.store(part_v_ptr + part * K_PAD + rank, list_v)
            tl.store(part_j_ptr + part * K_PAD + rank, list_j)
        if FUSED_COMBINE:
            tl.debug_barrier()            # every thread's partial store precedes the release
            arrived = tl.atomic_add(count_ptr + row, 1, sem="acq_rel")
            if arrived == SPLITS - 1:
                _combine_row(row, SPLITS, part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr,
                             part_j_ptr, p_ptr, idx_ptr, S_PAD, K, K_PAD)
                tl.store(count_ptr + row, 0)   # leave the counter as found


@triton.jit
def _combine_kernel(SPLITS, part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr, part_j_ptr, p_ptr,
                    idx_ptr, S_PAD: tl.constexpr, K: tl.constexpr, K_PAD: tl.constexpr):
    _combine_row(tl.program_id(0), SPLITS, part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr,
                 part_j_ptr, p_ptr, idx_ptr, S_PAD, K, K_PAD)


# ---------------------------------------------------------------------------------------------
# The wrapper: block sizes, the split of V, allocation, launch.

@dataclass(frozen=True)
class KernelConfig:
    """How one call is laid out: tiles of ``rows`` x ``lanes`` logits (``block`` in all),
    ``splits`` programs per row of ``chunk`` logits each, ``num_warps`` per program, and who
    combines the partials of a split row: the last program to arrive, counted on a cached
    per-stream counter (``fused``) or on one zeroed for the call (``fused_zeros``: a memset
    more), or a second launch (``separate``)."""

    rows: int
    lanes: int
    num_warps: int
    splits: int
    chunk: int
    combine: str = "fused"

    @property
    def block(self) -> int:
        return self.rows * self.lanes


# Chosen from the sweep in docs/kernel-notes.md (equiv/kernels/tune.py).
GPU_WARPS = 4
GPU_ROWS = 4
GPU_ROWS_TOPK = 2                # the running list costs registers: fewer rows in flight
PROGRAMS_PER_SM = 8
# Programs of the default layout that fit on one SM at once (64K registers over 128 threads
# x the register count ptxas gives: 48 float32 / 88 bf16 at k = 1, 64 / 116 at k > 1), keyed by
# (element size, k == 1). A batch that alone fills 3/4 of that or more is not split: one row
# per program is then one balanced wave, and a split would only add a ragged second one.
RESIDENT_PER_SM = {(4, True): 10, (2, True): 5, (4, False): 8, (2, False): 4}
# The interpreter runs programs one after another and each tile op costs ~10 us of Python:
# wide tiles, few programs (still several per row when B is small, so CI exercises the combine).
INTERP_LANES = 4096
INTERP_ROWS = 8
INTERP_PROGRAMS = 4

_SM_COUNT: dict = {}


def _sm_count(device) -> int:
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT[device]


def choose_config(batch: int, vocab: int, elem_size: int, device, k: int = 1, *, block=None,
                  rows=None,
                  splits=None, num_warps=None, combine="fused",
                  programs_per_sm=None) -> KernelConfig:
    """Fill the machine: about ``programs_per_sm`` programs per multiprocessor (or
    ``INTERP_PROGRAMS`` under the interpreter), splitting rows when B alone is too few.

    ``block`` (a power of two) fixes the tile size, ``rows`` its height; by default a tile is
    ``GPU_ROWS`` (k = 1) or ``GPU_ROWS_TOPK`` rows of one 16-byte load per thread."""
    num_warps = num_warps or GPU_WARPS
    if INTERPRETED or torch.device(device).type != "cuda":
        lanes, rows_default = INTERP_LANES, INTERP_ROWS
        target, resident = INTERP_PROGRAMS, 0
    else:
        lanes = num_warps * 32 * (16 // elem_size)
        rows_default = GPU_ROWS if k == 1 else GPU_ROWS_TOPK
        n_sm = _sm_count(torch.device(device))
        target = (programs_per_sm or PROGRAMS_PER_SM) * n_sm
        resident = RESIDENT_PER_SM.get((elem_size, k == 1), 0) * n_sm
    if block is not None:
        rows = rows or max(1, block // lanes)
        lanes = block // rows
    rows = rows or rows_default
    block = rows * lanes
    tiles = triton.cdiv(vocab, block)
    if splits is None:
        splits = 1 if 0.75 * resident <= batch <= resident else triton.cdiv(target, batch)
    splits = max(1, min(splits, tiles))
    chunk = triton.cdiv(tiles, splits) * block
    splits = triton.cdiv(vocab, chunk)            # no program may start past V
    return KernelConfig(rows, lanes, num_warps, splits, chunk, combine)


_COUNTERS: dict = {}


def _zeroed_counter(device, batch: int):
    """Arrival counters for the fused combine, zero between calls: the last program of a row
    resets its own. One buffer per (device, stream), so calls that may overlap never share
    one; calls in a CUDA graph keep the buffer of the stream they were captured on, so replay
    a graph on that stream, or on one running no other fused_triton call at the same time.
    It is allocated outside any capture (graph-pool memory would be reused once the graph is
    freed); a call captured before the first eager one gets a zeroed counter of its own."""
    stream = torch.cuda.current_stream(device)
    key = (device, stream.cuda_stream)
    buf = _COUNTERS.get(key)
    if buf is None or buf.numel() < batch:
        if torch.cuda.is_current_stream_capturing():
            return torch.zeros(batch, dtype=torch.int32, device=device)
        buf = torch.zeros(max(batch, 1024), dtype=torch.int32, device=device)
        _COUNTERS[key] = buf
    return buf


def draft_topk(logits: torch.Tensor, k: int, config: KernelConfig | None = None):
    """``(topk_p [B, k] float32, topk_index [B, k] int64)`` of softmax(logits); 1 <= k <= 8.

    The caller (the ``fused_triton`` path) has validated k and handled B = 0 and CPU inputs."""
    batch, vocab = logits.shape
    if logits.stride(1) != 1:                     # rows may be strided; elements must not be
        logits = logits.contiguous()
    if config is None:
        config = choose_config(batch, vocab, logits.element_size(), logits.device, k)
    k_pad = triton.next_power_of_2(k)
    s_pad = triton.next_power_of_2(config.splits)
    dev = logits.device
    topk_p = torch.empty((batch, k), dtype=torch.float32, device=dev)
    topk_index = torch.empty((batch, k), dtype=torch.int64, device=dev)
    n_part = batch * config.splits if config.splits > 1 else 1
    part_m = torch.empty(n_part, dtype=torch.float32, device=dev)
    part_s = torch.empty(n_part, dtype=torch.float32, device=dev)
    part_i = torch.empty(n_part if k == 1 else 1, dtype=torch.int32, device=dev)
    part_v = torch.empty(n_part * k_pad if k > 1 else 1, dtype=torch.float32, device=dev)
    part_j = torch.empty(n_part * k_pad if k > 1 else 1, dtype=torch.int32, device=dev)
    fused = config.combine in ("fused", "fused_zeros") and config.splits > 1
    if not fused:
        count = part_i                            # not read; no memset for nothing
    elif config.combine == "fused" and dev.type == "cuda":
        count = _zeroed_counter(dev, batch)
    else:
        count = torch.zeros(batch, dtype=torch.int32, device=dev)
    _draft_topk_kernel[(batch, config.splits)](
        logits, logits.stride(0), vocab, config.chunk, config.splits, topk_p, topk_index,
        part_m, part_s, part_i, part_v, part_j, count,
        ONE_CHUNK=config.splits == 1, S_PAD=s_pad, K=k, K_PAD=k_pad, ROWS=config.rows,
        LANES=config.lanes, FUSED_COMBINE=fused, num_warps=config.num_warps)
    if config.splits > 1 and not fused:
        _combine_kernel[(batch,)](config.splits, part_m, part_s, part_i, part_v, part_j, topk_p,
                                  topk_index, S_PAD=s_pad, K=k, K_PAD=k_pad, num_warps=4)
    return topk_p, topk_index
