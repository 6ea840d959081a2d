"""Hostile and awkward candidates: each one is a way a real kernel (or a test harness's
assumption about it) has gone wrong. Used by tests/test_isolation.py and tests/test_trust.py."""
import ctypes
import os
import re
import sys
import threading
import time

import torch


def _right(logits, k):
    p = torch.softmax(logits.float(), -1)
    v, i = (p.max(-1, keepdim=True) if k == 1 else p.topk(k, -1))
    return v, i


def exits_zero(logits, k):
    sys.exit(0)


def os_exits_zero(logits, k):
    os._exit(0)


def prints_then_exits(logits, k):
    print("about to leave: marker 7f3a", flush=True)
    os._exit(5)


def keyboard_interrupt(logits, k):
    raise KeyboardInterrupt


class _Custom(BaseException):
    pass


def custom_base_exception(logits, k):
    raise _Custom("not an Exception")


def generator_exit(logits, k):
    raise GeneratorExit


def segfaults(logits, k):
    ctypes.string_at(0)


def sleeps(logits, k):
    time.sleep(100)


def spins_in_c(logits, k):
    # catastrophic backtracking: the regex engine runs in C and never releases the GIL
    re.match(r"(a+)+b", "a" * 64)


def edits_input(logits, k):
    logits[0, 0] = logits[0, 0] + 1.0
    return _right(logits, k)


def rewrites_nan(logits, k):
    """Writes a NaN with another payload where the input holds NaN: no value changes."""
    out = _right(logits, k)
    bits = logits.view(torch.int32)
    nan = torch.isnan(logits)
    bits[nan] = 0x7FC00001
    return out


def writes_past_row(logits, k):
    out = _right(logits, k)
    flat = logits.as_strided((1,), (1,), logits.storage_offset() + logits.shape[0] * logits.stride(0))
    flat[0] = 0.0
    return out


def edits_input_later(logits, k):
    out = _right(logits, k)

    def later():
        time.sleep(0.05)
        logits[0, 0] = 123.0

    threading.Thread(target=later, daemon=True).start()
    return out


_STATIC = {}


def static_output_buffer(logits, k):
    v, i = _right(logits, k)
    key = (v.shape, str(v.device))
    if key not in _STATIC:
        _STATIC[key] = (torch.empty_like(v), torch.empty_like(i))
    p_buf, i_buf = _STATIC[key]
    p_buf.copy_(v)
    i_buf.copy_(i)
    return p_buf, i_buf


# -- correct candidates that a careless harness fails ------------------------------------------------

def k1_only(logits, k):
    """A correct k = 1 kernel that refuses any other k (as engines' argmax kernels do)."""
    if k != 1:
        raise NotImplementedError(f"k={k}: this kernel drafts at k = 1 only")
    x = logits.float()
    m, i = x.max(-1, keepdim=True)
    return 1.0 / torch.exp(x - m).sum(-1, keepdim=True), i


def float64_probs(logits, k):
    """Reference-like code: probabilities in float64."""
    p = torch.softmax(logits.double(), -1)
    v, i = (p.max(-1, keepdim=True) if k == 1 else p.topk(k, -1))
    return v, i


def non_contiguous_outputs(logits, k):
    """Correct values in transposed storage (outputs may be non-contiguous)."""
    v, i = _right(logits, k)
    p_buf = torch.zeros(v.shape[0], 2 * k, dtype=v.dtype, device=v.device)
    i_buf = torch.zeros(i.shape[0], 2 * k, dtype=i.dtype, device=i.device)
    p_buf[:, ::2] = v
    i_buf[:, ::2] = i
    return p_buf[:, ::2], i_buf[:, ::2]


# -- found by a red-team pass over the isolated gate -------------------------------------------------

def ignores_storage_offset(logits, k):
    """Reads from the storage's base (as raw-pointer code using storage().data() would): right
    whenever the logits start at offset 0, wrong for any slice of a larger buffer."""
    return _right(torch.as_strided(logits, logits.shape, logits.stride(), 0), k)


def writes_before_row(logits, k):
    """Writes one element just before the first row (a negative-index store)."""
    out = _right(logits, k)
    if logits.storage_offset() > 0:
        logits.as_strided((1,), (1,), logits.storage_offset() - 1)[0] = 0.0
    return out


def approximate_top_k(logits, k):
    """A bucketed top-k (the maximum of each bucket index % 4096, then the top-k of those maxima):
    exact at k = 1, it drops a true top-k entry when two of them share a bucket."""
    p = torch.softmax(logits.float(), -1)
    B, V = p.shape
    nb = min(4096, V)
    pad = (-V) % nb
    if pad:
        p_b = torch.cat([p, torch.full((B, pad), -1.0, device=p.device)], 1)
    else:
        p_b = p
    best, at = p_b.view(B, -1, nb).max(1)
    v, bucket = torch.topk(best, min(k, nb), -1)
    return v, at.gather(1, bucket) * nb + bucket


class _ExitWhenRead(int):
    """An int whose unpickling calls os._exit(0): a process that unpickles it ends with status 0."""

    def __reduce__(self):
        return (os._exit, (0,))


def exits_when_unpickled(logits, k):
    return _ExitWhenRead(0), _ExitWhenRead(0)


class _OwnRecord:
    pass


def returns_own_object(logits, k):
    """An instance of a class of this module: unpickling it elsewhere would import this module."""
    return _OwnRecord(), _OwnRecord()


def returns_list(logits, k):
    """Correct values as a list [topk_p, topk_index] (the contract accepts a tuple or a list)."""
    return list(_right(logits, k))


def returns_topk_result(logits, k):
    """Correct: torch.topk's own named tuple (a tuple subclass), as users write it."""
    return torch.topk(torch.softmax(logits.float(), -1), k, -1)


def int32_index(logits, k):
    """Right values, topk_index in int32 (the contract says int64)."""
    v, i = _right(logits, k)
    return v, i.to(torch.int32)
