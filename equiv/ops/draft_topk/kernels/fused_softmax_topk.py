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
   reductions over ROWS stay in registers. Per lane keep the running max ``m`` and ``s``, the
   sum of e^(x - m) = 2^((x - m) log2e): the max is subtracted first and the difference (<= 0)
   scaled after, so the exponent is right to a few ULPs of itself at every float32 magnitude,
   up to FLT_MAX (v4/v5 scaled x and m apart, exp2(fma(x, log2e, -fl(m log2e))), one
   instruction less, and the rounding of fl(m log2e), ~1e23 at |m| ~ 1e30, made the terms
   inf or 0). On a rescale the old sum is multiplied by e^(m_old - m_new), taken the same way.
   State is per lane, not per element (docs/kernel-notes.md: v1 kept it per
   element and ran out of registers). Whole tiles load unmasked; the ragged end is one masked
   tile. For k = 1 the lane also keeps where its max is: the row in the loop (index mode 1,
   short programs) or only the tile, the row found by one re-read after the loop (mode 2).
   Mode 3 (k = 1, B >= 256) keeps the state per thread instead, one (m, s, tile) for all the
   elements a thread holds, a third fewer instructions a tile; the tile is re-read after the
   loop as in mode 2.
2. For k > 1, after the loop: t = the k-th largest lane max. The top k lie in the lanes whose
   max is >= t (an element of any other lane is below k lane maxima), so the columns of those
   lanes (at most CAP of them, a few KB) are read back and the top k taken from them; with more
   than CAP such lanes (ties at t) the chunk is read again and merged tile by tile.
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
- Finite rows are exact in the same sense at any magnitude: x <= m, so x - max(m, -FLT_MAX)
  is <= 0, or -inf when it overflows (x near -FLT_MAX under a max near +FLT_MAX: a 0 term, as
  it should be), never +inf; the max's own term is e^0 = 1, so S >= 1. float32 rows up to
  FLT_MAX and bfloat16 rows up to its max (3.39e38) behave like rows near 0.
Ties: the column max takes the first row, the strict ``>`` keeps the first tile; lanes, list
entries and partials are compared on (value, lowest index): the lowest index of a tie wins.

The wrapper at the end picks the tile, warps and the split of V from the batch size, k and the
device's multiprocessor count (the figures behind the choice are in docs/kernel-notes.md).
The measured result (one H200, V = 129280, v8, commit 83db4ab): float32 B = 1024 in 126.6 us,
102% of the read ceiling; bf16 B = 1024 in 69.3 us (94%), B = 256 at 0.84-0.89x a plain
read-sum of the same size in the kernel's own layout; k = 4 within 1.4x of k = 1 at B >= 256
(docs/bench.md, docs/kernel-notes.md).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from equiv.errors import InvalidArgument

# Read once, when the kernels are decorated: the Triton interpreter is chosen at that moment.
INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# Kernels may read module globals only when they are constexpr.
INTERPRETED_NAN_GUARD = tl.constexpr(INTERPRETED)
LOG2E = tl.constexpr(1.4426950408889634)
NEG_FLT_MAX = tl.constexpr(-3.4028234663852886e38)
BIG_INDEX = tl.constexpr(2147483647)   # loses every "lowest index" comparison; never returned


@triton.jit
def _clamp(m):
    """A running max as the terms are taken against it: raised to -FLT_MAX, so that a lane or a
    chunk of -inf subtracts a finite number (-inf + FLT_MAX = -inf, exp2 of it 0, not NaN)."""
    return tl.maximum(m, NEG_FLT_MAX)


@triton.jit
def _exp_below(x, m_c):
    """e^(x - m_c) = 2^((x - m_c) log2 e) for x <= m_c: the max is subtracted before the scaling,
    so the exponent is <= 0 at any float32 magnitude (x - m_c may round to -inf: a 0 term)."""
    return tl.exp2((x - m_c) * LOG2E)


