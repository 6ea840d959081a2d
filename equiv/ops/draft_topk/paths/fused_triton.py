"""The ``fused_triton`` path: softmax probability of the top-k in one Triton kernel.

The kernel lives in ``equiv/ops/draft_topk/kernels/fused_softmax_topk.py``; this module registers the path and
decides where the kernel runs, so that the same kernel is judged on a GPU and in CI:

- a CUDA tensor runs the compiled kernel (float32, bfloat16 or float16 input, float32
  accumulation, any row stride);
- a CPU tensor on a machine with no CUDA device runs the kernel under the Triton interpreter.
  The interpreter is chosen when Triton decorates the kernel, so this module sets
  ``TRITON_INTERPRET=1`` before the kernel module is first imported. Set it yourself before
  anything imports Triton if another import might come first. The interpreter handles float32
  only, so bfloat16 and float16 rows are upcast first, which is exact (both embed in float32);
- a CPU tensor on a machine that has a CUDA device is copied to the GPU, run there, and the
  results are copied back, since the kernels of that process are compiled ones;
- without Triton installed, calling the path raises ``MissingDependency`` saying how to
  install it. Registering the path never imports Triton.

``k`` is 1..8 (``max_k``); the ``Path`` wrapper checks it and handles B = 0.
"""
from __future__ import annotations

import importlib
import os
import sys

import numpy as np
import torch

from equiv.errors import MissingDependency, UsageError
from equiv.ops.draft_topk.paths import Path, register

MAX_K = 8
_KERNELS = "equiv.ops.draft_topk.kernels.fused_softmax_topk"


def _kernels(interpret: bool):
    """The kernel module, importing it (and Triton) on first use."""
    mod = sys.modules.get(_KERNELS)
    if mod is None:
        if interpret and "triton" not in sys.modules:
            os.environ.setdefault("TRITON_INTERPRET", "1")
        try:
            # triton: 0.19 s to import (-X importtime) where installed; a CPU host has none
            import triton  # noqa: F401
        except ImportError as exc:
            raise MissingDependency(
                "path 'fused_triton' needs Triton, which is not installed: pip install triton "
                "(Linux; it comes with CUDA builds of torch); on a machine without a GPU it runs "
                "under the Triton interpreter") from exc

        mod = importlib.import_module(_KERNELS)
    if interpret and not mod.INTERPRETED:
        raise UsageError(
            "path 'fused_triton' got a CPU tensor and no CUDA device is present, but Triton was "
            "imported before without the interpreter: set TRITON_INTERPRET=1 before anything "
            "imports triton")
    return mod


def fused_triton(logits, k: int, **layout):
    """``(topk_p [B, k] float32, topk_index [B, k] int64)`` from one Triton kernel.

    ``layout`` overrides the kernel's own choice (``block``, ``rows``, ``splits``,
    ``num_warps``, ``programs_per_sm``, ``combine`` = ``"fused"`` or ``"separate"``: see
    ``choose_config``); the tests and the tuning sweep use it."""
    if logits.device.type == "cpu" and torch.cuda.is_available():
        topk_p, topk_index = fused_triton(logits.cuda(), k, **layout)
        return topk_p.cpu(), topk_index.cpu()
    kernels = _kernels(interpret=logits.device.type == "cpu")
    config = None
    if layout:
        config = kernels.choose_config(*logits.shape, logits.element_size(), logits.device, k,
                                       **layout)
    if not kernels.INTERPRETED:
        return kernels.draft_topk(logits, k, config)

    if logits.dtype != torch.float32:
        logits = logits.float()                  # exact: bfloat16 and float16 embed in float32
    # The interpreter runs the kernel in NumPy, which warns where the GPU silently gives the
    # intended inf or NaN: x - max overflows to -inf on purpose near -FLT_MAX (a 0 term), and
    # poisoned rows compute inf - inf and 1 / 0.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        return kernels.draft_topk(logits, k, config)


def with_layout(**layout):
    """``fn(logits, k)`` running ``fused_triton`` with a fixed layout (see ``fused_triton``)."""
    def fn(logits, k):
        return fused_triton(logits, k, **layout)

    fn.__name__ = "fused_triton[" + ",".join(f"{n}={v}" for n, v in sorted(layout.items())) + "]"
    return fn


register(Path("fused_triton", fused_triton,
              "one Triton kernel: online max + rescaled sum-exp + running top-k in one read",
              MAX_K, "softmax probability", "float32"))
