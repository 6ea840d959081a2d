"""``equiv.load_candidate``: a candidate of any operation by spec (default: the draft top-k).

The public front of ``equiv.run.spec`` (what a spec is) and ``equiv.run.load`` (importing it):
a built-in path name, ``package.module:function``, ``path/to/file.py:function`` or a callable.
Every failure raises ``CandidateLoadError`` naming the spec and saying what to fix.
"""
from __future__ import annotations

from equiv.ops import DEFAULT_OP
from equiv.run.load import Candidate
from equiv.run.spec import CandidateSpec

__all__ = ["Candidate", "CandidateSpec", "load_candidate"]


def load_candidate(spec, op: str = DEFAULT_OP) -> Candidate:
    """A ``Candidate`` for a built-in name, ``package.module:function``, ``file.py:function``
    or a callable (wrapped as-is; its spec is its qualified name), imported in this process."""
    return CandidateSpec.parse(spec, op).load()
