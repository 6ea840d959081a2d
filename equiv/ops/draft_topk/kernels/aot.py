"""Compile the fused kernel for Hopper without a GPU, and read what it became.

Plan: ``triton.compile`` with ``GPUTarget("cuda", 90, 32)`` and the attributes the launcher
specialises on (pointers and row strides divisible by 16), then the ``cuobjdump`` that Triton
ships reads the cubin: registers per thread, spills, and the main loop (the longest backward
branch in the SASS): its instruction count, special-function ops (MUFU) and loads. That answers
"how many programs fit on an SM" and "how many instructions per element" at no device time;
docs/kernel-notes.md quotes it. ``python -m equiv.ops.draft_topk.kernels.aot`` prints one line per layout.

It needs Triton with its NVIDIA backend (the CUDA toolchain comes with the wheel), not a GPU;
without one, ``compile_layout`` raises whatever Triton raises.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from equiv.ops.draft_topk.kernels import fused_softmax_topk as fk

POINTERS = ("x_ptr", "p_ptr", "idx_ptr", "part_m_ptr", "part_s_ptr", "part_i_ptr", "part_v_ptr",
            "part_j_ptr", "count_ptr")
DTYPES = {"float32": "*fp32", "bfloat16": "*bf16", "float16": "*fp16"}
LAST_SASS = [""]                                 # the SASS of the last layout compiled


@dataclass(frozen=True)
class Compiled:
    """One layout compiled for sm_90: ``regs`` per thread, ``spill_bytes`` (local memory),
    ``loop_instructions`` in the main loop, its ``loop_mufu`` and ``loop_loads``, the
    ``elements`` each thread folds per iteration and ``loop_local``, its spill loads/stores."""

    dtype: str
    k: int
    rows: int
    num_warps: int
    index: int
    prefetch: bool
    regs: int
    spill_bytes: int
    loop_instructions: int
    loop_mufu: int
    loop_loads: int
    elements: int
    loop_local: int = 0     # LDL/STL in the loop: spill traffic on every iteration

    @property
    def per_element(self) -> float:
        return self.loop_instructions / max(self.elements, 1)

    def resident_per_sm(self, regs_per_sm: int = 65536) -> int:
        """Programs that fit on one SM by registers (allocated in units of 8 per thread)."""
        per_thread = -(-self.regs // 8) * 8
        return regs_per_sm // (per_thread * 32 * self.num_warps)

    def to_json(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        return (f"{self.dtype:8} k={self.k} rows={self.rows} warps={self.num_warps} "
                f"index={self.index} prefetch={int(self.prefetch)}: {self.regs} regs "
                f"({self.resident_per_sm()}/SM), spills {self.spill_bytes} B, loop "
                f"{self.loop_instructions} instr / {self.elements} elements = "
                f"{self.per_element:.1f}, MUFU {self.loop_mufu}, LDG {self.loop_loads}, "
                f"LDL/STL {self.loop_local}")


def _cuobjdump() -> str:
    path = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    if not os.path.exists(path):
        raise FileNotFoundError(f"cuobjdump not found at {path}: this Triton has no NVIDIA backend")
    return path


def main_loop(sass: str) -> list[str]:
    """The instructions of the longest loop: from a backward branch's target to the branch."""
    lines = [ln.strip() for ln in sass.splitlines() if re.match(r"\s*/\*[0-9a-f]{4,}\*/", ln)]
    addr = [int(re.match(r"/\*([0-9a-f]+)\*/", ln).group(1), 16) for ln in lines]
    best = []
    for i, ln in enumerate(lines):
        hit = re.search(r"\bBRA\s+(?:`\()?\.?L?_?x?_?(0x[0-9a-f]+)", ln)
        if hit and int(hit.group(1), 16) < addr[i]:
            target = int(hit.group(1), 16)
            j = addr.index(target) if target in addr else 0
            if i - j > len(best):
                best = lines[j:i + 1]
    return best


def compile_layout(dtype: str = "bfloat16", k: int = 1, rows: int = 4, num_warps: int = 4,
                   index: int = 1, prefetch: bool = True, one_chunk: bool = True,
                   cap: int = 8, ncol_pad: int = 128, maxnreg: int | None = None,
                   stages: int = 0, cache: str = "", evict: str = "") -> Compiled:
    elem = 4 if dtype == "float32" else 2
    lanes = num_warps * 32 * (16 // elem)
    k_pad = triton.next_power_of_2(k)
    types = dict(zip(POINTERS, [DTYPES[dtype], "*fp32", "*i64", "*fp32", "*fp32", "*i32",
                                "*fp32", "*i32", "*i32"]))
    types.update(stride_row="i32", V="i32", CHUNK="i32", SPLITS="i32")
    consts = dict(ONE_CHUNK=one_chunk, S_PAD=16, K=k, K_PAD=k_pad, ROWS=rows, LANES=lanes,
                  FUSED_COMBINE=not one_chunk, INDEX=index if k == 1 else 0, PREFETCH=prefetch,
                  CAP=cap, NCOL_PAD=ncol_pad if k > 1 else 1, STAGES=stages, CACHE=cache, EVICT=evict,
                  VEC=16 // elem)
    names = list(fk._draft_topk_kernel.arg_names)
    sig = {n: ("constexpr" if n in consts else types[n]) for n in names}
    aligned = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names)
               if n in POINTERS or n in ("stride_row", "CHUNK")}
    compiled = triton.compile(ASTSource(fk._draft_topk_kernel, sig, consts, aligned),
                              target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": num_warps, "enable_fp_fusion": False,
                                       **({"maxnreg": maxnreg} if maxnreg else {})})
    with tempfile.TemporaryDirectory(prefix="equiv-aot-") as tmp:
        cubin = os.path.join(tmp, "k.cubin")
        with open(cubin, "wb") as f:
            f.write(compiled.asm["cubin"])
        tool = _cuobjdump()
        usage = subprocess.run([tool, "-res-usage", cubin], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True,
                              check=True).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    # Spilled registers live in the stack frame (STACK); LOCAL is only for local arrays, so
    # reading LOCAL alone reported 0 for layouts that spill in the loop (v6).
    local = max(int(re.search(r"STACK:(\d+)", usage).group(1)),
                int(re.search(r"LOCAL:(\d+)", usage).group(1)))
    loop = main_loop(sass)
    LAST_SASS[0] = sass
    return Compiled(dtype, k, rows, num_warps, index, prefetch, regs, local, len(loop),
                    sum("MUFU" in ln for ln in loop), sum("LDG" in ln for ln in loop),
                    rows * 16 // elem, sum("LDL" in ln or "STL" in ln for ln in loop))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    for dtype in ("float32", "bfloat16"):
        for k, index, prefetch, rows in ((1, 1, True, 4), (1, 1, False, 4), (1, 2, True, 4),
                                         (1, 1, True, 8), (4, 0, True, 4), (8, 0, True, 4)):
            print(compile_layout(dtype, k, rows, index=index, prefetch=prefetch).line(),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
