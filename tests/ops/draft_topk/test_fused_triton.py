"""The ``fused_triton`` path judged by ``equiv.ops.draft_topk.compare`` against the float64 reference.

Plan
- Oracle: ``equiv.ops.draft_topk.compare`` (contract, tie sets, value tolerance of the input dtype, poisoning,
  regression against ``softmax_topk``); where the contract leaves latitude (ties: any index of
  an exact tie, one +inf: NaN or the limit) the tests also pin what this kernel promises: the
  lowest index of a tie, NaN for every non-finite row.
- CPU (CI): the kernel under the Triton interpreter, float32, and bfloat16/float16 upcast.
  Each case runs with the default layout and with forced small layouts (narrow tiles, several
  programs per row, the fused and the separate combine), because the default interpreter
  layout is wide and the combine of split rows is where a NaN row turns finite.
- Shapes: k = 1 and k > 1; V at tile edges (1, 2, 33, 1023, 1025, 4097, 8193) and 129280;
  rows sliced from a padded buffer whose padding holds values that win if read; B = 0.
- GPU (marker ``equiv_gpu``, skipped without CUDA): float32/bfloat16/float16 on the device, the
  layouts the wrapper picks for B = 1..1024, and a CUDA-graph capture replayed on new data.
- Without a GPU, the kernel is also compiled ahead of time for sm_90, because the interpreter
  accepts code that the GPU compiler rejects.
Every case is seeded by its recipe; a failure prints the comparison's summary with its REPRO.
"""
import subprocess
import sys

import pytest
import torch

import equiv
from equiv import Recipe, compare
from equiv.ops.draft_topk.paths.fused_triton import with_layout

TILE_EDGES = [1, 2, 33, 1023, 1025, 4097, 8193]
HAS_CUDA = torch.cuda.is_available()
FUSED = equiv.get_path("fused_triton")

# Narrow tiles and several programs per row: ragged last tiles, chunks of pure padding, and
# both ways of combining the partials.
# Index modes: 1 finds the row of a lane's max in the loop, 2 re-reads it after the loop (the
# default for long programs, so forced here); cap=1 sends k > 1 to the second pass that the
# read-back of the lane columns otherwise avoids.
LAYOUTS = {
    "default": FUSED,
    "b256_r4_s3_fused_idx2": with_layout(block=256, rows=4, splits=3, combine="fused", index=2,
                                         prefetch=True),
    "b128_r2_s7_separate_idx1": with_layout(block=128, rows=2, splits=7, combine="separate",
                                            index=1, prefetch=False),
    "b64_one_chunk_cap1": with_layout(block=64, splits=1, cap=1),
    "b512_r4_s5_fused_idx3": with_layout(block=512, rows=4, splits=5, combine="fused", index=3),
    "b512_r4_s3_idx3_ns3": with_layout(block=512, rows=4, splits=3, index=3, stages=3),
}


def check(fn, recipe, k=1, device="cpu"):
    res = compare(fn, recipe.build(device), k=k, recipe=recipe)
    assert res.passed, res.summary()
    return res


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("vocab", TILE_EDGES)
def test_tile_edges(layout, vocab):
    for k in sorted({1, min(2, vocab), min(5, vocab)}):
        check(LAYOUTS[layout], Recipe(seed=vocab + k, batch=3, vocab=vocab, scale=3.0), k)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_k1_tie_a_tile_or_a_row_apart_returns_the_lowest_index(layout):
    # Two equal maxima d apart: for the d that match a layout's lane, row or tile stride, both
    # land in one lane (or thread), in two rows of a tile or in two tiles; the first must win.
    gaps = [1, 7, 8, 64, 128, 256, 512, 1024, 2048, 4096]
    x = torch.randn(len(gaps), 8193, generator=torch.Generator().manual_seed(7))
    for i, d in enumerate(gaps):
        x[i, 37] = x[i, 37 + d] = 9.0
    _, idx = LAYOUTS[layout](x, 1)
    assert idx[:, 0].tolist() == [37] * len(gaps)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_k1_max_in_the_ragged_tile_and_before_it(layout):
    # The ragged last tile is folded after the loop: a max only in it wins; tied with one before
    # it (8192 apart: the same lane or thread), the one before wins.
    x = torch.randn(3, 8500, generator=torch.Generator().manual_seed(11))
    x[0, 100] = x[0, 8292] = 9.0
    x[1, 8400] = 9.0
    x[2, 8499] = x[2, 8450] = 9.0
    _, idx = LAYOUTS[layout](x, 1)
    assert idx[:, 0].tolist() == [100, 8400, 8450]


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@pytest.mark.parametrize("family", ["gaussian", "zipf", "dominant", "near_uniform", "ties_max",
                                    "near_ties", "neginf_pad", "huge", "subnormal",
                                    "bf16_quantized"])
