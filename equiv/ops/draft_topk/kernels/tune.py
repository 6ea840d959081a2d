"""The variant sweep behind docs/kernel-notes.md: ``python -m equiv.ops.draft_topk.kernels.tune [OUT.json]``
(``--batch`` / ``--vocab`` for other shapes, ``--help``).

Plan: on one GPU, under the timing protocol of ``equiv/ops/draft_topk/bench.py`` (CUDA-graph replays over
buffers that exceed twice the L2, median per call), time for float32 and bfloat16 at
B = 1, 8, 64, 256, 1024, V = 129280 (or the ``--batch`` and ``--vocab`` given):
- the size-matched ceiling: ``torch.sum(dim=-1)`` and the plain Triton read-sum
  (``equiv/ops/draft_topk/kernels/read_sum.py``) of the same buffers in both layouts, and the read-sum's
  diagnostic variants (``read_sums``);
- ``fused_triton`` with the wrapper's defaults (twice, for the run-to-run spread) and with one
  change at a time (v8, GPU runs 6-8: the wide layout's ragged tile, index mode, tile height,
  load knobs and bfloat16 read as int32 pairs, beside read-sums in other layouts; runs 4-5 timed
  mode 3 with its load knobs and one or two wide programs a row, v7 the load knobs, v2-v6 the
  index mode, the register cap, tile height, warps, programs per SM and the combine, see
  docs/kernel-notes.md);
- k = 4 and 8 where a sweep lists them (GPU run 4 did; runs 5-7 time k = 1 only).
Compiling dominates a cold sweep (each layout x split count is a kernel), so ``--warm N`` first
compiles every point in N processes that fill Triton's on-disk cache, then times in this one
(``--warm-only N`` compiles and exits, so the compiling can overlap other work that is not timed).
A variant that fails to compile is reported and left out, in the warm-up as in the timing.
Prints one line per point, the registers (spills, shared memory) of each compiled layout, and
writes every point as JSON.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys

import torch

from equiv.ops.draft_topk.bench import make_buffers, read_ceiling, sized_ceiling, time_path
from equiv.ops.draft_topk.kernels import fused_softmax_topk as fk
from equiv.ops.draft_topk.kernels.fused_softmax_topk import WIDE
from equiv.ops.draft_topk.kernels.read_sum import read_sum, read_sum_wide
from equiv.ops.draft_topk.paths.fused_triton import with_layout

VOCAB = 129280
BATCHES = (1, 8, 64, 256, 1024)
DTYPES = (torch.float32, torch.bfloat16)


def variants():
    """(name, layout, k): the defaults twice, then one change at a time from them. GPU runs 6-15
    timed in the wide layout of B = 256: the ragged tile loaded first (6), index modes 1-2 and
    the load knobs (7), bfloat16 read as int32 pairs (8), the winning tile kept in registers
    (index mode 4, 9), a tile's terms one tile after its max (12), part of the exps on the FMA
    pipe (15); none beat the default and their knobs are gone from the kernel (see
    docs/kernel-notes.md, v8). The sweep keeps the closest runner-up, a tile of 2 rows."""
    wide = {"index": 3, **WIDE}
    return [("default", {}, 1),
            ("wide_r2_ns5", {**wide, "rows": 2, "stages": 5}, 1),
            ("default_again", {}, 1)]


def read_sums():
    """(name, layout) of the read-sum beside the bench's own two (``triton_sum``, split, and
    ``rs_wide``, the fused kernel's wide layout, both timed by ``sized_ceiling``): the split one
    pipelined, so a gap between the fused kernel and
    the read-sum splits into what the layout costs and what the kernel's own work does; in the
    wide layout also with an exp a logit and with the online softmax (no index), so the own
    work splits into the exp, the running max and the index (GPU run 11; run 11 also timed 1
    or 2 tiles in flight in registers instead of the pipeline: slower, and gone)."""
    wide = dict(WIDE)
    return [("rs_wide_exp", {**wide, "work": "exp"}),          # + one exp a logit
            ("rs_wide_softmax", {**wide, "work": "softmax"}),  # + the running max and rescale
            ("rs_wide_r2_ns5", {**wide, "stages": 5, "rows": 2}),
            ("rs_ns3", {"stages": 3})]


def _warm_one(job):
    dtype, batch, names = job
    x = (2.0 * torch.randn(batch, VOCAB, device="cuda")).to(dtype)
    for name, layout, k in variants():
        if names is None or name in names:
            try:
                with_layout(**layout)(x, k)
            except Exception as exc:              # reported again, per point, when timed
                print(f"warm {name}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)

    read_sum(x)
    read_sum_wide(x)
    for _, layout in read_sums():
        read_sum(x, **layout)
    torch.cuda.synchronize()
    return job[:2]


def comma_ints(text: str) -> tuple:
    """``"256,1024"`` -> ``(256, 1024)`` (argparse names this function in its error)."""
    return tuple(int(t) for t in text.split(","))


def warm(processes: int, names=None) -> None:
    """Compile every (variant, dtype, B) once, spread over ``processes`` (Triton's disk cache);
    ``names`` limits it to those variants (``default,k4,k8`` before an ``equiv bench``)."""
    jobs = [(d, b, names) for d in DTYPES for b in BATCHES]
    with mp.get_context("spawn").Pool(processes) as pool:
        for done in pool.imap_unordered(_warm_one, jobs):
            print(f"warm {done}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m equiv.ops.draft_topk.kernels.tune")
    parser.add_argument("--warm", type=int, metavar="N", help="compile in N processes first")
    parser.add_argument("--warm-only", type=int, metavar="N", help="compile in N processes, exit")
    parser.add_argument("--batch", type=comma_ints, default=BATCHES, help="e.g. 256,1024")
    parser.add_argument("--vocab", type=comma_ints, default=(VOCAB,),
                        help="e.g. 64640,129280,258560: how the kernel's extra time over a plain "
                             "read grows with V at a fixed layout (a cost of the loop grows, a "
                             "cost of the program's ends does not)")
    parser.add_argument("out", nargs="?", help="the points as JSON")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.warm or args.warm_only:       # at V = 129280; a V divisible by 16 reuses its kernels
        warm(args.warm or args.warm_only)
        if args.warm_only:                # compile only, e.g. beside the GPU tests
            return 0
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ceiling, how = read_ceiling()
    print(f"ceiling {ceiling:.0f} GB/s ({how}); defaults: rows {fk.GPU_ROWS}, warps {fk.GPU_WARPS}, "
          f"index 1 under {fk.REREAD_TILES} tiles a program, else 2; prefetch {fk.GPU_PREFETCH}; "
          f"maxnreg {fk.MAXNREG}; small batches {fk.SMALL_BATCH}", flush=True)
    points = []
    shapes = ((d, v, b) for d in DTYPES for v in args.vocab for b in args.batch)
    for dtype, vocab, batch in shapes:
        bufs = make_buffers(batch, vocab, dtype, l2)
        nbytes = bufs[0].numel() * bufs[0].element_size()
        sized = sized_ceiling(bufs, str(dtype)[6:], replays=20)
        cells = [f"torch_sum={sized.torch_sum_us:.2f} triton_sum={sized.triton_sum_us:.2f}"]
        point = {"dtype": str(dtype), "batch": batch, "vocab": vocab}
        points.append({**point, "variant": "sized", "k": 1, "us": sized.us,
                       "torch_sum_us": sized.torch_sum_us, "triton_sum_us": sized.triton_sum_us,
                       "wide_sum_us": sized.wide_sum_us})
        cells.append(f"rs_wide={sized.wide_sum_us:.2f}")
        for name, layout in read_sums():
            us = time_path(lambda x, k, layout=layout: read_sum(x, **layout), bufs, 1,
                           replays=20)
            points.append({**point, "variant": name, "k": 1, "us": us,
                           "pct_sized": 100 * sized.us / us})
            cells.append(f"{name}={us:.2f}")
        for name, layout, k in variants():
            try:
                us = time_path(with_layout(**layout), bufs, k, replays=20)
            except Exception as exc:          # one broken variant must not end the sweep
                cells.append(f"{name}=ERROR")
                print(f"{name}: {type(exc).__name__}: {exc}", file=sys.stderr)
                continue
            pct = 100 * nbytes / (us * 1e-6) / 1e9 / ceiling
            points.append({**point, "variant": name, "k": k, "us": us, "pct_ceiling": pct,
                           "pct_sized": 100 * sized.us / us})
            cells.append(f"{name}={us:.2f}")
        print(f"{str(dtype)[6:]:8} B={batch:<5} " + (f"V={vocab} " if vocab != VOCAB else "")
              + " ".join(cells), flush=True)
        del bufs
        torch.cuda.empty_cache()
    regs = {f"{e}B k={k} {c}": list(v) for (e, k, c), v in fk.REGS_SEEN.items()}
    for name, (n_regs, spills, shared) in sorted(
            {f"{e}B k={k} rows={c.rows} w={c.num_warps} idx={c.index} pf={int(c.prefetch)} "
             f"cap={c.cap} maxnreg={c.maxnreg} stages={c.stages} cache={c.cache or '-'} "
             f"evict={c.evict or '-'}": v for (e, k, c), v in fk.REGS_SEEN.items()}.items()):
        print(f"regs {name}: {n_regs} (spills {spills}, shared {shared} B)")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"ceiling_gbps": ceiling, "points": points, "regs": regs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
