"""An input whose rows are rows of a small table, gathered where they are written.

Plan
----
- Why: an op's ``[B, N, V]`` laws may each be one row of a small bank (16 laws, say) a node.
  Made as a tensor, every call's input was gathered (``table[index]``: torch's indexing kernel,
  element by element on the CPU, 3.5x slower than ``index_select``'s row copies), copied into the
  guard band and compared with the band after the call (``torch.equal``, ~8 GB/s on the CPU):
  ~32 s of a 68 s tree gate on the 2-core CPU (17 s of it the compares).
- ``TableRows(table, index)`` is ``table[index]`` described, not made: ``shape``, ``dtype``,
  ``device`` and slicing along the first dimension, as the callers of a built input use them.
  The guard band (``equiv.run.guard``) asks it to ``write_into`` its buffer (one
  ``index_select`` into the rows where they lie one after another, else a chunk at a time) and,
  after a call, whether the buffer is ``equal`` to it (on the host a ``memcmp`` of each long row
  against its table row, ``equiv.run.same_bytes``; else a chunk at a time). ``chunks(dest)``
  pairs ``dest`` with the same rows gathered, ``CHUNK_BYTES`` at a time into one reused buffer
  (a GPU's compare flags, a padded layout). ``materialize()`` is the tensor, for a caller that
  needs it whole (a sliced layout, a calibration's unguarded calls). On the 2-core CPU, three calls
  on 292 MB of such rows: 0.63 s of the harness's work against 0.95 s made whole.
- Import: torch at the top; this module runs where the candidate is called.
"""
from __future__ import annotations

import torch

from equiv.run.same_bytes import same_bytes, same_rows

CHUNK_BYTES = {"cpu": 4 << 20, "cuda": 256 << 20}    # the gathered rows of one chunk


class TableRows:
    """``table[index]`` (module docstring): ``table`` ``[K, V]``, ``index`` int64 of any shape."""

    def __init__(self, table, index):
        if table.dim() != 2 or index.dtype != torch.int64 or index.device != table.device:
            raise ValueError(f"TableRows takes a [K, V] table and an int64 index on its device, "
                             f"not {list(table.shape)} and {index.dtype} on {index.device}")
        self.table, self.index = table, index
        self.shape = torch.Size((*index.shape, table.shape[1]))
        self.dtype, self.device = table.dtype, table.device

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return self.table.element_size()

    def storage_offset(self) -> int:
        return 0

    def stride(self, dim: int) -> int:
        dim = dim % self.dim()
        out = 1
        for n in self.shape[dim + 1:]:
            out *= n
        return out

    def __getitem__(self, key) -> "TableRows":
        """Rows along the first dimension (a slice or an index of it)."""
        return TableRows(self.table, self.index[key])

    def materialize(self):
        """The tensor (``index_select``'s row copies: ``table[index]``, torch's indexing kernel,
        runs element by element on the CPU)."""
        return torch.index_select(self.table, 0, self.index.reshape(-1)).view(self.shape)

    def rolled(self, shift: int) -> "TableRows":
        """These rows rolled by ``shift`` along the last dimension (``torch.roll`` of the table)."""
        return TableRows(torch.roll(self.table, shift, 1), self.index)

    def write_padded(self, body, pad) -> None:
        """``body`` (``[n, S]``, contiguous, ``S`` at least ``V``) takes these rows in its first
        ``V`` columns and ``pad`` in the rest: one ``index_select`` of the table padded so."""
        K, V = self.table.shape
        padded = torch.full((K, body.shape[1]), pad, dtype=self.dtype, device=self.device)
        padded[:, :V] = self.table
        torch.index_select(padded, 0, self.index.reshape(-1), out=body)

    def write_into(self, dest) -> None:
        """``dest`` (a tensor of this shape) takes these rows: one ``index_select`` into it where
        its rows lie one after another, else a chunk at a time."""
        flat = self._rows_of(dest)
        if flat is not None and flat.is_contiguous():
            torch.index_select(self.table, 0, self.index.reshape(-1), out=flat)
            return
        for d, rows in self.chunks(dest):
            d.copy_(rows)

    def equal(self, dest) -> bool:
        """``dest`` bit for bit these rows: a host row against its table row where rows are long
        (``equiv.run.same_bytes.same_rows``), else a chunk at a time."""
        flat = self._rows_of(dest)
        if flat is not None:
            same = same_rows(flat, self.table, self.index.reshape(-1))
            if same is not None:
                return same
        return all(same_bytes(d, rows) for d, rows in self.chunks(dest))

    def _rows_of(self, dest):
        """``dest`` as ``[n, V]`` rows (a view), or None where no view merges its rows."""
        if tuple(dest.shape) != tuple(self.shape):
            raise ValueError(f"TableRows: dest of shape {list(dest.shape)}, not {list(self.shape)}")
        try:
            return dest.view(-1, self.table.shape[1])
        except RuntimeError:
            return None

    def chunks(self, dest):
        """``(dest_rows, rows)`` pairs over ``dest`` (a tensor of this shape): ``rows`` the same
        rows of ``table[index]``, gathered into one buffer reused by the next pair (use a pair
        before asking for the next)."""
        V = self.table.shape[1]
        flat = self.index.reshape(-1)
        out = self._rows_of(dest)
        if out is None:                          # rows no view can merge: the rows made whole
            yield dest, self.materialize()
            return
        n = flat.numel()
        if n == 0 or V == 0:
            return
        step = max(1, CHUNK_BYTES.get(self.device.type, CHUNK_BYTES["cuda"]) // max(1, V * self.element_size()))
        buffer = torch.empty((min(step, n), V), dtype=self.dtype, device=self.device)
        for a in range(0, n, step):
            b = min(a + step, n)
            rows = torch.index_select(self.table, 0, flat[a:b], out=buffer[:b - a])
            yield out[a:b], rows
