"""Candidates that misbehave in the ways a real one can: used by the gate and CLI tests."""
import time

import torch


def raises(logits, k):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def hangs(logits, k):
    time.sleep(3600)


def returns_list_of_floats(logits, k):
    return [1.0] * logits.shape[0], [0] * logits.shape[0]


def returns_numpy(logits, k):
    p = torch.softmax(logits.float(), -1).max(-1, keepdim=True)
    return p.values.numpy(), p.indices.numpy()


def returns_on_cpu(logits, k):
    p, i = torch.softmax(logits.float().cpu(), -1).max(-1, keepdim=True)
    return p, i


def correct(logits, k):
    x = logits.float()
    m, i = x.max(-1, keepdim=True)
    return 1.0 / torch.exp(x - m).sum(-1, keepdim=True), i


NOT_CALLABLE = 3
