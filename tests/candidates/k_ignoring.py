"""A top-1 draft path that ignores ``k`` (issue 42, part 5): one column whatever ``k`` it is given.

Correct for what it is (an engine that calls it at k = 1 only), wrong at every larger k: the
draft gate's default k set (1, 2, 4, 8) must say so plainly and name the fix (``--k 1``, or
refuse / declare the k it serves). ``top1_declared`` and ``top1_refuses`` are the same path with
each of those fixes: declaring ``supported_k``, raising ``NotImplementedError`` at k != 1.
"""
import torch


def top1_ignores_k(logits, k):
    p, idx = torch.softmax(logits.float(), -1).max(-1, keepdim=True)
    return p, idx


def top1_declared(logits, k):
    return top1_ignores_k(logits, k)


top1_declared.supported_k = (1,)


def top1_refuses(logits, k):
    if k != 1:
        raise NotImplementedError("top-1 only")
    return top1_ignores_k(logits, k)
