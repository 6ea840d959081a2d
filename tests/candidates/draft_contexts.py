"""Draft top-k candidates each wrong in ONE dimension the gate must reach (issue 34), and correct
ones that use the freedoms the contract gives. Used by tests/ops/draft_topk/test_draft_contexts.py and
scripts/draft_hostile_table.py.

Each wrong one is an ordinary bug of a real kernel, right everywhere else:
- ``wrong_under_inference_mode``, ``wrong_under_no_grad``: a "fast path" taken when autograd is
  off, that normalizes over the first 128-wide tile only (the engine's call: inference mode);
- ``wrong_off_main_thread``: a per-thread workspace that only the main thread initialises;
- ``wrong_at_half_tile``: 128-wide tiles whose last one is loaded whole when V % 128 == 64 (Phi-3's
  32064): 64 elements past each row are read; ``skips_half_tile``: that last tile never read;
- ``wrong_past_4096_rows``: a grid capped at 4096 rows that wraps around (row b answers row b - 4096);
- ``stale_ring_8``: outputs are views into a ring of 8 buffers per shape: an output changes 8
  calls later (``stale_ring_3``: 3 calls later, which the per-call re-check of ``equiv.run``
  already sees);
- ``switches_after_100_calls``: a per-shape autotuner that switches to a broken config at call 101;
- ``wrong_at_k_ge_2``: right at k = 1 (a top-1 fast path), a general path that ranks the logits
  but normalizes over the top-k only.
The correct ones: ``correct_reference`` (softmax then topk), ``correct_declares_k`` (declares
``supported_k = (1, 2)``), ``correct_refuses_k8`` (raises NotImplementedError at k = 8).
"""
import threading

import torch


def _right(logits, k):
    p = torch.softmax(logits.float(), -1)
    return p.topk(k, -1)


def _first_tile(logits, k):
    """The bug every "fast path" below shares: the softmax's sum over the first tile only."""
    x = logits.float()
    m = x.max(-1, keepdim=True).values
    e = torch.exp(x - m)
    p = e / e[:, :128].sum(-1, keepdim=True)
    return p.topk(k, -1)


def wrong_under_inference_mode(logits, k):
    if torch.is_inference_mode_enabled():
        return _first_tile(logits, k)
    return _right(logits, k)


def wrong_under_no_grad(logits, k):
    if not torch.is_grad_enabled() and not torch.is_inference_mode_enabled():
        return _first_tile(logits, k)
    return _right(logits, k)


def wrong_off_main_thread(logits, k):
    if threading.current_thread() is not threading.main_thread():
        return _first_tile(logits, k)
    return _right(logits, k)


def wrong_at_half_tile(logits, k):
    v = logits.shape[-1]
    if v % 128 == 64:
        # the last tile is loaded whole: 64 elements past each row (the next row's, the padding,
        # or what follows the last row) join the softmax and may win the max
        rows = torch.as_strided(logits, (logits.shape[0], v + 64), (logits.stride(0), 1))
        p = torch.softmax(rows.float(), -1)
        return p.topk(k, -1)
    return _right(logits, k)


def skips_half_tile(logits, k):
    """The other half-tile bug: when V % 128 == 64 the last (half) tile is never loaded, so the
    last 64 logits are out of the softmax (0.2 % of its mass at V = 32064: only float32's
    tolerance sees it)."""
    v = logits.shape[-1]
    if v % 128 == 64:
        return torch.softmax(logits[:, : v - 64].float(), -1).topk(k, -1)
    return _right(logits, k)


def wrong_past_4096_rows(logits, k):
    p, i = _right(logits, k)
    if logits.shape[0] > 4096:
        p, i = p.clone(), i.clone()
        p[4096:], i[4096:] = p[: logits.shape[0] - 4096].clone(), i[: logits.shape[0] - 4096].clone()
    return p, i


_RING: dict = {}


def _ring(logits, k, size):
    p, i = _right(logits, k)
    key = (tuple(p.shape), p.device.type, size)
    if key not in _RING:
        with torch.inference_mode(False):        # ordinary tensors: usable in every context
            _RING[key] = [[(torch.empty_like(p), torch.empty_like(i)) for _ in range(size)], 0]
    ring = _RING[key]
    slot = ring[0][ring[1] % size]
    ring[1] += 1
    slot[0].copy_(p)
    slot[1].copy_(i)
    return slot


def stale_ring_8(logits, k):
    return _ring(logits, k, 8)


def stale_ring_3(logits, k):
    return _ring(logits, k, 3)


_SEEN: dict = {}


def switches_after_100_calls(logits, k):
    key = (tuple(logits.shape), logits.dtype)
    _SEEN[key] = _SEEN.get(key, 0) + 1
    if _SEEN[key] > 100:
        return _first_tile(logits, k)
    return _right(logits, k)


def wrong_at_k_ge_2(logits, k):
    if k == 1:
        return _right(logits, k)
    x = logits.float()
    top, idx = x.topk(k, -1)
    return torch.softmax(top, -1), idx           # normalized over the top-k only


def correct_reference(logits, k):
    return _right(logits, k)


def correct_declares_k(logits, k):
    return _right(logits, k)


correct_declares_k.supported_k = (1, 2)


def correct_refuses_k8(logits, k):
    if k == 8:
        raise NotImplementedError("k = 8 is not built")
    return _right(logits, k)