@triton.jit
def _finish(p_ptr, idx_ptr, row, M, S, top_index, cand_v, cand_j,
            K: tl.constexpr, K_PAD: tl.constexpr):
    """Write topk_p / topk_index of one row from its max M, S = sum e^(x - _clamp(M)) and its
    candidates: p = e^(v - _clamp(M)) / S, the numerator taken like the terms of S."""
    bad = ~(S > 0.0)                 # all -inf (S == 0) or poisoned (S NaN)
    M_c = _clamp(M)
    if K == 1:
        p = tl.where(bad, float("nan"), _exp_below(M, M_c) / S)
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
        p = _exp_below(out_v, M_c) / S
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
    S = tl.sum(ps * _exp_below(_clamp(pm), _clamp(M)), 0)
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
def _fold(x, off, rows, m, s, at, ROWS: tl.constexpr, LANES: tl.constexpr,
          INDEX: tl.constexpr):
    """Fold one loaded ROWS x LANES tile at ``off`` into the per-lane state (step 1 of the plan).

    INDEX 0: no index (k > 1 finds its candidates after the loop); 1: ``at`` is the offset of
    the row holding the lane's max (first row of the first tile); 2: ``at`` is only the tile,
    the row is found by one re-read after the loop."""
    x = x.to(tl.float32)
    if INTERPRETED_NAN_GUARD:          # NumPy's reductions may return NaN; PTX max.f32 does not
        x_cmp = tl.where(x == x, x, float("-inf"))
    else:
        x_cmp = x
    col_max = tl.max(x_cmp, 0)
    gt = col_max > m                                # NaN never wins: m is never NaN
    m_new = tl.where(gt, col_max, m)
    if INDEX == 1:
        col_row = tl.min(tl.where(x_cmp == col_max[None, :], rows[:, None], ROWS), 0)
        at = tl.where(gt, off + col_row * LANES, at)
    elif INDEX == 2:
        at = tl.where(gt, off, at)
    m_c = _clamp(m_new)
    # x - m_c first, then the scaling: a product x log2e taken alone would be rounded to ~1e23
    # apart from m log2e at |x| ~ 1e30 (v4/v5 did that; docs/kernel-notes.md, v6).
    tile_sum = tl.sum(_exp_below(x, m_c[None, :]), 0)
    s = tl.fma(s, _exp_below(_clamp(m), m_c), tile_sum)
    return m_new, s, at


