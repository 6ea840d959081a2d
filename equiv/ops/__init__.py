"""Operations as plug-ins: one ``Op`` object per folder under ``equiv/ops/``.

An operation (the draft top-k, the verifier) is everything equiv knows about one hot path: its
call signature, its built-in paths, its input recipes, the stages of its gate, its mutant zoo
and its ledger of accepted failures. The rest of equiv reaches an operation only through its
``Op``: ``equiv.run`` loads and calls a candidate of any operation without importing one
(``get_op(spec.op)`` resolves the name at run time), and the commands, the plugin and the gate
take ``--op NAME``. Adding an operation is adding a folder ``equiv/ops/NAME/`` whose ``op.py``
defines ``OP`` and naming it in ``OP_NAMES``.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

OP_NAMES = ("draft_topk", "verify", "verify_tree")
DEFAULT_OP = "draft_topk"


@dataclass(frozen=True)
class Op:
    """One operation. Every callable field imports its module on first use (cheap to hold)."""

    name: str
    signature: str                       # the call a candidate must accept, as users read it
    mutants_module: str                  # ``module`` of ``module:NAME`` specs that are our own zoo
    builtin_names: Callable[[], tuple]   # the built-in paths' names
    builtin: Callable[[str], Callable]   # the callable of a built-in name
    check_signature: Callable[[str, Callable], None]   # raises CandidateLoadError
    mutants: Callable[[], dict]          # name -> mutant (the zoo)
    legal_variants: Callable[[], dict]   # name -> legal variant (must pass)
    parse_recipe: Callable[[str], object]   # ``family:key=value,...`` -> a recipe
    stages: tuple                        # the gate's stages, in order
    gate: Callable                       # ``gate(options: RunOptions, progress=None)`` -> result
    ledger: Callable[[], dict]           # accepted failures (name, property) -> reason
    noun: str = "path"                   # what its built-ins are called in messages

    def __str__(self) -> str:
        return self.name


def get_op(name) -> Op:
    """The ``Op`` called ``name`` (``InvalidArgument`` naming the choices otherwise)."""
    if isinstance(name, Op):
        return name
    from equiv.validation import check_choice

    return importlib.import_module(f"equiv.ops.{check_choice('op', name, OP_NAMES)}.op").OP
