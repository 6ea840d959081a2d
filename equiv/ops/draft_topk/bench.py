"""Time every path on a GPU, against the device's own read-bandwidth ceiling.

Plan (the protocol of issue 7)
1. Ceiling: the median time of ``torch.sum`` over a 2 GiB float32 tensor of random values,
   measured in the same run; bytes read over that time is the read bandwidth a path can reach.
2. Inputs: for each dtype and batch size, enough distinct ``[B, V]`` buffers of random logits
   (never zeros) that together they exceed twice the L2 cache, and at least two, so every call
   reads its logits from HBM and not from cache.
3. One CUDA graph per (path, dtype, k, B) calls the path once per buffer, back to back. The
   graph is replayed ``replays`` times, each replay timed with CUDA events; the figure is the
   median replay time divided by the number of buffers: per-call time with a cold cache and no
   launch gaps beyond the graph's own.
4. Size-matched ceiling (issue 14): for each (dtype, B), the fastest of ``torch.sum(dim=-1)``
   and a plain Triton read-sum (``equiv/ops/draft_topk/kernels/read_sum.py``) of the same buffers in each of
   the fused kernel's two layouts (rows split over a wave of programs, and one wide program a
   row), timed the same way: the limit at that size with its fixed costs, where the 2 GiB
   figure is out of reach for any kernel.
5. Per path: microseconds, GB/s of logits read (B x V x element size per call: the bytes every
   path must read, whatever else it moves), the percentage of the 2 GiB ceiling and of the
   size-matched one (the size-matched time over the path's time); and the speed-up over
   ``softmax_topk`` at the same point.
Results are frozen dataclasses with ``to_json()``; ``write_json`` and ``write_plot`` write
atomically (a temporary file in the target's folder, then a rename).
"""
from __future__ import annotations

import io
import math
import statistics
from dataclasses import asdict, dataclass, field

import torch

from equiv.atomic import atomic_write, write_json as _write
from equiv.candidate import load_candidate
from equiv.errors import NoDeviceError
from equiv.figures import pyplot
from equiv.ops.draft_topk.paths import get_path, path_names
from equiv.options import DEFAULT_VOCAB

DEFAULT_BATCHES = (1, 8, 64, 256, 1024)
L2_FALLBACK_BYTES = 60 * 2 ** 20


@dataclass(frozen=True)
class BenchRow:
    """One path at one (dtype, k, batch): ``us`` per call, ``gbps`` of logits read,
    ``pct_ceiling`` of the measured read ceiling, ``speedup`` over softmax_topk (None if that
    baseline was not timed), ``buffers`` in the graph and ``replays`` behind the median."""

    path: str
    dtype: str
    k: int
    batch: int
    vocab: int
    us: float
    gbps: float
    pct_ceiling: float
    buffers: int
    replays: int
    speedup: float | None = None
    pct_sized: float | None = None


@dataclass(frozen=True)
class SizedCeiling:
    """The size-matched ceiling at one (dtype, batch): ``torch_sum_us``, ``triton_sum_us`` (the
    read-sum's split layout) and ``wide_sum_us`` (its one-program-a-row layout) per call under
    the bench's protocol; ``us`` is the fastest."""

    dtype: str
    batch: int
    vocab: int
    torch_sum_us: float
    triton_sum_us: float | None
    wide_sum_us: float | None = None

    def _timed(self) -> dict:
        return {n: t for n, t in (("torch", self.torch_sum_us), ("triton", self.triton_sum_us),
                                  ("triton_wide", self.wide_sum_us)) if t is not None}

    @property
    def us(self) -> float:
        return min(self._timed().values())

    @property
    def source(self) -> str:
        timed = self._timed()
        return min(timed, key=timed.get)

    def to_json(self) -> dict:
        return {**asdict(self), "us": self.us, "source": self.source}