@triton.jit
def _fold_thread(x, off, m, s, at, ROWS: tl.constexpr, LANES: tl.constexpr, VEC: tl.constexpr):
    """Index mode 3: fold one loaded ROWS x LANES tile into per-thread state, one (m, s, at) for
    all the ROWS x VEC elements a thread holds (modes 0-2 keep one per lane, VEC per thread).
    The tile is viewed as ROWS x THREADS x VEC: the view keeps the load's layout (VEC consecutive
    logits a thread), so the reductions over ROWS and VEC stay in a thread's registers (a 3-D
    load spread ROWS over threads: 16 shuffles a tile).
    Per element it is the conversion, a max, x - m, the scaling, the exp and a sum; the rescale
    and the update of ``at`` (the tile, as in mode 2) happen once per thread, not once per lane."""
    x = tl.reshape(x, (ROWS, LANES // VEC, VEC)).to(tl.float32)
    if INTERPRETED_NAN_GUARD:
        x_cmp = tl.where(x == x, x, float("-inf"))
    else:
        x_cmp = x
    t_max = tl.max(tl.max(x_cmp, 2), 0)
    gt = t_max > m                                   # NaN never wins: m is never NaN
    m_new = tl.where(gt, t_max, m)
    at = tl.where(gt, off, at)
    m_c = _clamp(m_new)
    t_sum = tl.sum(tl.sum(_exp_below(x, m_c[None, :, None]), 2), 0)
    s = tl.fma(s, _exp_below(_clamp(m), m_c), t_sum)
    return m_new, s, at


@triton.jit
def _thread_chunk(x_row, tile, start, stop, full_stop, ROWS: tl.constexpr, LANES: tl.constexpr,
                  VEC: tl.constexpr, STAGES: tl.constexpr, CACHE: tl.constexpr,
                  EVICT: tl.constexpr):
    """(M, S, first index of M) of the chunk with per-thread state (index mode 3, k = 1), over
    the kernel's ROWS x LANES ``tile`` offsets. The index: the tile where each thread's max last
    rose, re-read after the loop by the threads that hold M (as mode 2)."""
    m = tl.full([LANES // VEC], float("-inf"), tl.float32)
    s = tl.zeros([LANES // VEC], tl.float32)
    at = tl.zeros([LANES // VEC], tl.int32) + start
    if STAGES > 0:
        for off in tl.range(start, full_stop, ROWS * LANES, num_stages=STAGES):
            x = _load_tile(x_row, off + tile, stop, False, CACHE, EVICT)
            m, s, at = _fold_thread(x, off, m, s, at, ROWS, LANES, VEC)
    else:
        for off in range(start, full_stop, ROWS * LANES):
            x = _load_tile(x_row, off + tile, stop, False, CACHE, EVICT)
            m, s, at = _fold_thread(x, off, m, s, at, ROWS, LANES, VEC)
    if full_stop < stop:
        x = _load_tile(x_row, full_stop + tile, stop, True, CACHE, EVICT)
        m, s, at = _fold_thread(x, full_stop, m, s, at, ROWS, LANES, VEC)
    M = tl.max(m, 0)
    # The re-read is issued before the sum's reduction, so its round trip overlaps it.
    offs = at[None, :, None] + tl.reshape(tile, (ROWS, LANES // VEC, VEC))
    xr = tl.load(x_row + offs, mask=(m == M)[None, :, None] & (offs < stop), other=float("nan"))
    S = tl.sum(s * _exp_below(_clamp(m), _clamp(M)), 0)
    top = tl.min(tl.min(tl.min(tl.where(xr.to(tl.float32) == M, offs, BIG_INDEX), 2), 0), 0)
    top = tl.where(top == BIG_INDEX, start, top)   # an all-NaN chunk: any valid index
    return M, S, top


@triton.jit
def _load_tile(x_row, offs, stop, MASKED: tl.constexpr, CACHE: tl.constexpr,
               EVICT: tl.constexpr):
    """One tile of logits; past ``stop`` (MASKED) -inf. ``CACHE`` / ``EVICT`` are tl.load's cache
    modifier and eviction policy for the streaming loads of the main loop ("": Triton's default,
    the v6 load)."""
    if MASKED:
        return tl.load(x_row + offs, mask=offs < stop, other=float("-inf"), cache_modifier=CACHE,
                       eviction_policy=EVICT)
    else:
        return tl.load(x_row + offs, cache_modifier=CACHE, eviction_policy=EVICT)


@triton.jit
def _merge_tile(x_row, off, stop, tile, rank, list_v, list_j, worst_v, worst_j,
                MASKED: tl.constexpr, K: tl.constexpr):
    """Merge one tile into the running top-K list (the fallback of step 2): only when the tile's
    max beats the list's worst entry, one element at a time."""
    offs = off + tile
    x = _load_tile(x_row, offs, stop, MASKED, "", "").to(tl.float32)
    key = tl.where(x == x, x, float("-inf"))   # NaN rows: p is NaN whatever is listed
    if MASKED:
        key_j = tl.where(offs < stop, offs, BIG_INDEX)
    else:
        key_j = offs
    tile_v = tl.max(key)
    if (tile_v > worst_v) | (worst_j == BIG_INDEX):
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
    return list_v, list_j, worst_v, worst_j


@triton.jit
def _chunk_topk(x_row, start, stop, m, lane, LANES: tl.constexpr,
                K: tl.constexpr, K_PAD: tl.constexpr, CAP: tl.constexpr,
                NCOL_PAD: tl.constexpr):
    """The top-K (value, index) of the chunk, unsorted (step 2 of the plan), from its lane maxima.

    t = the K-th largest lane max (with repeats). Every element of the top K is >= t, and an
    element of a lane whose max is < t is below K lane maxima, so the top K lie in the lanes with
    m >= t. When there are at most CAP of them, their columns (every LANES-th logit from the
    lane) are read back, a few KB, and the top K taken from those; otherwise (many lanes tie at
    t, or fewer than K finite lanes) the chunk is read again and merged tile by tile."""
    # The CAP largest lane maxima, in (value desc, lane asc) order; t is the K-th of them.
    c = tl.arange(0, CAP)
    which = tl.full([CAP], LANES, tl.int32)
    taken = lane < 0
    t = tl.full([], float("inf"), tl.float32)
    for r in tl.static_range(CAP):
        v_r = tl.max(tl.where(taken, float("-inf"), m), 0)
        lane_r = tl.min(tl.where(~taken & (m == v_r), lane, LANES), 0)
        taken = taken | (lane == lane_r)
        which = tl.where(c == r, lane_r, which)
        if r == K - 1:
            t = v_r
    if CAP >= K:
        n_sel = tl.sum((m >= t).to(tl.int32), 0)  # > CAP: not all of them were taken above
    else:                                          # a layout that always reads the chunk again
        n_sel = tl.full([], CAP + 1, tl.int32)
    rank = tl.arange(0, K_PAD)
    list_v = tl.full([K_PAD], float("-inf"), tl.float32)
    list_j = tl.full([K_PAD], BIG_INDEX, tl.int32)
    if n_sel <= CAP:
        col = tl.arange(0, NCOL_PAD)
        offs = start + col[None, :] * LANES + which[:, None]
        live = (c[:, None] < n_sel) & (offs < stop)
        got = tl.load(x_row + offs, mask=live, other=float("-inf")).to(tl.float32)
        key = tl.where(got == got, got, float("-inf"))
        key_j = tl.where(live, offs, BIG_INDEX)
        for r in tl.static_range(K):
            best = tl.max(tl.max(key, 1), 0)
            best_j = tl.min(tl.min(tl.where(key == best, key_j, BIG_INDEX), 1), 0)
            list_v = tl.where(rank == r, best, list_v)
            list_j = tl.where(rank == r, best_j, list_j)
            taken_j = key_j == best_j
            key = tl.where(taken_j, float("-inf"), key)
            key_j = tl.where(taken_j, BIG_INDEX, key_j)
    else:
        worst_v = tl.full([], float("-inf"), tl.float32)
        worst_j = tl.full([], BIG_INDEX, tl.int32)
        # One row of lanes per step: this path is rare and must not raise the kernel's registers.
        full_stop = start + (stop - start) // LANES * LANES
        for off in range(start, full_stop, LANES):
            list_v, list_j, worst_v, worst_j = _merge_tile(
                x_row, off, stop, lane, rank, list_v, list_j, worst_v, worst_j, False, K)
        if full_stop < stop:
            list_v, list_j, worst_v, worst_j = _merge_tile(
                x_row, full_stop, stop, lane, rank, list_v, list_j, worst_v, worst_j, True, K)
    return list_v, list_j


@triton.jit
def _draft_topk_kernel(x_ptr, stride_row, V, CHUNK, SPLITS, p_ptr, idx_ptr,
                       part_m_ptr, part_s_ptr, part_i_ptr, part_v_ptr, part_j_ptr,
                       count_ptr, ONE_CHUNK: tl.constexpr, S_PAD: tl.constexpr,
                       K: tl.constexpr, K_PAD: tl.constexpr, ROWS: tl.constexpr,
                       LANES: tl.constexpr, FUSED_COMBINE: tl.constexpr,
                       INDEX: tl.constexpr, PREFETCH: tl.constexpr, CAP: tl.constexpr,
                       NCOL_PAD: tl.constexpr, STAGES: tl.constexpr, CACHE: tl.constexpr,
                       EVICT: tl.constexpr, VEC: tl.constexpr):
    """One program: the chunk ``program_id(1)`` of the row ``program_id(0)`` (the plan's steps),
    with v7's load knobs (``KernelConfig.stages`` / ``cache`` / ``evict``): the main loop
    software-pipelined over STAGES tiles, a cache modifier and an eviction policy on its loads.
    With all three off (0, "", "") it compiles to v6's kernel (the same SASS: docs/kernel-notes.md)."""
    row = tl.program_id(0)
    split = tl.program_id(1)
    start = split * CHUNK
    stop = tl.minimum(start + CHUNK, V)
    lane = tl.arange(0, LANES)
    rows = tl.arange(0, ROWS)
    # A tile is ROWS x LANES consecutive logits; LANES is one 16-byte load per thread across the
    # program, so each thread holds whole columns and the reduction over ROWS stays in registers.
    tile = rows[:, None] * LANES + lane[None, :]
    x_row = x_ptr + row.to(tl.int64) * stride_row     # B x stride may pass 2**31

    # Whole tiles load unmasked (no per-element predicates); the ragged end is one masked tile.
    full_stop = start + (stop - start) // (ROWS * LANES) * (ROWS * LANES)
    rank = tl.arange(0, K_PAD)
    if INDEX == 3:                                     # k = 1, per-thread state
        M, S, top = _thread_chunk(x_row, tile, start, stop, full_stop, ROWS, LANES, VEC, STAGES,
                                  CACHE, EVICT)
        list_v = tl.full([K_PAD], float("-inf"), tl.float32)
        list_j = tl.full([K_PAD], BIG_INDEX, tl.int32)
    else:
        m = tl.full([LANES], float("-inf"), tl.float32)
        s = tl.zeros([LANES], tl.float32)
        at = tl.zeros([LANES], tl.int32) + start           # where each lane's max is (INDEX 1, 2)
        if PREFETCH:
            # The next tile is loaded before this one is folded, so a program always has a tile
            # of loads in flight. The last iteration loads the last tile again (an L2 hit), never
            # past it.
            last = tl.maximum(full_stop - ROWS * LANES, start)
            nxt = tl.load(x_row + start + tile, mask=start + tile < full_stop, other=0.0)
            for off in range(start, full_stop, ROWS * LANES):
                x = nxt
                nxt = tl.load(x_row + tl.minimum(off + ROWS * LANES, last) + tile)
                m, s, at = _fold(x, off, rows, m, s, at, ROWS, LANES, INDEX)
        elif STAGES > 0:
            # Triton's software pipeliner: the loads of the next STAGES - 1 tiles are in flight (on
            # Hopper as asynchronous copies into shared memory, no registers) while this one folds.
            for off in tl.range(start, full_stop, ROWS * LANES, num_stages=STAGES):
                x = _load_tile(x_row, off + tile, stop, False, CACHE, EVICT)
                m, s, at = _fold(x, off, rows, m, s, at, ROWS, LANES, INDEX)
        else:
            for off in range(start, full_stop, ROWS * LANES):
                x = _load_tile(x_row, off + tile, stop, False, CACHE, EVICT)
                m, s, at = _fold(x, off, rows, m, s, at, ROWS, LANES, INDEX)
        if full_stop < stop:
            x = _load_tile(x_row, full_stop + tile, stop, True, CACHE, EVICT)
            m, s, at = _fold(x, full_stop, rows, m, s, at, ROWS, LANES, INDEX)

        M = tl.max(m, 0)
        S = tl.sum(s * _exp_below(_clamp(m), _clamp(M)), 0)
        if K == 1:
            if INDEX == 2:
                # The row of each candidate lane's max: one re-read of its column in the tile at
                # `at`.
                cand = m == M
                r_first = tl.full([LANES], ROWS, tl.int32)
                for r in tl.static_range(ROWS - 1, -1, -1):      # the first row that holds m wins
                    offs = at + r * LANES + lane
                    xr = tl.load(x_row + offs, mask=cand & (offs < stop), other=float("nan"))
                    r_first = tl.where(xr.to(tl.float32) == m, r, r_first)
                top = tl.min(tl.where(cand & (r_first < ROWS), at + r_first * LANES + lane,
                                      BIG_INDEX), 0)
                top = tl.where(top == BIG_INDEX, start, top)   # an all-NaN chunk: any valid index
            else:
                top = tl.min(tl.where(m == M, at + lane, BIG_INDEX), 0)
            list_v = tl.full([K_PAD], float("-inf"), tl.float32)
            list_j = tl.full([K_PAD], BIG_INDEX, tl.int32)
        else:
            top = start
            list_v, list_j = _chunk_topk(x_row, start, stop, m, lane, LANES, K, K_PAD, CAP,
                                         NCOL_PAD)
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
    more), or a second launch (``separate``). ``index`` is how k = 1 finds the row of a lane's
    max (1: in the loop, 2: one re-read after it); ``prefetch`` loads the next tile before
    folding this one; ``cap`` is how many lanes k > 1 reads back before it falls back to a
    second pass (1: always the second pass); ``maxnreg`` caps the registers per thread.
    v7's load knobs, all off by default (then the kernel is v6's): ``stages`` > 1 lets Triton
    software-pipeline the main loop over that many tiles (``tl.range(num_stages=...)``; on
    Hopper asynchronous copies into (stages - 1) tiles of shared memory), ``cache`` and
    ``evict`` are tl.load's cache modifier (".cg": not in L1) and eviction policy
    ("evict_first") on the main loop's loads."""

    rows: int
    lanes: int
    num_warps: int
    splits: int
    chunk: int
    combine: str = "fused"
    index: int = 1
    prefetch: bool = True
    cap: int = 8
    maxnreg: int | None = None
    stages: int = 0
    cache: str = ""
    evict: str = ""

    @property
    def block(self) -> int:
        return self.rows * self.lanes

    @property
    def ncol_pad(self) -> int:
        """Columns of one lane in a chunk, to a power of two (the read-back of k > 1)."""
        return triton.next_power_of_2(triton.cdiv(self.chunk, self.lanes))


# Chosen from the sweep in docs/kernel-notes.md (equiv/ops/draft_topk/kernels/tune.py).
GPU_WARPS = 4
GPU_ROWS = 4
GPU_PREFETCH = False
REREAD_TILES = 16                # index 2 (re-read) for programs of at least this many tiles
MAX_NCOL = 512                   # a k > 1 chunk spans at most this many rows of lanes
# Registers per thread of the uncapped kernels, keyed by (element size, index mode; 0 is k > 1):
# the input of the split policy where no cap is set (64K registers / (registers x 128 threads)
# programs fit on an SM at once). These are the local ptxas's figures that the timed layouts of
# GPU run 2 were computed from; the GPU's Triton 3.6 gave fewer for bf16 (72 / 56 / 72) and 124
# for fp32 k = 8 (docs/kernel-notes.md, v6). The cap (ptx .maxnreg) fits 1024 bf16 rows in one
# wave; run 2 saw no spills under it for k = 1, and 236 B at fp32 k = 8 under 56, so k > 1 in
# fp32 runs uncapped and in bf16 only takes the cap when the batch overfills an uncapped wave.
# Index mode 3 (per-thread state, v8): Triton 3.6 for sm_90, split and pipelined: 48 (fp32) and
# 56 (bf16) registers, no spills, uncapped.
REGS = {(4, 1): 48, (4, 2): 40, (4, 0): 56, (2, 1): 80, (2, 2): 72, (2, 0): 80,
        (4, 3): 48, (2, 3): 56}
MAXNREG = {(4, 1): None, (4, 2): None, (4, 0): None, (2, 1): 64, (2, 2): 64, (2, 0): 64,
           (4, 3): None, (2, 3): None}
# Small batches, k = 1, where GPU run 2 timed a layout faster than the wave-filling default by
# more than its default-to-default spread: (largest batch, layout). fp32 B <= 8: 8 warps
# (16 KB tiles, 32 programs a row instead of 64): 3.92 -> 3.73 us, 5.21 -> 4.92 us (run 3 of v3
# saw the same with rows 8); bf16 B <= 64: 6 programs per SM in the split (11 programs a row
# instead of 16 at B = 64): 9.74 -> 9.41 us; unchanged at B = 1, 8 (the split is the tile count).
SMALL_BATCH = {4: (8, {"num_warps": 8}), 2: (64, {"programs_per_sm": 6})}
# k = 1 loops pipelined over PIPELINED_STAGES tiles from this batch size on (element size ->
# batch): GPU run 3 (docs/kernel-notes.md, v7), bf16 B = 1024 67.70 against 70.75 / 70.73 us,
# B = 256 24.03 against 24.65 / 24.61; slower at B = 64 (9.67 against 9.55); fp32 no gain
PIPELINED = {2: 256}
PIPELINED_STAGES = 2
# k = 1 from this batch size on (element size -> batch): index mode 3, per-thread state, and,
# while a wave holds the batch, one wide program a row (WIDE; ptxas gives it WIDE_REGS), which
# ends without a combine. GPU run 5 (docs/kernel-notes.md, v8), one wide program a row at B = 256:
# bf16 21.61 against 24.06 / 23.54 us (the read-sum 20.39), fp32 34.94 against 36.73 / 35.62; mode
# 3 at B = 1024 (one program a row already): bf16 66.78 / 66.78 against 67.42 / 67.41, fp32
# 120.91 / 120.90 against 121.53 / 121.74. Slower at B <= 64 (the re-read after the loop).
THREAD_STATE = {2: 256, 4: 256}
# Timed and left out (docs/kernel-notes.md, v8, runs 6-8): the ragged tile loaded before the loop,
# bf16 read as int32 pairs, a tile of 2 rows, index modes 1 and 2, the load knobs.
WIDE = {"splits": 1, "num_warps": 8, "stages": 3}
WIDE_REGS = 64
# The interpreter runs programs one after another and each tile op costs ~10 us of Python:
# wide tiles, few programs (still several per row when B is small, so CI exercises the combine).
INTERP_LANES = 4096
INTERP_ROWS = 8
INTERP_PROGRAMS = 4

SHARED_PER_SM = 228 * 1024
_SM_COUNT: dict = {}


def _sm_count(device) -> int:
    if device not in _SM_COUNT:
        _SM_COUNT[device] = torch.cuda.get_device_properties(device).multi_processor_count
    return _SM_COUNT[device]


def resident_per_sm(regs: int, num_warps: int, shared: int = 0) -> int:
    """Programs of ``num_warps`` warps that fit on one SM by registers (allocated by 8) and, for
    ``shared`` bytes of shared memory per program, by the 228 KiB of an sm_90 SM (1 KiB of it
    reserved per program)."""
    fit = 65536 // (-(-regs // 8) * 8 * 32 * num_warps)
    if shared:
        fit = min(fit, SHARED_PER_SM // (shared + 1024))
    return max(1, fit)


def split_rows(batch: int, slots: int) -> int:
    """Programs per row: as many as keep B x splits within one wave of ``slots`` programs (a
    second, ragged wave would run its rows at the latency of a few programs, not at the
    bandwidth of all); a batch larger than a wave is cut into about four waves."""
    if batch <= slots:
        return max(1, slots // batch)
    return triton.cdiv(4 * slots, batch) if batch < 4 * slots else 1


def choose_config(batch: int, vocab: int, elem_size: int, device, k: int = 1, *, block=None,
                  rows=None, splits=None, num_warps=None, combine="fused",
                  programs_per_sm=None, index=None, prefetch=None, cap=None,
                  maxnreg="default", stages=None, cache="", evict="") -> KernelConfig:
    """One wave of programs over the machine (``split_rows``): the programs that fit on an SM
    (``resident_per_sm``, or ``programs_per_sm``) x its SMs, or ``INTERP_PROGRAMS`` under the
    interpreter. k = 1 finds the row of its max in the loop (index 1) in short programs and by
    one re-read after it (index 2) in programs of ``REREAD_TILES`` tiles or more, where the
    loop's instructions cost more than the re-read's latency. On a GPU, from ``THREAD_STATE``'s
    batch on, k = 1 keeps per-thread state (index 3) and, while one wave of ``WIDE`` programs
    holds the batch, runs one wide pipelined program a row (no combine). ``block``, ``rows`` or
    ``index`` given leave the index mode to the caller; ``splits``, ``num_warps``, ``stages``
    or ``prefetch`` given leave out ``WIDE``.

    ``block`` (a power of two) fixes the tile size, ``rows`` its height; by default a tile is
    ``GPU_ROWS`` rows of one 16-byte load per thread. ``maxnreg`` None lifts the register cap;
    ``cap`` is the lanes k > 1 may read back (default 8, 16 for k > 4). ``stages``, ``cache``
    and ``evict`` are the load knobs of ``KernelConfig``; the shared memory of a pipelined loop,
    (stages - 1) tiles, counts in the programs that fit on an SM. ``stages`` None: ``PIPELINED``
    (k = 1 from a batch size on, per element size), else 0."""
    interpreted = INTERPRETED or torch.device(device).type != "cuda"
    least = THREAD_STATE.get(elem_size)
    if (k == 1 and not interpreted and block is None and rows is None and index is None
            and least is not None and batch >= least):
        index = 3
        wide_shared = (WIDE["stages"] - 1) * GPU_ROWS * WIDE["num_warps"] * 32 * 16
        wide_slots = (resident_per_sm(WIDE_REGS, WIDE["num_warps"], wide_shared)
                      * _sm_count(torch.device(device)))
        if (splits is None and num_warps is None and stages is None and not prefetch
                and batch <= wide_slots):
            splits, num_warps, stages = WIDE["splits"], WIDE["num_warps"], WIDE["stages"]
    if stages is None:
        least = PIPELINED.get(elem_size)
        stages = (PIPELINED_STAGES if k == 1 and not interpreted and least is not None and batch >= least
                  and block is None and rows is None and not prefetch else 0)
    if k == 1 and not interpreted and block is None and rows is None:
        most, small = SMALL_BATCH.get(elem_size, (0, {}))
        if batch <= most:
            num_warps = num_warps or small.get("num_warps")
            programs_per_sm = programs_per_sm or small.get("programs_per_sm")
    num_warps = num_warps or GPU_WARPS
    lanes = INTERP_LANES if interpreted else num_warps * 32 * (16 // elem_size)
    if block is not None:
        rows = rows or max(1, block // lanes)
        lanes = block // rows
    rows = rows or (INTERP_ROWS if interpreted else GPU_ROWS)
    block = rows * lanes
    tiles = triton.cdiv(vocab, block)
    shared = (stages - 1) * block * elem_size if stages > 1 else 0

    def layout(mode):
        cap_regs = MAXNREG.get((elem_size, mode)) if maxnreg == "default" else maxnreg
        if (maxnreg == "default" and mode == 0 and not interpreted and cap_regs
                and batch <= resident_per_sm(REGS[(elem_size, 0)], num_warps)
                * _sm_count(torch.device(device))):
            cap_regs = None      # k > 1: the cap only where an uncapped wave cannot hold the batch
        if interpreted:
            slots = INTERP_PROGRAMS
        else:
            per_sm = programs_per_sm or resident_per_sm(cap_regs or REGS.get((elem_size, mode), 128),
                                                        num_warps, shared)
            slots = per_sm * _sm_count(torch.device(device))
        n = splits if splits is not None else split_rows(batch, slots)
        if splits is None and k > 1:              # bound the read-back of a chunk's lanes
            n = max(n, triton.cdiv(vocab, MAX_NCOL * lanes))
        return max(1, min(n, tiles)), cap_regs

    mode = 0 if k > 1 else (index or 2)
    n_split, cap_regs = layout(mode)
    if k == 1 and index is None and triton.cdiv(tiles, n_split) < REREAD_TILES:
        mode = 1
        n_split, cap_regs = layout(mode)
    chunk = triton.cdiv(tiles, n_split) * block
    n_split = triton.cdiv(vocab, chunk)           # no program may start past V
    if cap is None:
        cap = 8 if k <= 4 else 16
    prefetch = GPU_PREFETCH if prefetch is None else bool(prefetch)
    problem = None
    if index not in (None, 1, 2, 3):
        problem = f"index={index} is invalid: give 1 or 2 (per-lane state) or 3 (per-thread state)"
    elif cap < 1 or cap & (cap - 1):
        problem = f"cap={cap} is invalid: give a power of two (1 forces the second pass)"
    elif stages < 0 or (stages and prefetch):
        problem = f"stages={stages} is invalid: give 0 (no pipelining) or > 0 without prefetch"
    if problem:
        raise InvalidArgument(problem)
    return KernelConfig(rows, lanes, num_warps, n_split, chunk, combine, max(mode, 1), prefetch,
                        cap, cap_regs, stages, cache, evict)


_COUNTERS: dict = {}
REGS_SEEN: dict = {}


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
    compiled = _draft_topk_kernel[(batch, config.splits)](
        logits, logits.stride(0), vocab, config.chunk, config.splits, topk_p, topk_index,
        part_m, part_s, part_i, part_v, part_j, count,
        ONE_CHUNK=config.splits == 1, S_PAD=s_pad, K=k, K_PAD=k_pad, ROWS=config.rows,
        LANES=config.lanes, FUSED_COMBINE=fused, INDEX=config.index if k == 1 else 0,
        PREFETCH=config.prefetch, CAP=max(config.cap, 1), NCOL_PAD=config.ncol_pad if k > 1 else 1,
        # No fp fusion, as since v4: from v6 on no product feeds an add in the loop, so it
        # should change nothing there (kept; not timed without it).
        STAGES=config.stages, CACHE=config.cache, EVICT=config.evict,
        VEC=max(1, min(16 // logits.element_size(), config.lanes)),
        num_warps=config.num_warps, enable_fp_fusion=False,
        **({"maxnreg": config.maxnreg} if config.maxnreg and not INTERPRETED else {}))
    if getattr(compiled, "n_regs", None) is not None:   # what ptxas gave, for the sweep's report
        REGS_SEEN[(logits.element_size(), k, config)] = (compiled.n_regs, compiled.n_spills,
                                                          compiled.metadata.shared)
    if config.splits > 1 and not fused:
        _combine_kernel[(batch,)](config.splits, part_m, part_s, part_i, part_v, part_j, topk_p,
                                  topk_index, S_PAD=s_pad, K=k, K_PAD=k_pad, num_warps=4,
                                  enable_fp_fusion=False)
    return topk_p, topk_index
