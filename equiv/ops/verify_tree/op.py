"""The tree verifier as an ``Op``: ``fn(parents, draft_token_ids, draft_probs, target_probs, generator)``.

Its one op-declared option is ``drafts`` (``DRAFTS_OPTION``): the draft construction a verifier
is lossless for (``topk`` by default; a function attribute ``drafts`` declares it, an explicit
option wins; judge.py).
"""
from __future__ import annotations

import inspect

from equiv.errors import CandidateLoadError
from equiv.ops import Op

DRAFT_CHOICES = ("topk", "iid", "wor", "any")
DRAFTS_HELP = ("verify_tree: the draft construction the verifier is lossless for: topk (any fixed tree, "
               "default), iid (siblings drawn with replacement), wor (without replacement) or any; "
               "default: the function's attribute drafts, else topk")


def _builtin_names() -> tuple:
    from equiv.ops.verify_tree.paths import VERIFIERS

    return tuple(VERIFIERS)


def _builtin(name: str):
    from equiv.ops.verify_tree.paths import VERIFIERS

    return VERIFIERS[name]


def _check_signature(text: str, fn) -> None:
    try:
        inspect.signature(fn).bind(object(), object(), None, object(), object())
    except TypeError:
        raise CandidateLoadError(
            f"tree verifier {text!r}: signature {inspect.signature(fn)} cannot be called as "
            f"fn(parents, draft_token_ids, draft_probs, target_probs, generator)") from None
    except ValueError:
        pass                                         # no signature to read: trust it


def _mutants() -> dict:
    from equiv.ops.verify_tree.mutants import MUTANTS

    return MUTANTS


def _legal() -> dict:
    from equiv.ops.verify_tree.mutants import LEGAL_VARIANTS

    return LEGAL_VARIANTS


def _parse_recipe(text: str):
    from equiv.ops.verify_tree.recipes import TreeRecipe

    return TreeRecipe.parse(text)


def _gate(options, *, stages, vocab=None, progress=None):
    from equiv.ops.verify_tree.gate import run_tree_gate

    return run_tree_gate(options.spec, device=options.device, budget=options.budget, seed=options.seed,
                         timeout=options.timeout, stages=stages, progress=progress,
                         drafts=(getattr(options, "op_options", None) or {}).get("drafts"))


def _options() -> tuple:
    """The op-declared options (``equiv.ops.OpOption`` when the core has it)."""
    import equiv.ops as ops

    if not hasattr(ops, "OpOption"):
        return ()
    return (ops.OpOption("drafts", DRAFT_CHOICES, None, DRAFTS_HELP),)


_extra = {"options": _options()} if "options" in getattr(Op, "__dataclass_fields__", {}) else {}

OP = Op(name="verify_tree",
        signature="fn(parents, draft_token_ids, draft_probs, target_probs, generator) -> (accepted_path, output_token_ids)",
        mutants_module="equiv.ops.verify_tree.mutants", builtin_names=_builtin_names, builtin=_builtin,
        check_signature=_check_signature, mutants=_mutants, legal_variants=_legal,
        parse_recipe=_parse_recipe, stages=("properties", "statistics"), gate=_gate, ledger=dict,
        noun="tree verifier", **_extra)
