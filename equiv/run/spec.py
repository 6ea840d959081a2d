"""``CandidateSpec``: what the user named as the candidate, parsed once.

A spec is one of
- a built-in path name of the operation (``equiv paths`` lists them): kind ``builtin``;
- ``package.module:function`` (imported in the worker; the attribute may be dotted,
  ``mod:Class.method``): kind ``module``;
- ``path/to/file.py:function`` (relative to the folder the command runs in; made absolute here,
  so the worker and the pytest subprocess load the same file): kind ``file``;
- a Python callable handed to the API: kind ``callable`` (it runs in the caller's process).
``CandidateSpec.parse`` is the only code that decides which; everything after it reads the
object's fields (``kind``, ``target``, ``attribute``, ``trusted``). ``trusted`` is our own code
(a built-in path or a mutant of the operation's zoo), which may run in-process for speed unless
``EQUIV_ISOLATE=always``. ``text`` is what reports and REPRO lines show: the spec as given, with
a file made absolute. Every usage error is a one-line ``CandidateLoadError``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

from equiv.errors import CandidateLoadError
from equiv.ops import DEFAULT_OP, get_op
from equiv.run.load import Candidate, load

KINDS = ("builtin", "module", "file", "callable")


@dataclass(frozen=True)
class CandidateSpec:
    text: str                    # as reports show it (a file spec with its absolute path)
    op: str                      # the operation whose signature it must have
    kind: str                    # one of KINDS
    target: str                  # built-in name, module name, absolute file path or qualified name
    attribute: str = ""          # the function inside ``target`` (module and file kinds)
    trusted: bool = False        # our own code: may run in this process
    fn: Callable | None = field(default=None, compare=False, repr=False)   # kind "callable" only

    @classmethod
    def parse(cls, value, op: str | None = None) -> "CandidateSpec":
        """The spec of ``value`` (a string, a callable or a spec already parsed) for ``op``
        (default: a parsed spec's own operation, else the draft top-k)."""
        if isinstance(value, CandidateSpec):
            if op is not None and value.op != get_op(op).name:
                raise CandidateLoadError(f"candidate {value.text!r} was given for --op {value.op}, "
                                         f"not {op}")
            return value
        the_op = get_op(op or DEFAULT_OP)
        # the built-in names import the paths (torch: ~1.2 s), so only the specs that need them ask:
        # a gate starts its property suite before that import
        names = the_op.builtin_names
        if callable(value) and not isinstance(value, str):
            name = str(getattr(value, "name", None) or getattr(value, "__qualname__", None) or repr(value))
            return cls(name, the_op.name, "callable", name, trusted=True, fn=value)
        if not isinstance(value, str) or not value.strip():
            raise CandidateLoadError(
                f"candidate {value!r} is empty or not a string: give a built-in path name "
                f"({', '.join(names())}), package.module:function or path/to/file.py:function")
        text = value.strip()
        if ":" not in text:
            if text not in names():
                raise CandidateLoadError(
                    f"candidate {text!r} is not a built-in {the_op.noun} ({', '.join(names())}) and "
                    f"has no ':function' part: write package.module:function or path/to/file.py:function")
            return cls(text, the_op.name, "builtin", text, trusted=_may_trust())
        target, _, attribute = text.rpartition(":")
        if not target or not attribute:
            raise CandidateLoadError(f"candidate {text!r}: both sides of ':' must be non-empty")
        if target.endswith(".py") or os.sep in target or "/" in target:
            path = os.path.abspath(target)
            if not os.path.isfile(path):
                raise CandidateLoadError(f"candidate {text!r}: no file {target!r} (looked in "
                                         f"{os.getcwd()!r}); check the path")
            return cls(f"{path}:{attribute}", the_op.name, "file", path, attribute)
        ours = target == the_op.mutants_module
        return cls(text, the_op.name, "module", target, attribute, trusted=ours and _may_trust())

    @property
    def name(self) -> str:
        return self.text

    @property
    def builtin(self) -> bool:
        return self.kind == "builtin"

    @property
    def isolated(self) -> bool:
        """Called in a supervised worker process (a user's code, or ours under EQUIV_ISOLATE)."""
        return not self.trusted

    def __str__(self) -> str:
        return self.text

    def __reduce__(self):
        # A callable stays in its process; the worker and a pytest subprocess get the fields.
        if self.kind == "callable":
            raise TypeError(f"candidate {self.text!r} is a Python callable: it runs in-process only")
        return (CandidateSpec, (self.text, self.op, self.kind, self.target, self.attribute, self.trusted))

    def load(self):
        """The ``Candidate`` (``equiv.run.load``): imports a module or file spec here."""
        return load(self)


def _may_trust() -> bool:
    return os.environ.get("EQUIV_ISOLATE", "auto") != "always"


def as_spec(value, op: str | None = None) -> CandidateSpec:
    """``value`` as a ``CandidateSpec`` (the entry points' one call)."""
    return CandidateSpec.parse(value, op)


def runner_target(candidate, op: str):
    """What a runner is asked for, for ``candidate`` of ``op``: the spec (a user's candidate runs
    in the worker, ours in process), or the callable itself when a ``Candidate`` was handed whose
    spec does not parse."""
    if isinstance(candidate, Candidate):             # named by a spec: its runner; else the callable
        try:
            return CandidateSpec.parse(candidate.spec, op)
        except CandidateLoadError:
            return candidate.fn
    return CandidateSpec.parse(candidate, op)
