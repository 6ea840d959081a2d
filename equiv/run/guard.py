"""The guard bands the inputs sit in, where the candidate is called.

Plan
----
- The inputs cross to the worker as descriptions (``equiv.run.inputs``: a recipe, ``Raw``
  values, ``Seeded``); ``build_inputs`` builds them there. Torch is imported at the top: this
  module runs where the candidate is called (the worker, or in-process for our own paths).
- ``Guarded(t)`` copies each input tensor (or ``equiv.run.table_rows.TableRows``: rows of a
  table, which write themselves into the buffer and compare it with the table after the call)
  into a larger buffer: the rows keep the stride they were built with (a Recipe's ``pad`` makes
  them non-contiguous), the padding of every row, a band after the last row and a band of
  ``LEAD_BYTES`` before the first row hold canary values (large finite numbers, which also win
  an argmax that reads past the row). The leading band gives
  every input a nonzero ``storage_offset()``, as a slice of an engine's larger buffer has: a
  kernel that reads from the storage's base instead of the tensor's first element reads
  canaries. It keeps the data 256-byte aligned, as a fresh allocation is, unless the input was
  built at a storage offset (a Recipe's ``offset``): that offset is kept, so a base that is not
  16-byte aligned reaches the candidate as built. ``Guarded.problem()`` compares the whole
  buffer, bit for bit, with its snapshot (``first_problem``: every guard of a call, one
  synchronisation on a GPU) -- the input as built (the caller holds it and the
  candidate never sees it) and the canaries, not a third copy of the input: ONE rule for
  "modified its input", used everywhere. A rewrite that keeps the value
  (a NaN with another payload, +0 for -0) still fails: the logits buffer is shared with the
  engine's other readers, and a kernel that writes into it is a race whatever it writes. Changed
  elements are reported with their bit patterns in hex.
"""
from __future__ import annotations

import numpy as np
import torch

from equiv.run.same_bytes import bits as _bits, same_bytes
from equiv.run.table_rows import TableRows

GUARD_MIN = 64                                   # canary elements after the last row, at least
LEAD_BYTES = 256                                 # canary bytes before the first row


def _canary(dtype):
    if dtype.is_floating_point:
        return 6e4 if dtype == torch.float16 else 1e4     # finite, and larger than any logit drawn
    if dtype == torch.bool:
        return True
    return -7777                                          # an int that is no token id