@dataclass(frozen=True)
class BenchResult:
    """Every row of one run, with the device and the ceiling they are measured against."""

    device: str
    sm_count: int
    l2_bytes: int
    ceiling_gbps: float
    ceiling_detail: str
    rows: tuple = field(default_factory=tuple)
    sized: tuple = field(default_factory=tuple)

    def to_json(self) -> dict:
        d = asdict(self)
        d["rows"] = [asdict(r) for r in self.rows]
        d["sized"] = [s.to_json() for s in self.sized]
        return d

    def table(self) -> str:
        """A Markdown table, one row per (dtype, k, path, B)."""
        head = (f"{self.device}, {self.sm_count} SMs, L2 {self.l2_bytes / 2 ** 20:.0f} MiB; "
                f"read ceiling {self.ceiling_gbps:.0f} GB/s ({self.ceiling_detail})\n\n"
                "| dtype | k | path | B | µs | GB/s | % of ceiling | % of size-matched "
                "| x vs softmax_topk |\n|---|---|---|---|---|---|---|---|---|\n")
        lines = []
        for r in self.rows:
            speed = f"{r.speedup:.1f}" if r.speedup is not None else "-"
            sized = f"{r.pct_sized:.0f}" if r.pct_sized is not None else "-"
            lines.append(f"| {r.dtype} | {r.k} | {r.path} | {r.batch} | {r.us:.1f} | "
                         f"{r.gbps:.0f} | {r.pct_ceiling:.0f} | {sized} | {speed} |")
        table = head + "\n".join(lines)
        if self.sized:
            table += ("\n\nSize-matched ceiling (the fastest of torch.sum(dim=-1) and a plain Triton "
                      "read-sum of the same buffers, rows split or one program a row):\n\n"
                      "| dtype | B | torch.sum µs | read-sum split µs | read-sum a row µs | "
                      "ceiling µs | GB/s | % of ceiling |\n|---|---|---|---|---|---|---|---|\n")
            for s in self.sized:
                nbytes = s.batch * s.vocab * (4 if s.dtype == "float32" else 2)
                gbps = nbytes / (s.us * 1e-6) / 1e9
                tri, wide = (f"{t:.1f}" if t is not None else "-"
                             for t in (s.triton_sum_us, s.wide_sum_us))
                table += (f"| {s.dtype} | {s.batch} | {s.torch_sum_us:.1f} | {tri} | {wide} | "
                          f"{s.us:.1f} | {gbps:.0f} | {100 * gbps / self.ceiling_gbps:.0f} |\n")
        return table.rstrip("\n")


def _require_gpu():
    if not torch.cuda.is_available():
        raise NoDeviceError("equiv bench needs a CUDA GPU and none is visible")


