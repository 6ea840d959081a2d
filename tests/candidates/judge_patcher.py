"""A candidate that rewrites equiv's judgment inside its own worker, and answers wrong.

At import (in the worker) it makes every MTP record pass and every equivalence test succeed, the
way a kernel module that monkeypatches a shared library would; its answers are the runner-up
token, which changes what greedy decoding emits. Only a verdict made outside its process sees it.
"""
import torch

import equiv.mtp.harness as _harness
import equiv.stats.equivalence as _statistics

_harness.MtpRecord.passed = property(lambda self: True)
_harness.MtpRecord.failed_checks = property(lambda self: ())
_real = _statistics.equivalence_test
_statistics.equivalence_test = lambda *a, **k: _real(a[1], a[1], *a[2:], **k)


def runner_up(logits, k):
    p = torch.softmax(logits.float(), dim=-1)
    values, index = torch.topk(p, 2, dim=-1)
    return values[:, 1:2].contiguous(), index[:, 1:2].contiguous()
