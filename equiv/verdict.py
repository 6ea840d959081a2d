"""A gate's verdict: ``GateResult``, the one result every operation's gate returns.

Plan. A gate run is a tuple of ``Check`` objects grouped into ``Stage`` objects, a verdict, what
ran (calls, coverage per dimension) and the diagnosis (defects by cause) behind its failures.
``summary()`` prints it for people, ``to_json()`` for machines, ``to_junit()`` for CI. Nothing
here knows an operation: an op fills the fields, and ``finish_stages`` decides the verdict the
same way for all (PASS only when some stage ran an effective check and every check passed).

Three verdicts (``VERDICTS``), each with its exit code (``EXIT_CODES``): ``pass``, ``fail`` (a
defect of the candidate) and ``not judged`` (the machine or the harness failed: ``not_judged``
holds the lines that say how, ``equiv.run.faults``). ``not_judged_result`` turns a result into
the third: never PASS, never a defect of the candidate (its diagnosis is dropped), its failed
checks reported as errors, not failures.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from equiv.checks import NamedChecks, Stage
from equiv.junit import junit_xml

VERDICTS = ("pass", "fail", "not judged")
EXIT_CODES = {"pass": 0, "fail": 1, "not judged": 3}
NOT_JUDGED_NOTE = ("this is not a verdict on the candidate: the machine or the harness failed; "
                   "re-run when the device is free (the failed checks below are not its defects)")


@dataclass(frozen=True)
class GateResult:
    candidate: str
    passed: bool
    checks: tuple
    k: tuple
    device: str
    dtypes: tuple
    budget: str
    seed: int
    duration_s: float
    stages: tuple = ()
    calls: int = 0
    op: str = ""
    diagnosis: object = None                      # equiv.checks.Diagnosis: the defects behind the failures
    coverage: dict = field(default_factory=dict)  # per dimension, the classes covered (the op's space)
    coverage_lines: tuple = ()                    # the same as a table for the console (the op writes it)
    takes_k: bool = False                         # judged at k values and dtypes (the summary names them)
    not_judged: tuple = ()                        # why it was not judged (lines); empty: judged

    @property
    def verdict(self) -> str:
        """``pass``, ``fail`` or ``not judged`` (module docstring)."""
        return "not judged" if self.not_judged else "pass" if self.passed else "fail"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    @property
    def failed(self) -> NamedChecks:
        """The failed checks; ``"tolerance:zipf:float32" in result.failed`` tests by name."""
        return NamedChecks(c for c in self.checks if not c.passed)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict:
        return {"op": self.op, "candidate": self.candidate, "verdict": self.verdict, "passed": self.passed,
                **({"not_judged": list(self.not_judged)} if self.not_judged else {}), "k": list(self.k),
                "device": self.device,
                "dtypes": list(self.dtypes), "budget": self.budget, "seed": self.seed,
                "duration_s": round(self.duration_s, 3), "calls": self.calls,
                "stages": {s.name: s.to_json() for s in self.stages},
                **({"coverage": self.coverage} if self.coverage else {}),
                **(self.diagnosis.beside_checks() if self.diagnosis is not None else {"defects": []}),
                "checks": [c.to_json() for c in self.checks]}

    def summary(self, shown_per_stage: int = 2) -> str:
        """Compact verdict: a line per stage, then the first failures of each with evidence."""
        verdict = self.verdict.upper()
        ks = ",".join(map(str, self.k))
        what = (f"k={ks}, {self.device}, {'/'.join(self.dtypes)}" if self.takes_k
                else f"op {self.op}, {self.device}")
        lines = [f"equiv gate: {self.candidate} ({what}, budget {self.budget}, seed {self.seed}): "
                 f"{verdict} in {self.duration_s:.1f} s"]
        if self.not_judged:
            more = f" (+{len(self.not_judged) - 1} more)" if len(self.not_judged) > 1 else ""
            lines += [f"  NOT JUDGED: {self.not_judged[0]}{more}", f"  {NOT_JUDGED_NOTE}"]
        if self.diagnosis is not None and not self.passed:
            lines += [self.diagnosis.summary(), "checks:"]
        stage_names = {s.name for s in self.stages}
        for c in self.failed:
            if c.stage not in stage_names:
                lines.append(f"  FAIL {c.name}: {c.detail[:300]}")
        for st in self.stages:
            if st.status in ("not applicable", "not run"):
                lines.append(f"  {'n/a' if st.status == 'not applicable' else '-':<4} {st.name:<11} "
                             f"{st.status}: {st.why}")
                continue
            failed = [c for c in self.failed if c.stage == st.name]
            status = ("ERR" if self.not_judged else "FAIL") if st.status == "FAIL" else "pass"
            line = f"  {status:<4} {st.name:<11} {st.passed}/{st.total} checks passed"
            if failed:
                names = [c.subject or c.name for c in failed]
                more = f", +{len(names) - 6} more" if len(names) > 6 else ""
                line += f"; failing: {', '.join(names[:6])}{more}"
            lines.append(line)
            if st.ran.get("summary"):
                lines.append(f"       ran: {st.ran['summary']}")
            if st.why:
                lines.append(f"       note: {st.why}")
            for c in failed[:shown_per_stage]:
                lines.append(f"       {c.name}: {c.detail[:240]}")
                if c.counterexample:
                    lines += ["         " + x for x in c.counterexample.strip().splitlines()[:6]]
                if c.repro:
                    lines += ["         " + x for x in c.repro.strip().splitlines()]
        if self.coverage_lines:
            lines += ["  coverage:"] + ["    " + ln for ln in self.coverage_lines]
        if not any(st.effective for st in self.stages):
            lines.append("  nothing was checked: no stage ran an effective check, so the gate fails")
        return "\n".join(lines)

    def to_junit(self) -> str:
        return junit_xml(self)



def not_judged_result(result: GateResult, lines) -> GateResult:
    """``result`` as NOT JUDGED because of ``lines`` (module docstring); ``result`` itself when
    there are none."""
    lines = tuple(dict.fromkeys(str(x) for x in lines))
    if not lines:
        return result
    return replace(result, passed=False, not_judged=lines, diagnosis=None)


def finish_stages(done: list, asked, every, checks) -> tuple[tuple, bool]:
    """The stages of a run with those not asked listed as such, and its verdict: PASS only when
    some stage ran an effective check and every check passed ("nothing was checked" fails)."""
    done = tuple(done) + tuple(Stage(n, "not run", why="not asked (--stages)") for n in every if n not in asked)
    return done, any(st.effective for st in done) and all(c.passed for c in checks)


class CheckRun:
    """One candidate on one recipe, judged (``equiv.check``): ``passed``, ``summary()`` (with the
    defects behind a failure first), ``to_json()``, and ``result`` (the op's comparison or verdict)."""

    def __init__(self, result, diagnosis=None):
        self.result, self.diagnosis = result, diagnosis

    @property
    def passed(self) -> bool:
        return bool(self.result.passed)

    def summary(self) -> str:
        lead = self.diagnosis.summary() + "\n" if self.diagnosis is not None and self.diagnosis.defects else ""
        return lead + self.result.summary()

    def to_json(self) -> dict:
        extra = self.diagnosis.beside_checks() if self.diagnosis is not None else {}
        return {**self.result.to_json(), **extra}


@dataclass(frozen=True)
class Case:
    """One recipe of a verifier op's plan: ``calls`` seeded calls from ``seed`` on (``seeds``: then
    the first seed again, the replay, unless ``replay`` is off); ``statistical`` when its outputs
    feed the statistical tests; ``purpose`` what the plan drew it for (the op's
    ``space.PURPOSES``). ``replay=False`` is for a plan's parts between the first and the last
    (recipes that differ only in ``part``: fresh drafts of the same size and calling): the first
    and the last part's replays judge "same seed, same output" for them all (the last one sees a
    verifier that changes after some calls of one shape, as one that captures a graph after
    warm-up calls and then ignores the generator it is given), and a replay call per part had
    doubled the chain's power case on a GPU (32 parts of 4096 rows at V = 129280)."""

    recipe: object
    calls: int
    seed: int
    statistical: bool = False
    purpose: str = ""
    replay: bool = True

    @property
    def seeds(self) -> tuple:
        return tuple(range(self.seed, self.seed + self.calls)) + ((self.seed,) if self.replay else ())

    def judged(self, outputs):
        """``outputs`` (one per seed of ``seeds``) less the replay's: what the statistics read."""
        return outputs[:-1] if self.replay else outputs


class JudgeVerdict:
    """What the verdicts of the verifier ops' judges share (their fields ``checks``, ``calls``,
    ``notes``): ``passed``, ``failed`` and the body of ``summary``."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and self.calls > 0 and all(c.passed for c in self.checks)

    @property
    def failed(self) -> list:
        return [c for c in self.checks if not c.passed]

    def summary_of(self, head: str, optimum: str) -> str:
        """``head``, a line per check, the notes, the efficiency table (``efficiency``: a dict per
        statistical recipe; its optimum's column named ``optimum``), the REPRO lines."""
        lines = [head] + [f"  {c.name:<12} {'pass' if c.passed else 'FAIL':<5} {c.detail}" for c in self.checks]
        lines += [f"  note: {n}" for n in self.notes]
        if self.efficiency:
            lines.append(f"  {'efficiency':<12} {'accept length':>13} {optimum:>13} {'ratio':>6}  recipe")
            lines += [f"  {'':<12} {e['accept_length']:>13.3f} {_num(e['token_optimum'], 13)} "
                      f"{_num(e['ratio'], 6)}  {e['recipe']}" for e in self.efficiency]
        lines += [c.repro for c in self.failed if c.repro]
        return "\n".join(lines)


def _num(x, width: int) -> str:
    return f"{'-':>{width}}" if x is None else f"{x:>{width}.3f}"


class FirstFailures:
    """The first failure of each check as a judge goes through its recipes (``first``: check ->
    ``Check``): the smallest recipe showing it, or the first failure that brings its own REPRO
    line. An op's judge says how: ``judged`` (its ``Check``), ``size(recipe)``, ``seed(case,
    call)`` (the generator seed of a call) and ``repro(case)``."""

    def fail(self, check, case, found, evidence=None, repro=None, cause=None):
        old = self.first.get(check)
        if old is not None and (repro or self.size(old.recipe) <= self.size(case.recipe)):
            return
        call, row, message = found
        where = "" if row is None else f"row {row} of call {call} (seed {self.seed(case, call)}): "
        self.first[check] = self.judged(check, False, f"{where}{message}", str(case.recipe),
                                        repro or self.repro(case),
                                        {"call": call, "row": row, "cause": cause or check, **(evidence or {})})


# ---- coverage: where each class of each data dimension was judged ----------------------------------
JUDGED_WHERE = ("statistical", "exact checks only", "not reached")


def judged(stat: dict, exact: dict, universe: dict) -> dict:
    """``{dimension: {where: [class, ...]}}`` for every dimension of ``universe`` (``{dimension:
    classes}``, in order): a class reached by a statistical case is ``statistical``; one reached
    only by exact checks (contract, support, a reference comparison), ``exact checks only``; any
    other, ``not reached``. ``stat`` and ``exact`` map a dimension to the classes reached."""
    out = {}
    for dim, classes in universe.items():
        s, e = set(stat.get(dim, ())), set(exact.get(dim, ())) - set(stat.get(dim, ()))
        known = list(classes) + sorted((s | e) - set(classes), key=str)
        out[dim] = {"statistical": [c for c in known if c in s], "exact checks only": [c for c in known if c in e],
                    "not reached": [c for c in known if c not in s and c not in e]}
    return out


def judged_lines(table: dict, width: int = 0) -> list:
    """One console line a dimension of a ``judged`` table: ``statistical: .. | exact checks
    only: .. | not reached: ..``."""
    width = width or max((len(d) for d in table), default=0) + 2
    return [f"{dim:<{width}}" + " | ".join(f"{w}: {', '.join(map(str, got[w])) or 'none'}" for w in JUDGED_WHERE)
            for dim, got in table.items()]
