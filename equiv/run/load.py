"""Turn a ``CandidateSpec`` into a ``Candidate``: import its module or file, check its signature.

``load(spec)`` runs where the candidate will be called: in the worker for a user's code, in this
process for our own (``spec.trusted``) or a callable the API was handed. A built-in name is looked
up in its operation's table; a module or file is imported and the attribute (dotted, for
``mod:Class.method``) resolved; the operation checks the signature. Every failure raises
``CandidateLoadError`` naming the spec and saying what to fix.

A file is imported as Python runs a script: its own folder comes first on ``sys.path`` (before
the working folder the caller's path puts first), so ``from reference import helper`` in
``path/to/mine.py`` finds its sibling ``reference.py`` even when run from a folder that has a
``reference/`` package (the project's root, or a user's repository with one). A module already
imported keeps its place (``sys.modules``): in the worker that is ``equiv`` (whose own oracle is
``equiv.reference``) and its dependencies, so a sibling named ``torch.py`` or ``equiv.py`` is not
what the file gets.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Callable

from equiv.errors import CandidateLoadError
from equiv.ops import get_op


@dataclass(frozen=True)
class Candidate:
    spec: str
    fn: Callable
    builtin: bool

    @property
    def name(self) -> str:
        return self.spec

    def __call__(self, *args):
        return self.fn(*args)


def load(spec) -> Candidate:
    """The ``Candidate`` of a parsed ``CandidateSpec``."""
    op = get_op(spec.op)
    if spec.kind == "callable":
        return Candidate(spec.text, spec.fn, builtin=spec.text in op.builtin_names())
    if spec.kind == "builtin":
        return Candidate(spec.text, op.builtin(spec.target), builtin=True)
    fn = resolve_callable(spec)
    op.check_signature(spec.text, fn)
    return Candidate(spec.text, fn, builtin=False)


def resolve_callable(spec):
    """The callable a module or file spec names (any signature: the operation checks its own)."""
    module = _load_file(spec) if spec.kind == "file" else _load_module(spec)
    obj = module
    for part in spec.attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if callable(getattr(obj, n, None)) and not n.startswith("_")]
            raise CandidateLoadError(
                f"candidate {spec.text!r}: {spec.target!r} has no attribute {part!r}; callables there: "
                f"{', '.join(names[:12]) or 'none'}") from None
    if not callable(obj):
        raise CandidateLoadError(
            f"candidate {spec.text!r}: {spec.attribute!r} is a {type(obj).__name__}, not a callable")
    return obj


def _load_file(spec):
    if not os.path.isfile(spec.target):
        raise CandidateLoadError(f"candidate {spec.text!r}: no file {spec.target!r}; check the path")
    _folder_first(os.path.dirname(spec.target))
    mod_name = "equiv_candidate_" + os.path.splitext(os.path.basename(spec.target))[0]
    loader_spec = importlib.util.spec_from_file_location(mod_name, spec.target)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise CandidateLoadError(
            f"candidate {spec.text!r}: importing {spec.target!r} raised {type(exc).__name__}: {exc}") from exc
    return module


def _folder_first(folder: str) -> None:
    """``folder`` first on ``sys.path``, as a script's own folder is (module docstring)."""
    sys.path[:] = [folder] + [p for p in sys.path if os.path.abspath(p or os.curdir) != folder]


def _load_module(spec):
    try:
        return importlib.import_module(spec.target)
    except ModuleNotFoundError as exc:
        raise CandidateLoadError(
            f"candidate {spec.text!r}: no module named {exc.name!r}; install it or put it on "
            f"PYTHONPATH, or give a file as path/to/file.py:function") from exc
    except Exception as exc:
        raise CandidateLoadError(
            f"candidate {spec.text!r}: importing {spec.target!r} raised {type(exc).__name__}: {exc}") from exc
