"""The verifier as an ``Op``: ``fn(draft_token_ids, draft_probs, target_probs, generator)``."""
from __future__ import annotations

import inspect

from equiv.errors import CandidateLoadError
from equiv.ops import Op


def _builtin_names() -> tuple:
    from equiv.ops.verify.paths import VERIFIERS

    return tuple(VERIFIERS)


def _builtin(name: str):
    from equiv.ops.verify.paths import VERIFIERS

    return VERIFIERS[name]


def _check_signature(text: str, fn) -> None:
    try:
        inspect.signature(fn).bind(object(), None, object(), object())
    except TypeError:
        raise CandidateLoadError(
            f"verifier {text!r}: signature {inspect.signature(fn)} cannot be called as "
            f"fn(draft_token_ids, draft_probs, target_probs, generator)") from None
    except ValueError:
        pass                                         # no signature to read: trust it


def _mutants() -> dict:
    from equiv.ops.verify.mutants import MUTANTS

    return MUTANTS


def _legal() -> dict:
    from equiv.ops.verify.mutants import LEGAL_VARIANTS

    return LEGAL_VARIANTS


def _parse_recipe(text: str):
    from equiv.ops.verify.recipes import VerifyRecipe

    return VerifyRecipe.parse(text)


def _gate(options, *, stages, vocab=None, progress=None):
    from equiv.ops.verify.gate import run_verify_gate

    return run_verify_gate(options.spec, device=options.device, budget=options.budget, seed=options.seed,
                           timeout=options.timeout, stages=stages, progress=progress, law=options.law)


OP = Op(name="verify", signature="fn(draft_token_ids, draft_probs, target_probs, generator) -> tokens",
        mutants_module="equiv.ops.verify.mutants", builtin_names=_builtin_names, builtin=_builtin,
        check_signature=_check_signature, mutants=_mutants, legal_variants=_legal,
        parse_recipe=_parse_recipe, stages=("properties", "statistics"), gate=_gate, ledger=dict,
        noun="verifier")
