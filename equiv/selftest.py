"""``equiv selftest``: does the toolkit catch what it must, and only that?

Plan
----
1. Kill rate: every mutant of the operation's zoo (``Op.mutants``) goes through the gate (the
   op's ``selftest_stages``, quick budget). A mutant the gate passes *survived*: the suite is
   blind to its bug class.
2. False-positive rate: every correct built-in (``Op.correct_paths``) is judged under ``seeds``
   different seeds (fresh inputs each time) by the op's ``false_positive_run`` (for the draft
   top-k the gate's tolerance stage on every input family; by default the gate's
   ``selftest_stages``). Any failure is a false positive: a bound or the reference is wrong.
The result is a frozen ``SelftestResult``; ``passed`` means 100% kills and 0 false positives.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from equiv.gate import run_gate
from equiv.ops import DEFAULT_OP, get_op
from equiv.options import DEFAULT_VOCAB


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


def run_mutant(op, name: str, mutant, *, device: str, vocab: int, timeout: float) -> MutantOutcome:
    t0 = time.perf_counter()
    res = run_gate(f"{op.mutants_module}:{name}", op=op.name, k=getattr(mutant, "k", 1), device=device,
                   budget="quick", vocab=vocab, timeout=timeout, stages=op.selftest_stages or op.stages)
    return MutantOutcome(name, getattr(mutant, "bug_class", ""), not res.passed,
                         tuple(c.name for c in res.failed), time.perf_counter() - t0)


def gate_run(op, path: str, *, seed: int, device: str, vocab: int, timeout: float) -> list:
    """The default false-positive run: the gate's ``selftest_stages`` on ``path`` at ``seed``;
    ``(check name, detail)`` of each failing check."""
    res = run_gate(path, op=op.name, device=device, budget="quick", seed=seed, vocab=vocab, timeout=timeout,
                   stages=op.selftest_stages or op.stages)
    return [(c.name, c.detail) for c in res.failed]


def run_correct(op, path: str, *, seeds: int, device: str, vocab: int, timeout: float) -> FalsePositiveOutcome:
    run = op.false_positive_run or (lambda p, **kw: gate_run(op, p, **kw))
    failures = []
    for seed in range(seeds):
        failures += [(seed, name, detail) for name, detail in
                     run(path, seed=seed, device=device, vocab=vocab, timeout=timeout)]
    return FalsePositiveOutcome(path, seeds, tuple(failures))


def run_selftest(*, op: str = DEFAULT_OP, device: str = "cpu", seeds: int = 20, vocab: int = DEFAULT_VOCAB,
                 only=None, timeout: float = 120.0, workers: int = 2, progress=None) -> SelftestResult:
    the_op = get_op(op)
    t0 = time.perf_counter()
    registry = the_op.mutants()
    names = [n for n in registry if not only or n in only]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:   # each gate runs pytest in a subprocess
        futures = [pool.submit(run_mutant, the_op, n, registry[n], device=device, vocab=vocab, timeout=timeout)
                   for n in names]
        outcomes = []
        for i, f in enumerate(futures):
            outcomes.append(f.result())
            if progress:
                progress(i + 1, len(futures), outcomes[-1].name)
    correct_names = the_op.correct_paths() if the_op.correct_paths else the_op.builtin_names()
    correct = tuple(run_correct(the_op, p, seeds=seeds, device=device, vocab=vocab, timeout=timeout)
                    for p in correct_names)
    return SelftestResult(tuple(outcomes), correct, time.perf_counter() - t0)
