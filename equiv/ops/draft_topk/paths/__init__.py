"""The registry of built-in draft top-k paths.

A path is a callable ``fn(logits, k) -> (topk_p, topk_index)`` plus what a report needs to say
about it: a one-line description, the largest k it supports and what its ``topk_p`` means.
``get_path(name)`` returns the registered ``Path``; calling a ``Path`` validates ``k`` and the
input shape (clear errors for ``k < 1``, ``k > V``, a non-2-D input) and handles ``B = 0``
before handing over to the implementation. ``check_logits`` is the input contract's check for
logits a user hands in (``equiv.compare``, ``assert_equivalent``): a ``[B, V]`` float tensor.
"""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable

import torch

from equiv.errors import InvalidArgument
from equiv.ops.draft_topk.paths import torch_paths
from equiv.validation import check_choice, check_int

LOGITS_DTYPES = ("float32", "bfloat16", "float16")


def check_logits(logits, k=None, name: str = "logits"):
    """``logits`` as a ``[B, V]`` floating tensor (a nested list or an array becomes float32),
    with ``1 <= k <= V`` when ``k`` is given; else one ``InvalidArgument`` saying the fix."""
    if not isinstance(logits, torch.Tensor):
        try:
            logits = torch.as_tensor(logits, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            raise InvalidArgument(f"{name} of type {type(logits).__name__} is invalid: give a [B, V] "
                                  f"torch.Tensor (or build one with equiv.Recipe(...).build(device))") from None
    shape = list(logits.shape)
    if logits.dim() != 2:
        fix = " (one row: logits.unsqueeze(0))" if logits.dim() == 1 else ""
        raise InvalidArgument(f"{name} has shape {shape}: give a [B, V] tensor, one row per draft position{fix}")
    dtype = str(logits.dtype).removeprefix("torch.")
    if dtype not in LOGITS_DTYPES:
        raise InvalidArgument(f"{name} has dtype {dtype}: give {', '.join(LOGITS_DTYPES)} "
                              f"(for example logits.float())")
    if shape[1] == 0:
        raise InvalidArgument(f"{name} has shape {shape}: the vocabulary is empty; give V >= 1")
    if k is not None:
        check_int("k", k, min_value=1, max_value=shape[1])
    return logits


@dataclass(frozen=True)
class Path:
    name: str
    impl: Callable
    description: str
    max_k: int | None            # None: any k <= V
    topk_p_meaning: str
    output_dtype: str            # "float32" or "input"

    def supports_k(self, k: int) -> bool:
        return self.max_k is None or k <= self.max_k

    def __call__(self, logits, k: int = 1):
        k = check_int("k", k, min_value=1)
        if not isinstance(logits, torch.Tensor):
            raise InvalidArgument(f"logits must be a torch.Tensor, got {type(logits).__name__}")
        if logits.dim() != 2:
            raise InvalidArgument(f"logits must be 2-D [B, V], got shape {tuple(logits.shape)}")
        batch, vocab = logits.shape
        if k > vocab:
            raise InvalidArgument(f"k={k} is invalid for V={vocab}: k must be <= V")
        if not self.supports_k(k):
            raise InvalidArgument(
                f"k={k} is not supported by path {self.name!r}: it supports k <= {self.max_k}")
        if batch == 0:
            p_dtype = torch.float32 if self.output_dtype == "float32" else logits.dtype
            return (torch.empty((0, k), dtype=p_dtype, device=logits.device),
                    torch.empty((0, k), dtype=torch.int64, device=logits.device))
        return self.impl(logits, k)

    def to_json(self) -> dict:
        return {"name": self.name, "description": self.description, "max_k": self.max_k,
                "topk_p_meaning": self.topk_p_meaning, "output_dtype": self.output_dtype}


_REGISTRY: dict[str, Path] = {}


def register(path: Path) -> Path:
    _REGISTRY[path.name] = path
    return path


register(Path("softmax_topk", torch_paths.softmax_topk,
              "full-vocab softmax, then torch.max (k = 1) or torch.topk: the baseline",
              None, "softmax probability", "input"))
register(Path("hardcoded_one", torch_paths.hardcoded_one,
              "argmax of the logits with topk_p = 1.0 (skips the softmax)",
              1, "probability of a one-hot (greedy) draft, not the softmax", "float32"))
register(Path("identity_top1", torch_paths.identity_top1,
              "max of the logits and p = 1 / sum(exp(x - max)) in float32 torch",
              1, "softmax probability", "float32"))


def _register_optional() -> None:
    # fused_triton registers itself; it imports Triton lazily, so its absence is a clear error
    # at call time, not a missing name here.
    if importlib.util.find_spec("equiv.ops.draft_topk.paths.fused_triton") is not None:
        importlib.import_module("equiv.ops.draft_topk.paths.fused_triton")


_register_optional()


def path_names() -> list[str]:
    """Names of the built-in paths, baseline first."""
    return list(_REGISTRY)


def get_path(name: str) -> Path:
    return _REGISTRY[check_choice("path", name, _REGISTRY)]