def test_families_full_vocab(family, k):
    check("fused_triton", Recipe(family, seed=k, batch=2, vocab=129280, ties=3), k)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("position", ["first", "last", "tail", "random"])
def test_exact_ties_return_the_lowest_index(layout, position):
    r = Recipe("ties_max", seed=3, batch=3, vocab=4097, ties=4, position=position)
    x = r.build()
    p, idx = LAYOUTS[layout](x, 4)
    tied = [torch.nonzero(row == row.max()).flatten()[:4] for row in x]
    assert idx.tolist() == [t.tolist() for t in tied], f"REPRO: {r}"
    check(LAYOUTS[layout], r, 4)
    _, idx1 = LAYOUTS[layout](x, 1)
    assert idx1[:, 0].tolist() == [t[0].item() for t in tied], f"REPRO: {r}, k = 1"


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("k", [1, 2])
def test_ties_in_one_lane_return_the_lowest_index(layout, k):
    # 8192 apart: the same lane of every tile width used here, so the lane's own update rule
    # decides, not the reduction across lanes.
    x = torch.randn(2, 20000)
    x[:, [5 + 16384, 5, 5 + 8192]] = 10.0
    p, idx = LAYOUTS[layout](x, k)
    assert idx.tolist() == [[5, 5 + 8192][:k]] * 2
    assert torch.allclose(p, torch.softmax(x, -1)[:, [5, 5 + 8192][:k]])


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("k", [1, 3])
def test_strided_rows_never_read_the_padding(layout, k):
    r = Recipe(seed=7, batch=5, vocab=1025, pad=31)
    assert not r.build().is_contiguous()
    check(LAYOUTS[layout], r, k)


def test_column_strided_input_is_copied():
    x = torch.randn(300, 4).t()                  # stride (1, 4): elements are not contiguous
    res = compare("fused_triton", x, k=2)
    assert res.passed, res.summary()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("k", [1, 4])
def test_poisoned_rows_are_nan_and_neighbours_unaffected(layout, k):
    r = Recipe("poison_mix", seed=11, batch=9, vocab=2053, specials=4)
    res = check(LAYOUTS[layout], r, k)
    assert res.check("poisoning").total == 4


def _hand_poisoned(vocab=1100):
    """Rows whose special entries sit in one chunk only of a split row."""
    x = torch.randn(7, vocab)
    x[0, 900] = float("nan")                     # NaN in the last chunk only
    x[1, 5] = float("inf")                       # one +inf
    x[2, 3] = x[2, 1000] = float("inf")          # two +inf in different chunks
    x[3, 10] = x[3, 11] = float("inf")           # two +inf in neighbouring lanes
    x[4] = float("-inf")                         # all -inf
    x[5, 400:] = float("-inf")                   # healthy: whole chunks of -inf padding
    x[6, :] = float("nan")
    return x


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("k", [1, 2, 8])
def test_split_and_combine_keeps_nan(layout, k):
    x = _hand_poisoned()
    fn = LAYOUTS[layout]
    res = compare(fn, x, k=k)
    assert res.passed, res.summary()
    p, idx = fn(x, k)
    for row in (0, 2, 3, 4, 6):                  # the rule leaves no choice here
        assert torch.isnan(p[row]).all(), (row, p[row])
    assert torch.isfinite(p[5]).all() and idx[5].max() < 400
    assert all(len(set(r)) == k for r in idx.tolist()), idx   # distinct even on poisoned rows


FLT_MAX = torch.finfo(torch.float32).max
BF16_MAX = torch.finfo(torch.bfloat16).max      # 3.39e38, exact in float32


