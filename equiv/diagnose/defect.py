"""What diagnosis returns: ``Defect`` (one cause, its smallest trigger and evidence) and
``Diagnosis`` (the defects behind a run's failing checks), frozen and JSON-ready.

Data only: ``core`` finds the defects, ``render`` writes them for people.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Defect:
    """One cause of failure: its kind, the smallest input that shows it, the numbers, the
    failing checks it explains and a command that replays it."""

    kind: str
    title: str
    explanation: str
    trigger: str
    evidence: str
    checks: tuple
    repro: str
    affects: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "title": self.title, "explanation": self.explanation,
                "trigger": self.trigger, "evidence": self.evidence, "checks": list(self.checks),
                "repro": self.repro, "affects": self.affects}


@dataclass(frozen=True)
class Diagnosis:
    """The defects behind a run's failing checks (``defects`` is empty when nothing failed)."""

    candidate: str
    defects: tuple = ()
    unexplained: tuple = ()          # failing checks no defect accounts for
    tolerance_edge: tuple = ()       # failing checks no worse than softmax_topk on the same input
    by_likeness: tuple = ()          # failing checks attributed by likeness to re-run ones, not re-run
    not_diagnosed: tuple = ()        # failing checks left when the deadline passed
    calls: int = 0
    duration_s: float = 0.0

    def to_json(self) -> dict:
        return {"defects": [d.to_json() for d in self.defects], "unexplained": list(self.unexplained),
                "tolerance_edge": list(self.tolerance_edge), "by_likeness": list(self.by_likeness),
                "not_diagnosed": list(self.not_diagnosed), "calls": self.calls,
                "duration_s": round(self.duration_s, 3)}

    def beside_checks(self) -> dict:
        """The keys a run's JSON carries next to its checks: ``defects`` and ``diagnosis``."""
        doc = self.to_json()
        return {"defects": doc.pop("defects"), "diagnosis": doc}

    def summary(self) -> str:
        from equiv.diagnose.render import console_block   # render does not import this module

        return console_block(self)
