"""The verify operation: judging a speculative-decoding verifier for losslessness (the default)
or against the token-level rejection sampler's exact law (``--law token``).

The work lives in the modules named after what they do (import them by name; this package
imports nothing, so that holding the registry stays cheap): ``recipes`` (input triples),
``paths`` (built-in verifiers, block verification among them; loading a user's), ``calls`` (the
one place a verifier is called), ``judge`` (the checks, both laws), ``lossless`` (the
losslessness law's checks), ``tail`` (repeats among tail draws), ``defects`` (failures by
cause), ``plans`` (what each budget runs), ``gate`` (``equiv gate --op verify``),
``mutants`` (the zoo, imported on demand: it needs torch) and ``calibration`` (false-positive
rate and power). The exact law is ``equiv.reference.verify``; docs/verify.md describes the whole.
"""
