"""``equiv selftest``: does the toolkit catch what it must, and only that?

Plan
----
1. Kill rate: every mutant of the zoo (``equiv.ops.draft_topk.mutants``) goes through the gate (property suite
   and tolerance stages, quick budget). A mutant the gate passes *survived*: the suite is blind
   to its bug class.
2. False-positive rate: every correct built-in path goes through the gate's tolerance stage on
   every input family under ``seeds`` different seeds (fresh inputs each time). Any failure is a
   false positive: the tolerance table or the reference is wrong.
The result is a frozen ``SelftestResult``; ``passed`` means 100% kills and 0 false positives.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from equiv.report import CORRECT_PATHS


@dataclass(frozen=True)
class MutantOutcome:
    name: str
    bug_class: str
    killed: bool
    killed_by: tuple
    duration_s: float


@dataclass(frozen=True)
class FalsePositiveOutcome:
    path: str
    seeds: int
    failures: tuple          # (seed, check name, detail) of every failing run


@dataclass(frozen=True)
class SelftestResult:
    mutants: tuple
    correct: tuple
    duration_s: float

    @property
    def kill_rate(self) -> float:
        return sum(m.killed for m in self.mutants) / len(self.mutants) if self.mutants else 0.0

    @property
    def false_positives(self) -> int:
        return sum(len(c.failures) for c in self.correct)

    @property
    def runs(self) -> int:
        return sum(c.seeds for c in self.correct)

    @property
    def passed(self) -> bool:
        return bool(self.mutants) and self.kill_rate == 1.0 and self.false_positives == 0

    def to_json(self) -> dict:
        return {"passed": self.passed, "kill_rate": self.kill_rate, "false_positives": self.false_positives,
                "correct_runs": self.runs, "duration_s": round(self.duration_s, 2),
                "mutants": [m.__dict__ | {"killed_by": list(m.killed_by)} for m in self.mutants],
                "correct": [{"path": c.path, "seeds": c.seeds, "failures": [list(f) for f in c.failures]}
                            for c in self.correct]}

    def summary(self) -> str:
        lines = ["mutant                          bug class                      verdict   killed by"]
        for m in self.mutants:
            by = ", ".join(m.killed_by[:3]) + (f" (+{len(m.killed_by) - 3})" if len(m.killed_by) > 3 else "")
            lines.append(f"{m.name:<31} {m.bug_class[:30]:<30} {'killed' if m.killed else 'SURVIVED':<9} {by}")
        for c in self.correct:
            lines.append(f"correct path {c.path}: {len(c.failures)} false positives in {c.seeds} seeded runs")
            for seed, name, detail in c.failures[:3]:
                lines.append(f"    seed {seed} {name}: {detail[:200]}")
        n_killed = sum(m.killed for m in self.mutants)
        lines.append(f"kill rate {n_killed}/{len(self.mutants)} ({100 * self.kill_rate:.0f}%), "
                     f"false positives {self.false_positives}/{self.runs} runs; "
                     f"{'PASS' if self.passed else 'FAIL'} in {self.duration_s:.0f} s")
        return "\n".join(lines)


def _mutant_registry():
    from equiv.ops.draft_topk import mutants

    return mutants.MUTANTS


def run_mutant(name: str, mutant, *, device: str, vocab: int, timeout: float) -> MutantOutcome:
    from equiv.gate import run_gate

    t0 = time.perf_counter()
    res = run_gate(f"equiv.ops.draft_topk.mutants:{name}", k=getattr(mutant, "k", 1), device=device, budget="quick",
                   vocab=vocab, timeout=timeout,
                   stages=("properties", "tolerance"))
    return MutantOutcome(name, getattr(mutant, "bug_class", ""), not res.passed,
                         tuple(c.name for c in res.failed), time.perf_counter() - t0)


def run_correct(path: str, *, seeds: int, device: str, vocab: int, timeout: float) -> FalsePositiveOutcome:
    from equiv.gate import BUDGETS, tolerance_checks

    failures = []
    for seed in range(seeds):
        checks, _ = tolerance_checks(path, ks=(1,), device=device, dtypes=BUDGETS["full"]["dtypes"], batch=4,
                                     seeds=1, seed=seed, vocab=vocab, timeout=timeout)
        for c in checks:
            if not c.passed:
                failures.append((seed, c.name, c.detail))
    return FalsePositiveOutcome(path, seeds, tuple(failures))


def run_selftest(*, device: str = "cpu", seeds: int = 20, vocab: int = 129280, only=None,
                 timeout: float = 120.0, workers: int = 2, progress=None) -> SelftestResult:
    from equiv.ops.draft_topk.paths import path_names

    t0 = time.perf_counter()
    registry = _mutant_registry()
    names = [n for n in registry if not only or n in only]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:   # each gate runs pytest in a subprocess
        futures = [pool.submit(run_mutant, n, registry[n], device=device, vocab=vocab, timeout=timeout)
                   for n in names]
        outcomes = []
        for i, f in enumerate(futures):
            outcomes.append(f.result())
            if progress:
                progress(i + 1, len(futures), outcomes[-1].name)
    correct = tuple(run_correct(p, seeds=seeds, device=device, vocab=vocab, timeout=timeout)
                    for p in path_names() if p in CORRECT_PATHS)
    return SelftestResult(tuple(outcomes), correct, time.perf_counter() - t0)
