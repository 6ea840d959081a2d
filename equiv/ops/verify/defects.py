"""Failures of a verifier turned into defects by cause, each with its smallest trigger and REPRO.

Plan. The judge records, with every failed check, the *cause* it established from data (never
from message text): calls.py says whether a call raised, returned the wrong type or wrote into
its inputs; the judge whether the ``-1`` layout broke, the same seed gave another output, an
acceptance test failed at position ``j``, the drawn token's law failed at a residual or at the
bonus slot, an emitted position's law or a neighbouring pair's joint law failed (lossless law),
or tail draws repeated too often. ``diagnose(verdict)`` groups the failed checks by cause: one
``Defect`` (``equiv.checks``) per cause, with the smallest recipe that showed it (the judge keeps the smallest
failing recipe of each exact check; a statistical check names the recipe its failing group came
from), the evidence and the REPRO line. Under the lossless law a statistical failure says
*where* the text's law broke (position, pair, tail); the gate then also judges the token law
(``token_causes``) to say *why* when the verifier is a token-level sampler -- acceptance at
position ``j``, the residual's law, the bonus token's law -- and lists those as the token law's
findings (a lossless verifier of another algorithm, such as block verification, breaks the token
law by design, so they are a lead there, not a verdict).

The result is the project's ``Diagnosis``: the token law's causes are its ``findings``. The cause
is read from each check's typed ``evidence`` (``evidence["cause"]``), never from its wording.
"""
from __future__ import annotations

from equiv.checks import Defect, Diagnosis

KINDS = ("acceptance at position j", "residual law", "bonus law", "-1 layout", "determinism",
         "input write", "output type", "raise", "crash or hang", "support", "greedy",
         "emitted law at position j", "joint law of positions j,j+1", "tail concentration",
         "shared randomness between rows", "shared randomness between calls", "joint law of the emitted block")
_SMALL_EVIDENCE = ("call", "row", "group", "problem", "position", "trials", "successes", "alpha", "p_value")
FINDINGS_TITLE = "the token-level law, judged to say why (a lead for a token-level sampler):"


def defects_by_cause(verdict, *, where, explain, small, extra) -> tuple:
    """One ``Defect`` per cause among the failed checks of ``verdict`` (a verifier op's judge):
    the cause from each check's typed ``evidence["cause"]`` (else its name), the first check of a
    cause its trigger; ``where(check)``, ``explain(cause, check)``, the ``small`` evidence keys kept
    and the ``extra`` data are the op's."""
    by_cause: dict = {}
    for c in verdict.failed:
        if c.evidence is None:                   # "nothing checked" (an earlier failure hid it): no cause
            continue
        ev = dict(c.evidence)
        cause = ev.pop("cause", None) or c.name
        if cause not in by_cause:
            by_cause[cause] = Defect(cause=cause, title=cause, explanation=explain(cause, c), where=where(c),
                                     trigger=c.recipe or "-", evidence=c.detail, checks=(c.name,),
                                     repro=c.repro or "", data={k: v for k, v in ev.items() if k in small} | extra)
    return tuple(by_cause.values())


def defects_of(verdict) -> tuple:
    """One defect per cause among the failed checks of ``verdict``."""
    return defects_by_cause(verdict, where=lambda c: f"{verdict.law} law, {c.name}",
                            explain=lambda cause, c: c.detail[:240], small=_SMALL_EVIDENCE,
                            extra={"law": verdict.law})


def diagnose(verdict, token_verdict=None) -> Diagnosis:
    """The defects of ``verdict``; ``token_verdict`` (the token law on the same verifier) adds
    its causes as findings."""
    extra = defects_of(token_verdict) if token_verdict is not None and not token_verdict.passed else ()
    return Diagnosis(verdict.candidate, defects_of(verdict), findings=extra,
                     findings_title=FINDINGS_TITLE if extra else "")
