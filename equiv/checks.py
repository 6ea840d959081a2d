"""Judgments as data, one vocabulary for every operation: ``Check``, ``Stage``, ``Defect``, ``Diagnosis``.

``Check`` is one judgment of a verdict (a gate stage's test, a tolerance recipe, an MTP
consumer, a verifier's statistical test): the ``stage`` it belongs to, its ``name`` (the label
reports show, unique in a verdict), its ``subject`` (what it judged: a property, a family x dtype,
a consumer, a law), pass or fail, the evidence as text for people, and as data for diagnosis:
``inputs`` (the failing input as an object: a recipe), ``evidence`` (the op's typed numbers),
``outcome`` (how the candidate's call ended when it did not answer, the ``CallOutcome.kind`` of
``equiv.run``), ``parts`` and ``cause``, so that no reader has to parse the wording or split the
name. ``Stage`` is one stage of a gate run, with what ran. ``NamedChecks`` is a tuple of check
objects (anything with a ``.name``); ``in`` accepts a name as well as a check,
``checks["value"]`` returns the check of that name, ``.names`` lists them.

``Defect`` is one cause of failure (its ``cause``, where it acts, the smallest trigger, evidence,
the failing checks it explains and a ``REPRO:`` line); ``Diagnosis`` the defects behind a run's
failing checks, with what no defect explains listed beside them, never hidden. Every op's
diagnosis returns these; ``Diagnosis.summary()`` and ``to_json()`` print them the same way.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace


class NamedChecks(tuple):
    @property
    def names(self) -> tuple:
        return tuple(c.name for c in self)

    def __contains__(self, item) -> bool:
        if isinstance(item, str):
            return item in self.names
        return tuple.__contains__(self, item)

    def __getitem__(self, key):
        if isinstance(key, str):
            for c in self:
                if c.name == key:
                    return c
            raise KeyError(f"no check named {key!r} here; the names are {', '.join(self.names) or 'none'}")
        return tuple.__getitem__(self, key)


@dataclass(frozen=True)
class Check:
    stage: str                       # the gate stage (or ``load``, ``check``) it belongs to
    name: str                        # its label, unique in a verdict
    passed: bool
    detail: str
    subject: str | None = None       # what it judged (a property, family:dtype, consumer, law check)
    inputs: object = None            # the failing input as an object (a recipe), for diagnosis
    evidence: dict | None = None     # the op's typed evidence (numbers, positions, groups)
    counterexample: str | None = None
    repro: str | None = None
    duration_s: float = 0.0
    outcome: str | None = None       # the CallOutcome.kind of a call that did not answer (timeout, exit, ...)
    recipe: str | None = None        # the input that failed, as a recipe (a tolerance check's)
    parts: tuple = ()                # the comparison's failed stages (contract, index, value, ...)
    cause: str | None = None         # what broke the contract: format, oov or the CallOutcome.kind

    def to_json(self) -> dict:
        d = asdict(self)
        d.pop("inputs")                          # an object; ``recipe`` is its text
        for key in ("outcome", "recipe", "parts", "cause", "subject", "evidence"):
            if not d[key]:
                d.pop(key)
        if "parts" in d:
            d["parts"] = list(d["parts"])
        if self.passed:
            d.pop("counterexample")
            d.pop("repro")
        return d


@dataclass(frozen=True)
class Stage:
    """One stage of a gate run: ``status`` is ``pass``, ``FAIL``, ``not applicable`` or ``not run``;
    ``ran`` says what ran (calls, examples, shapes, dtypes, k), ``why`` the reason when it did not."""

    name: str
    status: str
    passed: int = 0
    total: int = 0
    why: str = ""
    ran: dict = field(default_factory=dict)
    seconds: float = 0.0                        # its wall time (where a slow gate spends it)
    memory: dict = field(default_factory=dict)  # its peak GPU and host bytes per process (equiv.memory)

    @property
    def effective(self) -> bool:
        return self.status in ("pass", "FAIL") and self.total > 0

    def to_json(self) -> dict:
        return asdict(self)


def stage_of(name: str, checks: list[Check], ran: dict | None = None, why: str = "") -> Stage:
    n_pass = sum(c.passed for c in checks)
    return Stage(name, "pass" if n_pass == len(checks) else "FAIL", n_pass, len(checks), why, ran or {})


@dataclass(frozen=True)
class Defect:
    """One cause of failure: ``cause`` (the op's taxonomy name), its ``title`` and one-line
    ``explanation``, ``where`` it acts (tokens, probabilities, a position, the process), the
    smallest ``trigger`` that shows it, the ``evidence`` for people and as ``data``, the failing
    ``checks`` it explains and the ``repro`` line that replays it."""

    cause: str
    title: str
    explanation: str
    where: str
    trigger: str
    evidence: str
    checks: tuple
    repro: str
    data: dict | None = None

    @property
    def kind(self) -> str:
        return self.cause

    def to_json(self) -> dict:
        return {"cause": self.cause, "kind": self.cause, "title": self.title, "explanation": self.explanation,
                "where": self.where, "trigger": self.trigger, "evidence": self.evidence,
                "checks": list(self.checks), "repro": self.repro, **({"data": self.data} if self.data else {})}


def _some(names, shown: int = 8) -> str:
    more = f", +{len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


@dataclass(frozen=True)
class Diagnosis:
    """The defects behind a run's failing checks (``defects`` is empty when nothing failed), and
    the failing checks no defect accounts for, by reason; ``findings`` are leads that are not a
    verdict (a lossless verifier's token-level law, asked to say why)."""

    candidate: str
    defects: tuple = ()
    unexplained: tuple = ()          # failing checks no defect accounts for
    tolerance_edge: tuple = ()       # failing checks no worse than the baseline on the same input
    by_likeness: tuple = ()          # failing checks attributed by likeness to re-run ones, not re-run
    not_diagnosed: tuple = ()        # failing checks left when the deadline passed
    calls: int = 0
    duration_s: float = 0.0
    findings: tuple = ()             # Defects of a second judgment that explain why (leads)
    findings_title: str = ""

    def to_json(self) -> dict:
        return {"defects": [d.to_json() for d in self.defects], "unexplained": list(self.unexplained),
                "tolerance_edge": list(self.tolerance_edge), "by_likeness": list(self.by_likeness),
                "not_diagnosed": list(self.not_diagnosed), "calls": self.calls,
                "duration_s": round(self.duration_s, 3), "findings": [d.to_json() for d in self.findings]}

    def beside_checks(self) -> dict:
        """The keys a run's JSON carries next to its checks: ``defects`` and ``diagnosis``."""
        doc = self.to_json()
        return {"defects": doc.pop("defects"), "diagnosis": doc}

    def summary(self) -> str:
        n = len(self.defects)
        lines = [f"{n} defect{'s' if n != 1 else ''} (diagnosis: {self.calls} calls, {self.duration_s:.1f} s)"]
        for i, d in enumerate(self.defects, 1):
            lines += [f"  [{i}] {d.title} ({d.cause}, changes {d.where}): {d.explanation}",
                      f"      trigger:  {d.trigger}",
                      f"      evidence: {d.evidence}",
                      f"      explains: {_some(list(d.checks))}"]
            if d.repro:
                lines.append(f"      {d.repro}")
        if self.unexplained:
            lines.append(f"  failing checks no defect explains: {', '.join(self.unexplained)}")
        if self.tolerance_edge:
            lines.append(f"  failing checks at the tolerance's edge (values off, but no worse than the baseline "
                         f"on the same input): {', '.join(self.tolerance_edge)}")
        if self.by_likeness:
            lines.append(f"  attributed by likeness to re-run checks (not re-run): {_some(list(self.by_likeness))}")
        if self.not_diagnosed:
            lines.append(f"  not diagnosed (time budget spent): {', '.join(self.not_diagnosed)}")
        if self.findings:
            lines.append(self.findings_title or "further findings:")
            lines += [f"  {d.cause}  [{', '.join(d.checks)}] {d.evidence[:200]}" for d in self.findings]
        return "\n".join(lines)

    def junit_cases(self) -> list:
        """(name, message, body) of one failing JUnit test case per defect."""
        return [(f"{i}:{d.cause}", f"{d.title}: {d.evidence}"[:1000],
                 "\n".join([d.explanation, f"trigger: {d.trigger}", f"explains: {', '.join(d.checks)}", d.repro]))
                for i, d in enumerate(self.defects, 1)]


# A call that did not answer or broke the contract, as a verifier op's property stage records it
# (``Check.outcome``: the runner's CallOutcome.kind; ``Check.cause``: what the probe saw).
_CALL_TITLES = {"exit": "the process exited during a call", "timeout": "a call did not return (hang)",
                "signal": "the process was killed by a signal during a call",
                "interrupt": "a call was interrupted", "not_called": "the candidate could not be called",
                "raised": "a call raised", "raise": "a call raised",
                "outputs": "a call returned the wrong type or shape",
                "output type": "a call returned the wrong type or shape",
                "input": "a call wrote into its inputs", "input write": "a call wrote into its inputs",
                "crash or hang": "the process exited, was killed or hung during a call"}


def with_call_defects(diagnosis, checks, candidate: str):
    """``diagnosis`` (or a new one) with one ``Defect`` per kind of failed call among ``checks``
    that no defect names yet: a verifier that exits, hangs or raises at some shapes is named by
    cause even when only the property stage saw it. Returns ``diagnosis`` itself when nothing
    is added."""
    have = {d.cause for d in (diagnosis.defects if diagnosis is not None else ())}
    added, seen = [], set()
    for c in checks:
        kind = c.outcome or c.cause
        if c.passed or kind not in _CALL_TITLES or kind in have or kind in seen:
            continue
        seen.add(kind)
        added.append(Defect(kind, _CALL_TITLES[kind], c.detail[:240], "the process" if c.outcome else "the call",
                            c.recipe or c.counterexample or c.subject or c.name, c.detail[:300], (c.name,),
                            c.repro or "", {"stage": c.stage}))
    if not added:
        return diagnosis
    if diagnosis is None:
        return Diagnosis(candidate, tuple(added))
    return replace(diagnosis, defects=tuple(diagnosis.defects) + tuple(added))
