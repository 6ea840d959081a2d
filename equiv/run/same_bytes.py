"""Whether host tensors hold the same bytes, at the memory's speed: the guard band's compare after
every call (``equiv.run.guard``).

Plan. ``torch.equal`` on the CPU compares element by element at ~8 GB/s (2-core CPU, float32 or
their int32 bits alike); ``memcmp`` reads at ~19 GB/s, and stops at the first byte that differs.
``same_bytes(a, b)``: two tensors of one shape and dtype, ``memcmp`` of the whole where both are
contiguous host tensors, else ``torch.equal`` of ``bits`` (their bit patterns). ``same_rows(rows,
table, index)``: row ``i`` of ``rows`` (``[n, V]``) against row ``index[i]`` of ``table``, a
``memcmp`` a row where rows are long (no gather of the table's rows first), else ``None`` (the
caller compares as it can). Where libc's ``memcmp`` cannot be loaded both fall back to torch.
ctypes lets go of the GIL during each ``memcmp``: the judge's threads run beside it.
"""
from __future__ import annotations

import ctypes

import torch

MIN_ROW_BYTES = 16 << 10                         # shorter rows: one memcmp call a row costs more


def _load_memcmp():
    try:
        fn = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]
    return fn


_MEMCMP = _load_memcmp()


def bits(t):
    """``t``'s bit patterns (an integer view of its elements, ``uint8`` for bool)."""
    size = t.element_size()
    if t.dtype == torch.bool:
        return t.view(torch.uint8)
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size])


def _host(*ts) -> bool:
    return _MEMCMP is not None and all(t.device.type == "cpu" and type(t) is torch.Tensor for t in ts)


def same_bytes(a, b) -> bool:
    """``a`` and ``b`` (one shape and dtype) bit for bit the same (module docstring)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if _host(a, b) and a.is_contiguous() and b.is_contiguous():
        n = a.numel() * a.element_size()
        return n == 0 or _MEMCMP(a.data_ptr(), b.data_ptr(), n) == 0
    return torch.equal(bits(a), bits(b))


def same_rows(rows, table, index):
    """``rows[i]`` bit for bit ``table[index[i]]`` for every ``i`` (``rows`` ``[n, V]``, ``table``
    ``[K, V]`` of its dtype, ``index`` ``[n]``), or None where a row-by-row ``memcmp`` does not
    apply (module docstring)."""
    V = table.shape[1]
    size = V * table.element_size()
    if not (_host(rows, table, index) and size >= MIN_ROW_BYTES and rows.dtype == table.dtype
            and rows.stride(1) == 1 and table.is_contiguous()):
        return None
    at, stride = rows.data_ptr(), rows.stride(0) * rows.element_size()
    base = table.data_ptr()
    for i, k in enumerate(index.tolist()):
        if _MEMCMP(at + i * stride, base + k * size, size):
            return False
    return True