class Guarded:
    """One input tensor inside its canary buffer, with a snapshot of the whole buffer."""

    def __init__(self, t, name: str = "input", offset: int | None = None, stride: int | None = None):
        """``offset``: elements between the aligned start and the first row (default: the input's
        own ``storage_offset()``, modulo the alignment), for a caller that draws the offset;
        ``stride``: elements between rows, at least the last dimension (default: as built)."""
        self.name = name
        shape = tuple(t.shape)
        last = shape[-1] if shape else 1
        asked, stride = stride, last
        if t.dim() >= 2 and t.stride(-1) == 1 and t.stride(-2) > last:
            stride = int(t.stride(-2))           # keep the rows as strided as they were built
        if asked is not None and t.dim() >= 2:
            stride = max(int(asked), last)       # a caller's padded rows (equiv.run.calling)
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        self.rows, self.last, self.stride = rows, last, stride
        guard = max(GUARD_MIN, stride)
        aligned = max(1, LEAD_BYTES // t.element_size())
        shift = t.storage_offset() if offset is None else int(offset)
        self.lead = lead = aligned + shift % aligned     # the input's misalignment kept (or drawn)
        # canaries everywhere but the rows' own elements, which the copy writes: one write of each
        # byte (a full buffer first wrote the rows twice, 6.7 s of a 55 s chain gate on the CPU)
        canary = _canary(t.dtype)
        self.buffer = torch.empty((lead + rows * stride + guard,), dtype=t.dtype, device=t.device)
        self.buffer[:lead].fill_(canary)
        self.buffer[lead + rows * stride:].fill_(canary)
        body = self.buffer[lead: lead + rows * stride].view(rows, stride)
        self.tensor = body[:, :last].view(shape)
        if isinstance(t, TableRows) and stride > last:
            t.write_padded(body, canary)         # the rows and their padding in one pass
        else:
            if stride > last:
                body[:, last:].fill_(canary)
            write_input(self.tensor, t)
        # the snapshot is the input as built (the caller's tensor, which the candidate never sees)
        # and the canaries, whose value is known: no third copy of every input, nor its write
        # (2.8 s of a 26 s chain gate on the CPU); ``retake`` makes a whole copy when the caller
        # writes other values into the buffer
        self._built, self._rows, self._canary = t, self.tensor, canary
        self._snapshot = None

    @property
    def snapshot(self):
        """The whole buffer as laid out (or as last retaken), made on first use: a diagnosis reads it."""
        if self._snapshot is None:
            snap = torch.full_like(self.buffer, self._canary)
            end = self.lead + self.rows * self.stride
            rows = snap[self.lead:end].view(self.rows, self.stride)[:, :self.last]
            write_input(rows.view(self._rows.shape), self._built)
            self._snapshot = snap
        return self._snapshot

    def retake(self) -> None:
        """The buffer as it is now is the snapshot (after the caller wrote other values into it)."""
        self._snapshot, self._built = self.buffer.clone(), None

    def _bands(self) -> list:
        end = self.lead + self.rows * self.stride
        bands = [self.buffer[:self.lead], self.buffer[end:]]
        if self.stride > self.last:
            bands.append(self.buffer[self.lead:end].view(self.rows, self.stride)[:, self.last:])
        return bands

    def _want(self):
        return _bits(torch.full((1,), self._canary, dtype=self.buffer.dtype, device=self.buffer.device))

    def _unchanged(self) -> bool:
        if self._built is None:
            return same_bytes(self.buffer, self._snapshot)
        if isinstance(self._built, TableRows):
            if not self._built.equal(self._rows):
                return False
        elif not same_bytes(self._rows, self._built):
            return False
        want = self._want()
        return bool(torch.stack([(_bits(b) == want).all() for b in self._bands()]).all())

    def unchanged_flag(self):
        """``_unchanged`` as a 0-dim bool tensor on the buffer's device, read by nobody yet: no
        synchronisation (``first_problem`` reads every guard's flag of a call at once)."""
        if self._built is None:
            return (_bits(self.buffer) == _bits(self._snapshot)).all()
        want = self._want()
        if isinstance(self._built, TableRows):
            rows = [(_bits(d) == _bits(r)).all() for d, r in self._built.chunks(self._rows)]
        else:
            rows = [(_bits(self._rows) == _bits(self._built)).all()]
        return torch.stack(rows + [(_bits(b) == want).all() for b in self._bands()]).all()

    def problem(self, when: str) -> str | None:
        """None if the buffer is bit-identical to its snapshot, else what changed and where."""
        if self._unchanged():
            return None
        now, was = _bits(self.buffer), _bits(self.snapshot)
        diff = (now != was).nonzero().flatten().cpu()
        n_body = 0
        first_body = first_guard = None
        for pos in diff.tolist():
            row, col = divmod(pos - self.lead, self.stride)
            inside = 0 <= row < self.rows and col < self.last
            n_body += inside
            if inside and first_body is None:
                first_body = (pos, row, col)
            if not inside and first_guard is None:
                first_guard = (pos, row, col)
        parts = []
        if first_body is not None:
            pos, row, col = first_body
            parts.append(f"modified its input {self.name} {when}: {n_body} element(s) changed, first at "
                         f"[{row}, {col}]: {self._show(self.snapshot, pos)} -> {self._show(self.buffer, pos)}")
        n_guard = diff.numel() - n_body
        if first_guard is not None:
            pos, row, col = first_guard
            where = ("before the first row" if row < 0 else "after the last row" if row >= self.rows
                     else f"in the padding of row {row}")
            parts.append(f"wrote past its input {self.name} {when}: {n_guard} canary element(s) changed, "
                         f"first {where} (element {pos - self.lead} from the input's start): "
                         f"{self._show(self.snapshot, pos)} -> {self._show(self.buffer, pos)}")
        return "; ".join(parts)

    @staticmethod
    def _show(buf, pos: int) -> str:
        item = buf[pos:pos + 1]
        bits = int(_bits(item).cpu().item()) & ((1 << (8 * item.element_size())) - 1)
        width = 2 * item.element_size()
        return f"0x{bits:0{width}x} ({item.float().item() if item.dtype.is_floating_point else item.item()})"


def write_input(dest, t) -> None:
    """``dest.copy_(t)``, ``t`` a tensor or ``TableRows``."""
    if isinstance(t, TableRows):
        t.write_into(dest)
    else:
        dest.copy_(t)


def first_problem(guards, when: str) -> str | None:
    """The first of ``guards``' problems (``Guarded.problem(when)``; None entries skipped), or
    None. On a GPU every guard's compare is queued first and read with one synchronisation (one
    per call, not two per input: ~4200 a chain gate); the lines are made only where one changed."""
    live = [g for g in guards if g is not None]
    if not live:
        return None
    devices = {g.buffer.device for g in live}
    if len(devices) == 1 and next(iter(devices)).type == "cuda":
        if bool(torch.stack([g.unchanged_flag() for g in live]).all()):
            return None
    return next((p for p in (g.problem(when) for g in live) if p), None)


def build_inputs(inputs, device) -> list:
    """The tensors ``inputs`` describes, on ``device`` (a tensor, or a tuple of tensors/None)."""
    built = inputs.build(device)
    return list(built) if isinstance(built, (tuple, list)) else [built]
