"""The draft top-k as an ``Op``: ``fn(logits, k) -> (topk_p, topk_index)`` (the README's contract)."""
from __future__ import annotations

import inspect

from equiv.errors import CandidateLoadError
from equiv.ops import Op


def _builtin_names() -> tuple:
    from equiv.ops.draft_topk.paths import path_names

    return tuple(path_names())


def _builtin(name: str):
    from equiv.ops.draft_topk.paths import get_path

    return get_path(name)


def _check_signature(text: str, fn) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return                                   # builtins without a signature: trust them
    try:
        sig.bind(object(), 1)
    except TypeError:
        raise CandidateLoadError(
            f"candidate {text!r}: signature {sig} cannot be called as fn(logits, k); "
            f"it must take two positional arguments") from None


def _mutants() -> dict:
    from equiv.ops.draft_topk.mutants import MUTANTS

    return MUTANTS


def _legal() -> dict:
    from equiv.ops.draft_topk.mutants import LEGAL_VARIANTS

    return LEGAL_VARIANTS


def _parse_recipe(text: str):
    from equiv.ops.draft_topk.recipes import Recipe

    return Recipe.parse(text)


def _gate(options, *, stages, vocab, progress=None):
    from equiv.gate import run_draft_gate

    return run_draft_gate(options, stages=stages, vocab=vocab, progress=progress)


def _ledger() -> dict:
    from equiv.ops.draft_topk.ledger import KNOWN_FAILURES

    return KNOWN_FAILURES


OP = Op(name="draft_topk", signature="fn(logits, k) -> (topk_p, topk_index)",
        mutants_module="equiv.ops.draft_topk.mutants", builtin_names=_builtin_names, builtin=_builtin,
        check_signature=_check_signature, mutants=_mutants, legal_variants=_legal,
        parse_recipe=_parse_recipe, stages=("properties", "tolerance", "mtp"), gate=_gate, ledger=_ledger)