def _huge_rows(top):
    """Rows of magnitude ``top`` (up to FLT_MAX): exact ties at the max, values from +top to -top
    (top - (-top) overflows to -inf: a 0 term), near-ties one float32 step apart, a uniform row
    at -top, one top among -inf, and top beside a +inf."""
    g = torch.Generator().manual_seed(0)
    x = top * (2 * torch.rand(6, 1100, generator=g, dtype=torch.float64) - 1)
    x[0, [17, 500, 1099]] = top                  # p = 1/3 each
    x[1] = top * torch.linspace(1, -1, 1100, dtype=torch.float64)
    x[2] = top * (1 - 2 ** -23 * (torch.arange(1100) % 5))
    x[3] = -top                                  # p = 1/1100
    x[4] = float("-inf")
    x[4, 600] = top
    x[5] = top
    x[5, 900] = float("inf")
    return x.float()


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("top", [1e30, FLT_MAX, BF16_MAX])
def test_huge_magnitudes_match_the_reference(layout, k, top):
    # v4/v5 took exp2(fma(x, log2e, -fl(m log2e))): at |m| ~ 1e30 the rounding of the product
    # is ~1e23, so each term was inf or 0 and p wrong or NaN even at V = 1.
    x = _huge_rows(top)
    if top == BF16_MAX:
        x = x.bfloat16()
    res = compare(LAYOUTS[layout], x, k=k)
    assert res.passed, res.summary()
    p, idx = LAYOUTS[layout](x, k)
    assert torch.isfinite(p[:5]).all() and torch.isnan(p[5]).all(), p
    assert idx[:5, 0].tolist() == [17, 0, 0, 0, 600], idx
    assert p[0, 0].item() == pytest.approx(1 / 3, rel=1e-6) and p[4, 0].item() == 1.0


@pytest.mark.parametrize("shift", [1e30, -1e30, 3e38])
def test_shifted_recipes_match_the_reference(shift):
    # The ledger's witness of v4/v5 (gaussian, V = 1, shift 1e30) and its neighbours.
    for vocab in (1, 2, 33, 1025):
        for k in sorted({1, min(4, vocab)}):
            check("fused_triton", Recipe(seed=0, batch=2, vocab=vocab, shift=shift), k)


def test_all_neginf_and_inf_rows_at_any_magnitude():
    x = torch.full((4, 1030), float("-inf"))
    x[1, 3] = float("inf")                       # +inf among -inf
    x[2, 5] = float("inf")
    x[2, 6] = FLT_MAX                            # +inf beside FLT_MAX
    x[3, :] = -FLT_MAX
    x[3, 1029] = float("-inf")
    for fn in LAYOUTS.values():
        p, idx = fn(x, 1)
        assert torch.isnan(p[:3]).all(), p
        assert p[3, 0].item() == pytest.approx(1 / 1029, rel=1e-6)
        assert idx[3, 0] == 0


# v7's load knobs (KernelConfig.stages / cache / evict) change how the main loop's tiles are
# loaded, never what is computed: the same layout with and without each must agree bit for bit.
# The interpreter runs tl.range(num_stages=...) as a plain range, so this pins the loop's
# semantics and the launch of the knob kernel; the pipelining itself is compiled only on a GPU.
LOAD_KNOBS = {"ns2": {"stages": 2}, "ns3_idx2": {"stages": 3, "index": 2}, "ns4": {"stages": 4},
              "cg": {"cache": ".cg"}, "evict_first": {"evict": "evict_first"}}


@pytest.mark.parametrize("knob", LOAD_KNOBS)
@pytest.mark.parametrize("k", [1, 4])
def test_load_knobs_give_the_default_result(knob, k):
    base = {"block": 256, "rows": 4, "splits": 3}
    x = torch.cat([_hand_poisoned(), Recipe(seed=k, batch=3, vocab=1100, scale=3.0).build()])
    want_p, want_i = with_layout(**base)(x, k)
    got_p, got_i = with_layout(**base, **LOAD_KNOBS[knob])(x, k)
    assert torch.equal(got_i, want_i)
    assert torch.equal(got_p.nan_to_num(-1.0), want_p.nan_to_num(-1.0))
    check(with_layout(**base, **LOAD_KNOBS[knob]), Recipe(seed=5, batch=2, vocab=4097), k)


def test_stages_with_prefetch_is_refused():
    with pytest.raises(equiv.InvalidArgument, match="stages"):
        with_layout(stages=3, prefetch=True)(torch.zeros(1, 8), 1)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("k", [1, 4])
def test_half_inputs_upcast_on_cpu(dtype, k):
    r = Recipe("zipf", seed=5, batch=3, vocab=4097, dtype=dtype)
    res = check("fused_triton", r, k)
    assert res.dtype == dtype


