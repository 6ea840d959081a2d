"""The verify operation: judging a speculative-decoding verifier for losslessness (the default)
or against the token-level rejection sampler's exact law (``--law token``).

The public names; the work lives in the modules named after them: ``recipes`` (input triples),
``paths`` (built-in verifiers, block verification among them; loading a user's), ``calls`` (the
one place a verifier is called), ``judge`` (the checks, both laws), ``lossless`` (the
losslessness law's checks), ``tail`` (repeats among tail draws), ``defects`` (failures by
cause), ``plans`` (what each budget runs), ``gate`` (``equiv gate --op verify``),
``mutants`` (the zoo, imported on demand: it needs torch) and ``calibration`` (false-positive
rate and power). The exact law is ``equiv.reference.verify``; docs/verify.md describes the whole.
"""
from equiv.ops.verify.gate import run_verify_check, run_verify_gate
from equiv.ops.verify.judge import CHECKS, LAWS, LOSSLESS_CHECKS, Case, Verdict, VerifyCheck, run_judge
from equiv.ops.verify.paths import VERIFIERS, load_verifier, verifier_names
from equiv.ops.verify.recipes import FAMILIES, VerifyRecipe

__all__ = [
    "CHECKS",
    "FAMILIES",
    "LAWS",
    "LOSSLESS_CHECKS",
    "VERIFIERS",
    "Case",
    "Verdict",
    "VerifyCheck",
    "VerifyRecipe",
    "load_verifier",
    "run_judge",
    "run_verify_check",
    "run_verify_gate",
    "verifier_names",
]
