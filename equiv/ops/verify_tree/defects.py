"""Failures of a tree verifier turned into defects by cause, each with its smallest trigger and REPRO.

Plan. The judge records, with every failed check, the *cause* it established from data (never
from message text) in the check's typed ``evidence["cause"]``: calls.py says whether a call
raised, returned the wrong type or wrote into its inputs; the judge whether the path / token
layout broke, the same seed gave another output, an *accepted child* or the *drawn token* had
target probability 0, greedy decoding's text was left by a wrong child or a drawn token that is not
the argmax (where the argmax child was there, or where none was; a stop that emits the argmax is
lossless, however early), at which position the text's law broke (and whether only the residual score did:
the law drawn from after rejected children), and whether rows or calls shared randomness. ``diagnose(verdict)`` keeps one ``Defect``
(``equiv.checks``) per cause with the smallest recipe that showed it, and its explanation names
the bug classes that cause points to (``LEADS``, the public record of tree verifiers).
"""
from __future__ import annotations

from equiv.checks import Diagnosis
from equiv.ops.verify.defects import defects_by_cause

LEADS = {
    "accepted a child of target probability 0": "a zero coin accepting probability 0, or an acceptance threshold below 1",
    "drew a token of target probability 0": "a fallback token of probability 0 (an unnormalised or empty residual)",
    "greedy: accepted a wrong child": "an acceptance threshold below 1 or a zero coin",
    "greedy: stopped at the argmax child and drew another token":
        "the child of probability 1 rejected (a wrong logits row, the parent's or a sibling's, or a coin compared "
        "the wrong way), or a stop before the children (an accept-length cap) that drew from the residual "
        "without them or from another node's row instead of its own full target",
    "greedy: wrong drawn token": "the drawn token read from the wrong row (no child is the argmax there)",
    "residual law": "the residual: zeroing the rejected token instead of subtracting q, a reused coin, or "
                    "duplicate siblings counted twice",
    "emitted law at position 0": "the acceptance rule at the root (thresholds, greedy at temperature > 0, a reused coin)",
    "emitted law past the root": "a wrong logits row for deeper nodes (the parent's or a sibling's), or a path that "
                                 "was not verified as a chain (independent acceptance)",
    "tail concentration": "the residual's tail squeezed onto few tokens: an inverse CDF on a low-precision "
                          "(float16 / bfloat16) cumulative sum, or a sampler that drops most tail tokens",
    "text law (exhaustive)": "the law of the whole text (any of the above, seen cell by cell at small V)",
    "shared randomness between rows": "rows of one call reading each other's coins (a wrong stride or row "
                                      "index into the uniforms, one coin for a group of rows)",
    "shared randomness between calls": "the generator argument ignored (a private or global generator of fixed "
                                       "seed) or one random state replayed on every call (a captured graph)",
}
_SMALL = ("call", "row", "group", "position", "recipe")


def lead(cause: str) -> str | None:
    """The bug classes a cause points to, or None."""
    if cause in LEADS:
        return LEADS[cause]
    if cause.startswith("emitted law at position"):
        return LEADS["emitted law past the root"]
    if cause.startswith("joint law"):
        return "positions tied together: a coin reused across levels"
    return None


def defects_of(verdict) -> tuple:
    """One defect per cause (the chain verifier's rule), explained by the bug classes it points to."""
    def explain(cause, check):
        likely = lead(cause)
        return f"likely {likely}" if likely else check.detail[:240]

    return defects_by_cause(verdict, where=lambda c: f"drafts={verdict.drafts}, {c.name}", explain=explain,
                            small=_SMALL, extra={"drafts": verdict.drafts})


def diagnose(verdict) -> Diagnosis:
    """The defects of ``verdict`` by cause (module docstring)."""
    return Diagnosis(verdict.candidate, defects_of(verdict))
