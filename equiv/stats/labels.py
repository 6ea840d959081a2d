"""Per-token group labels as integer codes into a small table of names.

The verifiers' judges label every judged token with its group ("realistic:position3"): two to
three million tokens on a GPU plan. As a NumPy string array that is ~80 bytes a token, and every
per-group test compared the whole array with each label (``groups == label``: 60 labels x 190 MB
scanned per test family) and sorted it to find the labels (``np.unique``). ``Labels`` keeps the
codes (one small integer a token) and the names once: a group's mask is one integer compare, its
names a lookup. The masks are the string array's masks element for element, so every test that
selects with them sees the same tokens in the same order and gives the same bits.
"""
from __future__ import annotations

import numpy as np


class Labels:
    """``names[codes[i]]`` is token ``i``'s label; ``names`` has no repeats."""

    __slots__ = ("names", "codes")

    def __init__(self, names, codes):
        self.names = tuple(names)
        self.codes = np.asarray(codes, dtype=np.int64)
        if len(set(self.names)) != len(self.names):
            raise ValueError(f"Labels: names repeat: {self.names}")

    @classmethod
    def of(cls, groups) -> "Labels":
        """``groups`` as Labels: itself, or an array of labels (strings, ints) coded once."""
        if isinstance(groups, Labels):
            return groups
        groups = np.asarray(groups)
        names, codes = np.unique(groups.ravel(), return_inverse=True)
        return cls(names.tolist(), codes.reshape(groups.shape))

    @classmethod
    def concat(cls, parts) -> "Labels":
        """The labels of ``parts`` (Labels) one after the other, under one table of names."""
        parts = list(parts)
        table: dict = {}
        for p in parts:
            for name in p.names:
                table.setdefault(name, len(table))
        codes = [np.asarray([table[n] for n in p.names], dtype=np.int64)[p.codes.ravel()] if p.codes.size
                 else np.zeros(0, np.int64) for p in parts]
        return cls(table, np.concatenate(codes) if codes else np.zeros(0, np.int64))

    def renamed(self, fn) -> "Labels":
        """Each name mapped by ``fn`` (names that become one merge)."""
        new = [fn(n) for n in self.names]
        table = {n: i for i, n in enumerate(dict.fromkeys(new))}
        return Labels(table, np.asarray([table[n] for n in new], dtype=np.int64)[self.codes])

    @property
    def shape(self):
        return self.codes.shape

    def present(self) -> list:
        """The names some token carries, sorted (as ``np.unique`` of the labels would give them)."""
        used = np.flatnonzero(np.bincount(self.codes.ravel(), minlength=len(self.names)))
        return sorted(self.names[i] for i in used.tolist())

    def mask(self, name):
        """``labels == name`` per token."""
        try:
            return self.codes == self.names.index(name)
        except ValueError:
            return np.zeros(self.codes.shape, dtype=bool)

    def per_token(self, values):
        """``values[i]`` is a value per name: the array of each token's value."""
        return np.asarray(values)[self.codes]