def _median_event_ms(run, replays: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        run()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def read_ceiling(gib: float = 2.0, replays: int = 20) -> tuple[float, str]:
    """(GB/s, how it was measured): the median of ``torch.sum`` over ``gib`` GiB of float32."""
    _require_gpu()
    n = int(gib * 2 ** 30) // 4
    x = torch.randn(n, device="cuda")
    ms = _median_event_ms(lambda: x.sum(), replays)
    del x
    torch.cuda.empty_cache()
    return n * 4 / (ms * 1e-3) / 1e9, f"torch.sum over {gib:g} GiB float32, median of {replays}"


def make_buffers(batch: int, vocab: int, dtype, l2_bytes: int, seed: int = 0) -> list:
    """At least two distinct random ``[batch, vocab]`` buffers, together over twice the L2."""
    per = batch * vocab * torch.empty((), dtype=dtype).element_size()
    count = max(2, math.ceil(2 * l2_bytes / per) + 1)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return [(2.0 * torch.randn(batch, vocab, device="cuda", generator=gen)).to(dtype)
            for _ in range(count)]


def time_path(fn, buffers: list, k: int, replays: int = 30) -> float:
    """Median microseconds per call of ``fn(buffer, k)`` from graph replays over ``buffers``."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):              # compile and warm up on the capture stream
        for x in buffers[:2]:
            fn(x, k)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        outs = [fn(x, k) for x in buffers]
    ms = _median_event_ms(graph.replay, replays)
    del graph, outs
    return ms * 1e3 / len(buffers)


def sized_ceiling(buffers: list, dtype: str, replays: int = 30) -> SizedCeiling:
    """Time ``torch.sum(dim=-1)`` and the plain Triton read-sum in both layouts over ``buffers``
    (step 4)."""
    batch, vocab = buffers[0].shape
    torch_us = time_path(lambda x, k: x.sum(-1), buffers, 1, replays)
    try:
        # Triton (the kernel's import): 0.19 s (-X importtime) where installed; a CPU host has none
        from equiv.ops.draft_topk.kernels.read_sum import read_sum, read_sum_wide
    except ImportError:                          # no Triton: torch.sum alone
        return SizedCeiling(dtype, batch, vocab, torch_us, None)
    triton_us = time_path(lambda x, k: read_sum(x), buffers, 1, replays)
    wide_us = time_path(lambda x, k: read_sum_wide(x), buffers, 1, replays)
    return SizedCeiling(dtype, batch, vocab, torch_us, triton_us, wide_us)


def run_bench(paths=None, dtypes=("float32", "bfloat16"), ks=(1, 4), batches=DEFAULT_BATCHES,
              vocab: int = DEFAULT_VOCAB, replays: int = 30, seed: int = 0,
              progress=None, size_matched: bool = True) -> BenchResult:
    """Time ``paths`` (names or candidate specs; default every built-in) on the GPU."""

    _require_gpu()
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    l2 = int(getattr(props, "L2_cache_size", 0) or L2_FALLBACK_BYTES)
    names = list(paths) if paths else path_names()
    cands = [load_candidate(p) for p in names]
    ceiling, how = read_ceiling()
    rows, sized, done, total = [], [], 0, len(dtypes) * len(batches) * len(ks) * len(cands)
    for dtype in dtypes:
        tdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
        for batch in batches:
            buffers = make_buffers(batch, vocab, tdtype, l2, seed)
            nbytes = batch * vocab * buffers[0].element_size()
            if size_matched:
                sized.append(sized_ceiling(buffers, dtype, replays))
            for k in ks:
                base_us = None
                for cand in cands:
                    done += 1
                    if cand.builtin and not get_path(cand.spec).supports_k(k):
                        continue
                    us = time_path(cand, buffers, k, replays)
                    gbps = nbytes / (us * 1e-6) / 1e9
                    if cand.spec == "softmax_topk":
                        base_us = us
                    rows.append(BenchRow(cand.spec, dtype, k, batch, vocab, us, gbps,
                                         100.0 * gbps / ceiling, len(buffers), replays,
                                         base_us / us if base_us else None,
                                         100.0 * sized[-1].us / us if size_matched else None))
                    if progress:
                        progress(done, total, rows[-1])
            del buffers
            torch.cuda.empty_cache()
    return BenchResult(props.name, props.multi_processor_count, l2, ceiling, how, tuple(rows),
                       tuple(sized))


def write_json(result: BenchResult, path: str) -> None:
    _write(path, result.to_json())


def write_plot(result: BenchResult, path: str) -> None:
    """Time against B per path, log-log, one panel per (dtype, k)."""
    plt = pyplot()
    panels = sorted({(r.dtype, r.k) for r in result.rows})
    names = list(dict.fromkeys(r.path for r in result.rows))
    colour = {n: f"C{i % 10}" for i, n in enumerate(names)}   # one colour per path in every panel
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.5 * max(len(panels), 1), 4),
                             squeeze=False)
    for ax, (dtype, k) in zip(axes[0], panels):
        for name in names:
            pts = [(r.batch, r.us) for r in result.rows if (r.dtype, r.k, r.path) == (dtype, k, name)]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=name, color=colour[name])
        ax.set(xscale="log", yscale="log", xlabel="batch B", ylabel="µs per call",
               title=f"{dtype}, k={k}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"{result.device}: V={result.rows[0].vocab if result.rows else '?'}, "
                 f"read ceiling {result.ceiling_gbps:.0f} GB/s", fontsize=9)
    fig.tight_layout()

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, buf.getvalue(), mode="wb")
