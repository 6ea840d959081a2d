"""Inputs that cross to the worker: descriptions, never live tensors.

Plan
----
What crosses the process boundary is a *description* of the input, never a live tensor: an
``equiv.Recipe`` (the worker builds the logits itself, bit-identical, on its device), a ``Raw``
array (element-level values, for small or transformed inputs), or any picklable object with
``build(device)`` returning a tensor or a tuple of tensors (the verify operation's triples).
``Seeded(seed)`` crosses as a seed and becomes a ``torch.Generator`` on the worker's device.
In the worker each built input sits in a guard band (``equiv.run.guard``). This module is read
without torch (``equiv.run.Raw`` is named at the top of modules that a gate's start reads); its
methods that need torch import it where they run.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Raw:
    """Element-level input values: ``values`` (float32/float16 NumPy, or uint16 bit patterns of
    bfloat16), the ``dtype`` to build, ``pad`` extra elements per row (non-contiguous rows) and
    ``offset`` elements before the first (the tensor's storage offset, a misaligned base)."""

    values: np.ndarray
    dtype: str = "float32"
    pad: int = 0
    offset: int = 0

    @classmethod
    def of(cls, tensor, pad: int | None = None) -> "Raw":
        """The exact values of a CPU or GPU tensor (its row padding kept unless ``pad`` given)."""
        t = tensor.detach()
        dtype = str(t.dtype).removeprefix("torch.")
        if pad is None:
            pad = int(t.stride(-2) - t.shape[-1]) if t.dim() >= 2 and t.shape[-1] and t.stride(-1) == 1 else 0
            pad = max(pad, 0)
        if t.dtype == torch.bfloat16:
            vals = t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
        else:
            vals = t.contiguous().cpu().numpy()
        return cls(np.array(vals, copy=True), dtype, pad, int(tensor.storage_offset()) % 64)

    def build(self, device="cpu"):
        if self.dtype == "bfloat16":
            t = torch.from_numpy(np.ascontiguousarray(self.values).view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(np.ascontiguousarray(self.values)).to(getattr(torch, self.dtype))
        t = t.to(device)
        if (self.pad or self.offset) and t.dim() == 2:
            stride = t.shape[-1] + self.pad
            buf = torch.zeros((self.offset + t.shape[0] * stride,), dtype=t.dtype, device=device)
            buf[self.offset:].view(t.shape[0], stride)[:, : t.shape[-1]] = t
            t = buf.as_strided(tuple(t.shape), (stride, 1), self.offset)
        elif self.pad and t.dim() >= 2:
            buf = torch.zeros(t.shape[:-1] + (t.shape[-1] + self.pad,), dtype=t.dtype, device=device)
            buf[..., : t.shape[-1]] = t
            t = buf[..., : t.shape[-1]]
        return t


@dataclass(frozen=True)
class Seeded:
    """A ``torch.Generator`` seeded with ``seed``, made on the worker's device (``equiv.run.invoke``)."""

    seed: int
