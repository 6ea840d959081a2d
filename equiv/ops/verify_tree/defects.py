"""Failures of a tree verifier turned into defects by cause, each with its smallest trigger and REPRO.

Plan. The judge records, with every failed check, the *cause* it established from data (never
from message text): calls.py says whether a call raised, returned the wrong type or wrote into its
inputs; the judge whether the path / token layout broke, the same seed gave another output, an
*accepted child* or the *drawn token* had target probability 0, greedy decoding's text was left
by a wrong child, a wrong drawn token or an early stop, and at which position the text's law
broke (and whether it was the residual score: the law drawn from after rejected children).
``diagnose(verdict)`` keeps one ``TreeDefect`` per cause with the smallest recipe that showed it,
and names the bug classes that cause points to (``LEADS``, the public record of tree verifiers).
``TreeDiagnosis`` has the two methods ``equiv.gate.GateResult`` calls: ``summary()`` and
``beside_checks()``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

LEADS = {
    "accepted a child of target probability 0": "a zero coin accepting probability 0, or an acceptance threshold below 1",
    "drew a token of target probability 0": "a fallback token of probability 0 (an unnormalised or empty residual)",
    "greedy: accepted a wrong child": "an acceptance threshold below 1 or a zero coin",
    "greedy: stopped early": "a wrong logits row (the parent's or a sibling's) or a coin compared the wrong way",
    "greedy: wrong drawn token": "the drawn token read from the wrong row",
    "residual law": "the residual: zeroing the rejected token instead of subtracting q, a reused coin, or "
                    "duplicate siblings counted twice",
    "emitted law at position 0": "the acceptance rule at the root (thresholds, greedy at temperature > 0, a reused coin)",
    "emitted law past the root": "a wrong logits row for deeper nodes (the parent's or a sibling's), or a path that "
                                 "was not verified as a chain (independent acceptance)",
    "text law (exhaustive)": "the law of the whole text (any of the above, seen cell by cell at small V)",
}


@dataclass(frozen=True)
class TreeDefect:
    kind: str
    check: str
    recipe: str | None
    detail: str
    repro: str | None
    lead: str | None = None
    evidence: dict | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class TreeDiagnosis:
    defects: tuple

    def summary(self) -> str:
        lines = [f"defects ({len(self.defects)}, by cause):"]
        for d in self.defects:
            lines += [f"  {d.kind}  [{d.check}] on {d.recipe or '-'}", f"    {d.detail[:240]}"]
            if d.lead:
                lines.append(f"    likely: {d.lead}")
            if d.repro:
                lines.append(f"    {d.repro}")
        return "\n".join(lines)

    def beside_checks(self) -> dict:
        return {"defects": [d.to_json() for d in self.defects], "diagnosis": {"op": "verify_tree"}}


_SMALL = ("call", "row", "group", "position", "recipe")


def _lead(kind: str) -> str | None:
    if kind in LEADS:
        return LEADS[kind]
    if kind.startswith("emitted law at position"):
        return LEADS["emitted law past the root"]
    if kind.startswith("joint law"):
        return "positions tied together: a coin reused across levels"
    return None


def diagnose(verdict) -> TreeDiagnosis:
    by_kind: dict = {}
    for c in verdict.failed:
        if c.evidence is None:
            continue
        ev = dict(c.evidence)
        kind = ev.pop("cause", None) or c.check
        if kind not in by_kind:
            by_kind[kind] = TreeDefect(kind, c.check, c.recipe, c.detail, c.repro, _lead(kind),
                                       {k: v for k, v in ev.items() if k in _SMALL})
    return TreeDiagnosis(tuple(by_kind.values()))
