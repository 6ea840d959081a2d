"""The tree verifier as an ``Op``: ``fn(parents, draft_token_ids, draft_probs, target_probs, generator)``.

Its own option is ``drafts`` (``--drafts`` of gate and check, ``--equiv-drafts`` of the plugin):
the draft construction the verifier is judged lossless for. Its default ``declared`` reads the
verifier's attribute ``drafts`` (``topk`` when it has none); an explicit value wins (gate.py).
Each field imports its module when called (holding the registry imports no NumPy or torch).
"""
from __future__ import annotations

from equiv.ops import Op, OpOption, lazy_attr, option_check, option_gate, signature_check

_HERE = __name__.rpartition(".")[0]
CONSTRUCTIONS = ("topk", "iid", "wor", "any")
DRAFT_CHOICES = ("declared",) + CONSTRUCTIONS
SIGNATURE = ("fn(parents, draft_token_ids, draft_probs, target_probs, generator) -> "
             "(accepted_path, output_token_ids)")

# the built-in paths' names (``paths.VERIFIERS``, which imports torch: ~1.2 s a spec check need not pay)
BUILTIN_NAMES = ("greedy", "target_only", "eagle_onehot", "specinfer", "recursive_rejection")
DEFAULT_RECIPE = "realistic:seed=0,batch=256,vocab=129280,nodes=8,depth=3,fanout=3,drafts=topk"


def _attr(module: str, attr: str):
    return lazy_attr(_HERE, module, attr)


OP = Op(name="verify_tree",
        signature=SIGNATURE,
        summary="a tree verifier of speculative decoding (EAGLE / SGLang top-k > 1, SpecInfer)",
        mutants_module=f"{_HERE}.mutants", builtin_names=lambda: BUILTIN_NAMES,
        builtin=lambda name: _attr("paths", "VERIFIERS")()[name],
        check_signature=signature_check("tree verifier", SIGNATURE),
        mutants=lambda: {k: v[0] for k, v in _attr("mutants", "MUTANTS")().items()},
        legal_variants=_attr("mutants", "LEGAL_VARIANTS"),
        parse_recipe=lambda text: _attr("recipes", "TreeRecipe")().parse(text),
        default_recipe=DEFAULT_RECIPE, stages=("properties", "statistics"),
        check=option_check(_attr("gate", "run_tree_check"), "drafts", DEFAULT_RECIPE,
                           diagnose=_attr("defects", "diagnose")),
        gate=option_gate(_attr("gate", "run_tree_gate"), "drafts"), ledger=dict, noun="tree verifier",
        selftest_stages=("statistics",),
        features=lambda name: {"caller": _attr("calls", "tree_verifier_function")}[name](),
        options=(OpOption("drafts", DRAFT_CHOICES, "declared",
                          "the draft construction the tree verifier is lossless for: topk (any fixed tree), "
                          "iid (siblings drawn with replacement), wor (without replacement) or any; default "
                          "declared: the function's attribute drafts, else topk"),))
