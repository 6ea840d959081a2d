"""The draft-step paths written in plain torch, as a serving engine's code writes them.

Each takes ``logits [B, V]`` and ``k`` and returns ``(topk_p [B, k], topk_index [B, k] int64)``.
They are the paths judged, so they share nothing with ``reference/``. The registry of their
names that a candidate's name is parsed against is the op's own (``op.BUILTIN_NAMES``, no torch),
so that the gate starts its property suite before anything imports torch.
"""
from __future__ import annotations

import torch


def softmax_topk(logits: torch.Tensor, k: int):
    """Baseline: full-vocab softmax, then ``torch.max`` (k = 1) or ``torch.topk``."""
    probs = torch.softmax(logits, dim=-1)
    if k == 1:
        topk_p, topk_index = torch.max(probs, dim=-1, keepdim=True)
    else:
        topk_p, topk_index = torch.topk(probs, k, dim=-1)
    return topk_p, topk_index


def hardcoded_one(logits: torch.Tensor, k: int):
    """The incident's shortcut: argmax of the logits and a probability of exactly 1.0."""
    topk_index = torch.argmax(logits, dim=-1, keepdim=True)
    topk_p = torch.ones_like(topk_index, dtype=torch.float32)
    return topk_p, topk_index


def identity_top1(logits: torch.Tensor, k: int):
    """The reviewer's identity ``softmax(x)[argmax] = 1 / sum(exp(x - max))``, in float32."""
    x = logits.float()
    m, topk_index = torch.max(x, dim=-1, keepdim=True)
    topk_p = 1.0 / torch.exp(x - m).sum(dim=-1, keepdim=True)
    return topk_p, topk_index
