"""Two ways to sum the V exponentials of a row in float32, for the regression rule's claim.

``single_accumulator``: one float32 accumulator adds the terms left to right (``np.add.accumulate``
is sequential): its rounding error grows like (V - 1) u. ``pairwise``: a tree of float32 adds,
error ~log2(V) u. Both return ``1 / sum`` at the argmax (k = 1), as the identity path does.
"""
import numpy as np
import torch


def _top1(logits, total):
    x = logits.float()
    m, i = x.max(dim=-1, keepdim=True)
    return 1.0 / total(torch.exp(x - m)), i


def single_accumulator(logits, k):
    def total(e):
        s = np.add.accumulate(e.cpu().numpy(), axis=-1, dtype=np.float32)[:, -1:]
        return torch.from_numpy(np.ascontiguousarray(s)).to(e.device)
    return _top1(logits, total)


def pairwise(logits, k):
    def total(e):
        while e.shape[-1] > 1:
            if e.shape[-1] % 2:
                e = torch.nn.functional.pad(e, (0, 1))
            e = e[:, 0::2] + e[:, 1::2]
        return e
    return _top1(logits, total)
