"""One launch each of the fused kernel and the read-sum (plain, and with an exp a logit) in the
fused kernel's wide layout, between cudaProfilerStart and cudaProfilerStop, for Nsight Compute:

    ncu --clock-control none --profile-from-start off [--section ... | --metrics ...] \
        python3 scripts/profile/ncu_kernels.py [B [V [DTYPE]]]

(default bfloat16 [256, 129280]; run from the repository root with PYTHONPATH=.). Each kernel
runs three times first, so the profiled launch is compiled and warm; Nsight Compute flushes the
caches before each profiled kernel by default."""
import sys

import torch

from equiv.ops.draft_topk.kernels.read_sum import read_sum_wide
from equiv.ops.draft_topk.paths.fused_triton import fused_triton

batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
vocab = int(sys.argv[2]) if len(sys.argv) > 2 else 129280
dtype = getattr(torch, sys.argv[3]) if len(sys.argv) > 3 else torch.bfloat16
x = (2 * torch.randn(batch, vocab, device="cuda")).to(dtype)


def launches():
    fused_triton(x, 1)
    read_sum_wide(x)
    read_sum_wide(x, work="exp")


for _ in range(3):
    launches()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStart()
launches()
torch.cuda.synchronize()
torch.cuda.cudart().cudaProfilerStop()