def test_output_contract_and_empty_batch():
    f = equiv.get_path("fused_triton")
    p, i = f(torch.randn(2, 50), 3)
    assert p.dtype == torch.float32 and i.dtype == torch.int64 and p.shape == i.shape == (2, 3)
    p, i = f(torch.zeros(0, 50), 8)
    assert p.shape == i.shape == (0, 8) and p.dtype == torch.float32 and i.dtype == torch.int64


@pytest.mark.parametrize("k, vocab, msg", [(0, 10, "k must be >= 1"), (9, 100, "it supports k <= 8"),
                                           (3, 2, "k must be <= V"), (1.5, 10, "must be an integer")])
def test_bad_k(k, vocab, msg):
    with pytest.raises(equiv.InvalidArgument, match=msg):
        equiv.get_path("fused_triton")(torch.zeros(2, vocab), k)


def test_missing_triton_says_how_to_install():
    code = ("import sys; sys.modules['triton'] = None\n"
            "import torch, equiv\n"
            "try:\n"
            "    equiv.get_path('fused_triton')(torch.zeros(1, 4), 1)\n"
            "except equiv.MissingDependency as e:\n"
            "    print('MISSING', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "MISSING" in out.stdout and "pip install triton" in out.stdout, out.stdout + out.stderr


# --------------------------------------------------------------------------------------------- GPU

GPU_LAYOUTS = {"default": FUSED,
               "separate_idx1": with_layout(combine="separate", index=1, prefetch=False),
               "one_chunk_idx2_cap1": with_layout(splits=1, cap=1, maxnreg=None)}


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("layout", GPU_LAYOUTS)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("k", [1, 4, 8])
@pytest.mark.parametrize("batch", [1, 64])
@pytest.mark.parametrize("family", ["gaussian", "poison_mix", "ties_max", "neginf_pad"])
def test_gpu_full_vocab(family, batch, k, dtype, layout):
    r = Recipe(family, seed=batch + k, batch=batch, vocab=129280, dtype=dtype, ties=3,
               pad=16 if family == "gaussian" else 0)
    check(GPU_LAYOUTS[layout], r, k, device="cuda")


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("batch", [256, 1024])
@pytest.mark.parametrize("family", ["gaussian", "poison_mix", "ties_max", "neginf_pad", "huge"])
def test_gpu_large_batch_layouts(family, batch, dtype):
    # the adopted k = 1 layouts from B = 256 on (v8): per-thread state (THREAD_STATE), one wide
    # pipelined program a row while a wave holds the batch (WIDE, B = 256), else the split with
    # bf16 pipelined (PIPELINED, B = 1024). Check they are the ones chosen, then judge them at
    # full vocabulary, padded rows included
    from equiv.ops.draft_topk.kernels import fused_softmax_topk as fk

    elem = 4 if dtype == "float32" else 2
    c = fk.choose_config(batch, 129280, elem, "cuda")
    assert c.index == 3 and batch >= fk.THREAD_STATE[elem]
    if batch == 256:
        assert {n: getattr(c, n) for n in fk.WIDE} == fk.WIDE, c
    else:
        assert c.num_warps == fk.GPU_WARPS and c.stages == (fk.PIPELINED_STAGES if elem == 2 else 0)
    r = Recipe(family, seed=batch, batch=batch, vocab=129280, dtype=dtype, ties=3,
               pad=16 if family == "gaussian" else 0)
    check("fused_triton", r, 1, device="cuda")


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("batch", [1, 256, 1024])
@pytest.mark.parametrize("family", ["gaussian", "poison_mix", "ties_max", "neginf_pad", "huge"])
@pytest.mark.parametrize("layout", ["split", "one_program_w8_ns3", "two_programs_w8_ns4"])
def test_gpu_per_thread_state(layout, family, batch, dtype):
    # index mode 3 (per-thread state, k = 1) compiled, at full vocabulary, padded rows included:
    # with the default split, and one or two wide pipelined programs a row (v8's candidates)
    knobs = {"split": {}, "one_program_w8_ns3": {"splits": 1, "num_warps": 8, "stages": 3},
             "two_programs_w8_ns4": {"splits": 2, "num_warps": 8, "stages": 4}}[layout]
    r = Recipe(family, seed=batch + 3, batch=batch, vocab=129280, dtype=dtype, ties=3,
               pad=16 if family == "gaussian" else 0)
    check(with_layout(index=3, **knobs), r, 1, device="cuda")


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("vocab", TILE_EDGES + [151936])
def test_gpu_tile_edges(vocab, dtype):
    for k in sorted({1, min(4, vocab)}):
        check("fused_triton", Recipe(seed=vocab, batch=300, vocab=vocab, dtype=dtype, pad=5), k,
              device="cuda")


@pytest.mark.equiv_gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("k", [1, 4])
@pytest.mark.parametrize("warm_on_capture_stream", [False, True])
def test_gpu_cuda_graph_capture_and_replay(k, warm_on_capture_stream):
    # Warm on the capture stream: the graph uses that stream's cached counter. Warm elsewhere:
    # the capture allocates a zeroed counter of its own. Both must replay correctly, also
    # between eager calls that use the same counters.
    f = equiv.get_path("fused_triton")
    static = torch.randn(8, 129280, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream if warm_on_capture_stream else torch.cuda.current_stream()):
        f(static, k)                             # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out_p, out_i = f(static, k)
    for seed in range(3):                        # replay on new data: outputs must follow
        r = Recipe("poison_mix" if seed == 2 else "zipf", seed=seed, batch=8, vocab=129280,
                   dtype="bfloat16")
        static.copy_(r.build("cuda"))
        graph.replay()
        torch.cuda.synchronize()
        eager_p, eager_i = f(static, k)
        assert torch.equal(out_i, eager_i), f"REPRO: {r}"
        assert torch.equal(out_p.nan_to_num(-1.0), eager_p.nan_to_num(-1.0)), f"REPRO: {r}"
        res = compare(lambda x, kk: (out_p.clone(), out_i.clone()), static, k=k, recipe=r)
        assert res.passed, res.summary()


AOT_COMPILE = r"""
from triton.compiler.errors import CompilationError
from equiv.ops.draft_topk.kernels.aot import compile_layout
try:
    # (dtype, k, index, prefetch, cap, one_chunk, spill-free under the 64 cap with this ptxas)
    for dtype, k, index, prefetch, cap, one_chunk, clean in (
            ("bfloat16", 1, 1, False, 8, True, False), ("bfloat16", 1, 2, False, 8, False, True),
            ("bfloat16", 1, 2, True, 8, True, False), ("float32", 4, 0, True, 8, False, True),
            ("bfloat16", 8, 0, True, 1, True, False), ("bfloat16", 1, 3, False, 8, False, True),
            ("float32", 1, 3, False, 8, True, True)):
        c = compile_layout(dtype, k, index=index, prefetch=prefetch, cap=cap, one_chunk=one_chunk,
                           maxnreg=64)
        assert c.regs <= 64 and c.loop_instructions > 0 and c.loop_mufu + c.loop_loads > 0, c.line()
        assert c.spill_bytes == 0 or not clean, c.line()
        print(c.line())
    # the wide layout of B >= 256 (WIDE): choose_config counts it at WIDE_REGS registers
    from equiv.ops.draft_topk.kernels.fused_softmax_topk import WIDE, WIDE_REGS
    for dtype in ("bfloat16", "float32"):
        c = compile_layout(dtype, 1, index=3, prefetch=False, one_chunk=True,
                           num_warps=WIDE["num_warps"], stages=WIDE["stages"])
        assert c.spill_bytes == 0 and c.regs <= WIDE_REGS and c.loop_mufu > 0, c.line()
        print(c.line())
except CompilationError as exc:
    print("COMPILE_ERROR", exc)
    raise SystemExit(1)
except (ImportError, FileNotFoundError) as exc:  # no CUDA toolchain in this Triton build
    print("NO_TOOLCHAIN", type(exc).__name__, exc)
    raise SystemExit(0)
print("COMPILED")
"""


def test_kernel_compiles_for_sm90_without_a_gpu():
    # The interpreter accepts code the GPU compiler rejects (v1 used non-constexpr globals, see
    # docs/kernel-notes.md): compile ahead of time for Hopper, in a process without
    # TRITON_INTERPRET so the kernel is a real JITFunction.
    import os

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", AOT_COMPILE], capture_output=True, text=True,
                         timeout=300, env=env)
    if "NO_TOOLCHAIN" in out.stdout:
        pytest.skip(out.stdout.strip())
    assert out.returncode == 0 and "COMPILED" in out.stdout, out.stdout + out.stderr[-3000:]
