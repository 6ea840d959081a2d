"""Failures of a verifier turned into defects by cause, each with its smallest trigger and REPRO.

Plan. The judge records, with every failed check, the *cause* it established from data (never
from message text): calls.py says whether a call raised, returned the wrong type or wrote into
its inputs; the judge whether the ``-1`` layout broke, the same seed gave another output, an
acceptance test failed at position ``j``, the drawn token's law failed at a residual or at the
bonus slot, an emitted position's law or a neighbouring pair's joint law failed (lossless law),
or tail draws repeated too often. ``diagnose(verdict)`` groups the failed checks by cause: one
``VerifyDefect`` per cause, with the smallest recipe that showed it (the judge keeps the smallest
failing recipe of each exact check; a statistical check names the recipe its failing group came
from), the evidence and the REPRO line. Under the lossless law a statistical failure says
*where* the text's law broke (position, pair, tail); the gate then also judges the token law
(``token_causes``) to say *why* when the verifier is a token-level sampler -- acceptance at
position ``j``, the residual's law, the bonus token's law -- and lists those as the token law's
findings (a lossless verifier of another algorithm, such as block verification, breaks the token
law by design, so they are a lead there, not a verdict).

``VerifyDiagnosis`` has the two methods ``equiv.gate.GateResult`` calls: ``summary()`` for the
console and ``beside_checks()`` for the JSON (``defects`` beside ``checks``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

KINDS = ("acceptance at position j", "residual law", "bonus law", "-1 layout", "determinism",
         "input write", "output type", "raise", "crash or hang", "support", "greedy",
         "emitted law at position j", "joint law of positions j,j+1", "tail concentration")


@dataclass(frozen=True)
class VerifyDefect:
    """One cause: ``kind`` (``KINDS``, with ``j`` filled in), the ``check`` that showed it, the
    smallest ``recipe`` that did, the ``law`` it was judged under, evidence and REPRO."""

    kind: str
    check: str
    law: str
    recipe: str | None
    detail: str
    repro: str | None
    evidence: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class VerifyDiagnosis:
    defects: tuple
    token_findings: tuple = ()

    def summary(self) -> str:
        lines = [f"defects ({len(self.defects)}, by cause):"]
        for d in self.defects:
            lines += [f"  {d.kind}  [{d.law} law, {d.check}] on {d.recipe or '-'}", f"    {d.detail[:240]}"]
            if d.repro:
                lines.append(f"    {d.repro}")
        if self.token_findings:
            lines.append("the token-level law, judged to say why (a lead for a token-level sampler):")
            lines += [f"  {d.kind}  [{d.check}] {d.detail[:200]}" for d in self.token_findings]
        return "\n".join(lines)

    def beside_checks(self) -> dict:
        return {"defects": [d.to_json() for d in self.defects],
                "diagnosis": {"op": "verify", "token_findings": [d.to_json() for d in self.token_findings]}}


def defects_of(verdict) -> tuple:
    """One defect per cause among the failed checks of ``verdict``."""
    by_kind: dict = {}
    for c in verdict.failed:
        if c.evidence is None:                   # "nothing checked" (an earlier failure hid it): no cause
            continue
        ev = dict(c.evidence)
        kind = ev.pop("cause", None) or c.check
        if kind not in by_kind:
            by_kind[kind] = VerifyDefect(kind, c.check, verdict.law, c.recipe, c.detail, c.repro,
                                         {k: v for k, v in ev.items() if k in _SMALL_EVIDENCE})
    return tuple(by_kind.values())


_SMALL_EVIDENCE = ("call", "row", "group", "problem", "position", "trials", "successes", "alpha", "p_value")


def diagnose(verdict, token_verdict=None) -> VerifyDiagnosis:
    """The defects of ``verdict``; ``token_verdict`` (the token law on the same verifier) adds
    its causes as findings."""
    extra = defects_of(token_verdict) if token_verdict is not None and not token_verdict.passed else ()
    return VerifyDiagnosis(defects_of(verdict), extra)
