"""The verify operation: judging a speculative-decoding rejection sampler against its exact law.

The public names; the work lives in the modules named after them: ``recipes`` (input triples),
``paths`` (built-in verifiers, loading a user's), ``calls`` (the one place a verifier is called),
``judge`` (the checks), ``plans`` (what each budget runs), ``gate`` (``equiv gate --op verify``),
``mutants`` (the zoo, imported on demand: it needs torch) and ``calibration`` (false-positive
rate and power). The exact law is ``equiv.reference.verify``; docs/verify.md describes the whole.
"""
from equiv.ops.verify.gate import run_verify_check, run_verify_gate
from equiv.ops.verify.judge import CHECKS, Case, Verdict, VerifyCheck, run_judge
from equiv.ops.verify.paths import VERIFIERS, load_verifier, verifier_names
from equiv.ops.verify.recipes import FAMILIES, VerifyRecipe

__all__ = [
    "CHECKS",
    "FAMILIES",
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
