"""The verifier as an ``Op``: ``fn(draft_token_ids, draft_probs, target_probs, generator)``.

Each field imports its module when called (holding the registry imports no NumPy or torch).
"""
from __future__ import annotations

from equiv.ops import Op, OpOption, lazy_attr, option_check, option_gate, signature_check

_HERE = __name__.rpartition(".")[0]
LAWS = ("lossless", "token")
SIGNATURE = "fn(draft_token_ids, draft_probs, target_probs, generator) -> tokens"

# the built-in paths' names (``paths.VERIFIERS``, which imports torch: ~1.2 s a spec check need not pay)
BUILTIN_NAMES = ("torch_sampler", "block_verification", "reference_sampler")
DEFAULT_RECIPE = "realistic:seed=0,batch=256,n=3,vocab=129280"


def _attr(module: str, attr: str):
    return lazy_attr(_HERE, module, attr)


def _feature(name: str):
    return {"caller": _attr("calls", "verifier_function")}[name]()


OP = Op(name="verify", signature=SIGNATURE,
        summary="a chain verifier (rejection sampler) of speculative decoding",
        mutants_module=f"{_HERE}.mutants", builtin_names=lambda: BUILTIN_NAMES,
        builtin=lambda name: _attr("paths", "VERIFIERS")()[name],
        check_signature=signature_check("verifier", SIGNATURE),
        mutants=_attr("mutants", "MUTANTS"), legal_variants=_attr("mutants", "LEGAL_VARIANTS"),
        parse_recipe=lambda text: _attr("recipes", "VerifyRecipe")().parse(text),
        default_recipe=DEFAULT_RECIPE, stages=("properties", "statistics"),
        check=option_check(_attr("gate", "run_verify_check"), "law", DEFAULT_RECIPE),
        gate=option_gate(_attr("gate", "run_verify_gate"), "law"), ledger=dict, noun="verifier",
        features=_feature, coverage_lines=lambda coverage: _attr("space", "table_lines")()(coverage),
        options=(OpOption("law", LAWS, "lossless",
                          "the law judged: lossless (the emitted text has the target model's law) or token "
                          "(the token-level rejection sampler's per-draft law)"),))
