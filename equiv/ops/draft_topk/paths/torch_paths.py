"""The draft-step paths written in plain torch, as a serving engine's code writes them.

Each takes ``logits [B, V]`` and ``k`` and returns ``(topk_p [B, k], topk_index [B, k] int64)``.
They are the paths judged, so they share nothing with ``reference/``. Each imports torch when
called: the registry of their names is read when a candidate's name is parsed, before the gate
starts its property suite, and importing torch there cost the suite ~1.6 s of head start on a GPU
host.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def softmax_topk(logits: torch.Tensor, k: int):
    """Baseline: full-vocab softmax, then ``torch.max`` (k = 1) or ``torch.topk``."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    probs = torch.softmax(logits, dim=-1)
    if k == 1:
        topk_p, topk_index = torch.max(probs, dim=-1, keepdim=True)
    else:
        topk_p, topk_index = torch.topk(probs, k, dim=-1)
    return topk_p, topk_index


def hardcoded_one(logits: torch.Tensor, k: int):
    """The incident's shortcut: argmax of the logits and a probability of exactly 1.0."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    topk_index = torch.argmax(logits, dim=-1, keepdim=True)
    topk_p = torch.ones_like(topk_index, dtype=torch.float32)
    return topk_p, topk_index


def identity_top1(logits: torch.Tensor, k: int):
    """The reviewer's identity ``softmax(x)[argmax] = 1 / sum(exp(x - max))``, in float32."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    x = logits.float()
    m, topk_index = torch.max(x, dim=-1, keepdim=True)
    topk_p = 1.0 / torch.exp(x - m).sum(dim=-1, keepdim=True)
    return topk_p, topk_index
