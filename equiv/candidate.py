"""Turn a candidate spec into a callable ``fn(logits, k) -> (topk_p, topk_index)``.

A spec is one of
- a built-in path name (``equiv paths`` lists them);
- ``package.module:function`` (imported; the attribute may be dotted, ``mod:Class.method``);
- ``path/to/file.py:function`` (loaded from the file, which need not be on ``sys.path``).
Every failure raises ``CandidateLoadError`` naming the spec and saying what to fix.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Callable

from equiv.errors import CandidateLoadError
from equiv.ops.draft_topk.paths import get_path, path_names


@dataclass(frozen=True)
class Candidate:
    spec: str
    fn: Callable
    builtin: bool

    @property
    def name(self) -> str:
        return self.spec

    def __call__(self, logits, k):
        return self.fn(logits, k)


def _load_file(spec: str, file_part: str):
    path = os.path.abspath(file_part)
    if not os.path.isfile(path):
        raise CandidateLoadError(f"candidate {spec!r}: no file {file_part!r}; check the path")
    mod_name = "equiv_candidate_" + os.path.splitext(os.path.basename(path))[0]
    loader_spec = importlib.util.spec_from_file_location(mod_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[mod_name] = module
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise CandidateLoadError(
            f"candidate {spec!r}: importing {file_part!r} raised {type(exc).__name__}: {exc}") from exc
    return module


def _load_module(spec: str, module_part: str):
    try:
        return importlib.import_module(module_part)
    except ModuleNotFoundError as exc:
        raise CandidateLoadError(
            f"candidate {spec!r}: no module named {exc.name!r}; install it or put it on "
            f"PYTHONPATH, or give a file as path/to/file.py:function") from exc
    except Exception as exc:
        raise CandidateLoadError(
            f"candidate {spec!r}: importing {module_part!r} raised {type(exc).__name__}: {exc}") from exc


def _check_signature(spec: str, fn) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                                   # builtins without a signature: trust them
    try:
        sig.bind(object(), 1)
    except TypeError:
        raise CandidateLoadError(
            f"candidate {spec!r}: signature {sig} cannot be called as fn(logits, k); "
            f"it must take two positional arguments") from None


def split_spec(spec: str) -> tuple[str, str, bool]:
    """``(target, attribute, is_file)`` of a ``module:fn`` or ``file.py:fn`` spec (no import)."""
    target, _, attr = spec.strip().rpartition(":")
    if not target or not attr:
        raise CandidateLoadError(f"candidate {spec!r}: both sides of ':' must be non-empty")
    return target, attr, target.endswith(".py") or os.sep in target or "/" in target


def load_candidate(spec) -> Candidate:
    """A ``Candidate`` for a built-in name, ``package.module:function`` or ``file.py:function``.

    A callable passed directly is wrapped as-is (its spec is its qualified name)."""
    if callable(spec) and not isinstance(spec, str):
        name = getattr(spec, "name", None) or getattr(spec, "__qualname__", repr(spec))
        return Candidate(str(name), spec, builtin=str(name) in path_names())
    if not isinstance(spec, str) or not spec.strip():
        raise CandidateLoadError(
            f"candidate {spec!r} is empty or not a string: give a built-in path name "
            f"({', '.join(path_names())}), package.module:function or path/to/file.py:function")
    spec = spec.strip()
    if ":" not in spec:
        if spec in path_names():
            return Candidate(spec, get_path(spec), builtin=True)
        raise CandidateLoadError(
            f"candidate {spec!r} is not a built-in path ({', '.join(path_names())}) and has no "
            f"':function' part: write package.module:function or path/to/file.py:function")
    obj = resolve_callable(spec)
    _check_signature(spec, obj)
    return Candidate(spec, obj, builtin=False)


def resolve_callable(spec: str):
    """The callable a ``package.module:function`` or ``file.py:function`` spec names (any
    signature: each operation checks its own)."""
    target, attr, is_file = split_spec(spec)
    if is_file:
        module = _load_file(spec, target)
    else:
        module = _load_module(spec, target)
    obj = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            names = [n for n in dir(obj) if callable(getattr(obj, n, None)) and not n.startswith("_")]
            raise CandidateLoadError(
                f"candidate {spec!r}: {target!r} has no attribute {part!r}; callables there: "
                f"{', '.join(names[:12]) or 'none'}") from None
    if not callable(obj):
        raise CandidateLoadError(
            f"candidate {spec!r}: {attr!r} is a {type(obj).__name__}, not a callable")
    return obj
