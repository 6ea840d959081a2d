"""The pre-merge gate: one verdict on a candidate, with the evidence a reviewer needs.

Plan
----
1. Load the candidate (an unloadable spec is a usage error, exit 2, before any work).
2. ``properties``: run the property suite of ``properties/`` against the candidate through
   pytest in a subprocess (so the gate and ``pytest --equiv-candidate`` are one source of truth),
   and read the per-test JSON the plugin writes. Each property is one check.
3. ``tolerance``: ``equiv.compare`` on every input family at V = 129280 (one check per family x
   dtype), each candidate call under a per-call time-out.
4. ``mtp``: the speculative-decoding harness, candidate against ``softmax_topk`` on the same
   seeds, under the default consumers: the candidate must be lossless and equivalent in accept
   length.
Budgets: ``quick`` (a pull request: seconds) and ``full`` (nightly: more examples, seeds, dtypes).
The result is a frozen ``GateResult`` with ``to_json()``, ``to_junit()`` and ``summary()``.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

from equiv.validation import check_choice, check_choices, check_float, check_int

BUDGETS = {
    # families x dtypes of the tolerance stage; rows per recipe; seeds per recipe; pytest budget
    "quick": {"dtypes": ("float32", "bfloat16"), "batch": 4, "seeds": 1, "mtp_timeout": 300,
              "properties_timeout": 300},
    "full": {"dtypes": ("float32", "bfloat16", "float16"), "batch": 16, "seeds": 3, "mtp_timeout": 3600,
             "properties_timeout": 3600},
}


_STAGE_PREFIX = {"properties": "property", "tolerance": "tolerance", "mtp": "mtp"}
OPS = ("draft_topk", "verify")


@dataclass(frozen=True)
class GateCheck:
    name: str
    passed: bool
    detail: str
    counterexample: str | None = None
    repro: str | None = None
    duration_s: float = 0.0

    def to_json(self) -> dict:
        d = asdict(self)
        if self.passed:
            d.pop("counterexample")
            d.pop("repro")
        return d


@dataclass(frozen=True)
class GateResult:
    candidate: str
    passed: bool
    checks: tuple
    k: int
    device: str
    dtypes: tuple
    budget: str
    seed: int
    duration_s: float
    stages: dict = field(default_factory=dict)
    op: str = "draft_topk"

    @property
    def failed(self) -> list[GateCheck]:
        return [c for c in self.checks if not c.passed]

    def to_json(self) -> dict:
        return {"op": self.op, "candidate": self.candidate, "passed": self.passed, "k": self.k, "device": self.device,
                "dtypes": list(self.dtypes), "budget": self.budget, "seed": self.seed,
                "duration_s": round(self.duration_s, 3), "stages": self.stages,
                "checks": [c.to_json() for c in self.checks]}

    def summary(self, shown_per_stage: int = 2) -> str:
        """Compact verdict: a line per stage, then the first failures of each with evidence."""
        verdict = "PASS" if self.passed else "FAIL"
        what = (f"k={self.k}, {self.device}, {'/'.join(self.dtypes)}" if self.op == "draft_topk"
                else f"op {self.op}, {self.device}")
        lines = [f"equiv gate: {self.candidate} ({what}, budget {self.budget}, seed {self.seed}): "
                 f"{verdict} in {self.duration_s:.1f} s"]
        for stage, (n_pass, n_all) in self.stages.items():
            prefix = _STAGE_PREFIX.get(stage, stage)
            failed = [c for c in self.failed if c.name.split(":")[0] in (prefix, stage)]
            status = "pass" if n_pass == n_all else "FAIL"
            line = f"  {status:<4} {stage:<11} {n_pass}/{n_all} checks passed"
            if failed:
                names = [c.name.partition(":")[2] or c.name for c in failed]
                more = f", +{len(names) - 6} more" if len(names) > 6 else ""
                line += f"; failing: {', '.join(names[:6])}{more}"
            lines.append(line)
            for c in failed[:shown_per_stage]:
                lines.append(f"       {c.name}: {c.detail[:240]}")
                if c.counterexample:
                    lines += ["         " + x for x in c.counterexample.strip().splitlines()[:6]]
                if c.repro:
                    lines += ["         " + x for x in c.repro.strip().splitlines()]
        return "\n".join(lines)

    def to_junit(self) -> str:
        from equiv.junit import junit_xml

        return junit_xml(self)


def _timed(fn, *args, **kwargs):
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def property_checks(spec: str, *, k: int, device: str, dtypes, budget: str, seed: int,
                    timeout: float, op: str = "draft_topk", select: str | None = None) -> list[GateCheck]:
    """Run ``pytest --pyargs equiv.properties`` on the candidate and turn each test into a check."""
    with tempfile.TemporaryDirectory(prefix="equiv-gate-") as tmp:
        report = os.path.join(tmp, "properties.json")
        cmd = [sys.executable, "-m", "pytest", "--pyargs", "equiv.properties", "-q", "-p", "no:cacheprovider",
               f"--equiv-candidate={spec}", f"--equiv-device={device}", f"--equiv-budget={budget}",
               f"--equiv-report-json={report}", f"--hypothesis-seed={seed}"]
        cmd += [f"--equiv-k={k}", f"--equiv-dtype={','.join(dtypes)}"] if op == "draft_topk" else [f"--equiv-op={op}"]
        cmd += ["-k", select] if select else []
        env = dict(os.environ, HYPOTHESIS_PROFILE="ci" if budget == "quick" else "nightly")
        repro = ("REPRO: HYPOTHESIS_PROFILE=" + env["HYPOTHESIS_PROFILE"] + " python -m pytest "
                 + shlex.join(cmd[4:]).replace(f" --equiv-report-json={report}", ""))
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                  cwd=tmp)
        except subprocess.TimeoutExpired:
            return [GateCheck("properties", False, f"the property suite did not finish within {timeout:g} s "
                                                   f"(a hanging candidate?)", repro=repro)]
        if proc.returncode == 5:
            return [GateCheck("properties", False, "the property suite collected no tests", repro=repro)]
        try:
            with open(report) as f:
                tests = json.load(f)
        except (OSError, ValueError):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            return [GateCheck("properties", False, f"pytest exited {proc.returncode} without a report",
                              counterexample=tail, repro=repro)]
    checks = []
    for t in tests.get("tests", tests) if isinstance(tests, dict) else tests:
        outcome = t.get("outcome")
        if outcome == "skipped":
            continue
        name = "property:" + (t.get("property") or t.get("nodeid", "?").split("::")[-1])
        passed = outcome == "passed"
        detail = "held" if passed else (t.get("message") or outcome or "failed").strip().splitlines()[0][:300]
        checks.append(GateCheck(name, passed, detail, counterexample=None if passed else t.get("counterexample"),
                                repro=None if passed else (t.get("repro") or repro),
                                duration_s=float(t.get("duration") or 0.0)))
    if not checks:
        checks.append(GateCheck("properties", False, "every property test was skipped", repro=repro))
    return checks


def tolerance_checks(spec: str, *, k: int, device: str, dtypes, batch: int, seeds: int, seed: int,
                     vocab: int, timeout: float) -> list[GateCheck]:
    """``compare`` on every input family x dtype; the first failing recipe is the counterexample."""
    from equiv.candidate import load_candidate
    from equiv.compare import compare
    from equiv.inputs import FAMILIES, Recipe

    cand = load_candidate(spec)
    checks = []
    hung = False
    for dtype in dtypes:
        for family in FAMILIES:
            name = f"tolerance:{family}:{dtype}"
            if hung:
                checks.append(GateCheck(name, False, "not run: an earlier call hung"))
                continue
            t0 = time.perf_counter()
            worst = None
            for s in range(seed, seed + seeds):
                recipe = Recipe(family=family, seed=s, batch=batch, vocab=vocab, dtype=dtype)
                res = compare(cand, recipe.build(device), k=k, recipe=recipe, name=spec, timeout=timeout)
                if not res.passed:
                    worst = res
                    break
            dt = time.perf_counter() - t0
            if worst is None:
                checks.append(GateCheck(name, True, f"{seeds} recipe(s) within tolerance", duration_s=dt))
                continue
            failed = worst.failed_checks
            detail = "; ".join(f"{c.name}: {c.detail}" for c in failed)[:400]
            hung = "CallTimeout" in detail
            checks.append(GateCheck(name, False, detail, counterexample=f"recipe {worst.recipe}, "
                                    f"worst row {worst.worst_row}", repro=worst.repro, duration_s=dt))
    return checks


def mtp_checks(spec: str, *, device: str, seed: int, vocab: int, timeout: float) -> list[GateCheck]:
    """The MTP harness (quick budget): under each consumer the candidate must be lossless,
    equivalent to softmax_topk in accept length, and emit no invalid output. The gate judges a
    candidate strictly: the harness's ledger of accepted failures of built-in paths does not apply."""
    from equiv.mtp import run_mtp
    from equiv.timeouts import call_with_timeout

    t0 = time.perf_counter()
    try:
        run = call_with_timeout(lambda: run_mtp(paths=[spec], budget="quick", device=device, seed=seed,
                                                vocab=vocab), (), timeout)
    except Exception as exc:                     # a crash or hang of the candidate inside decoding
        return [GateCheck("mtp", False, f"the MTP harness stopped: {type(exc).__name__}: {exc}"[:400],
                          duration_s=time.perf_counter() - t0)]
    dt = (time.perf_counter() - t0) / max(len(run.records), 1)
    checks = []
    for r in run.records:
        if not r.applicable:
            continue
        eq = r.equivalence.to_json() if r.equivalence is not None else {}
        al = f"accept length {r.accept_length:.3f}" if r.accept_length is not None else "no metrics"
        diff = eq.get("mean_difference")
        detail = al + (f" (difference vs softmax_topk {diff:+.3f})" if isinstance(diff, (int, float)) else "")
        if r.passed:
            checks.append(GateCheck(f"mtp:{r.consumer}", True, detail + "; lossless, equivalent", duration_s=dt))
        else:
            why = ", ".join(r.failed_checks) + (f": {r.error}" if r.error else "")
            checks.append(GateCheck(f"mtp:{r.consumer}", False, f"{why}; {detail}"[:400],
                                    counterexample=None, duration_s=dt,
                                    repro=r.repro if r.repro.startswith("REPRO:") else "REPRO: " + r.repro))
    return checks or [GateCheck("mtp", False, "no consumer was applicable to the candidate")]


def run_gate(spec: str, *, k: int = 1, device: str = "auto", dtypes=None, budget: str = "quick",
             seed: int = 0, vocab: int = 129280, timeout: float = 60.0,
             stages=None, op: str = "draft_topk") -> GateResult:
    """The gate of ``op``: the draft top-k here; ``verify`` is ``equiv.ops.verify.gate``'s."""
    if check_choice("op", op, OPS) == "verify":
        from equiv.ops.verify.gate import DEFAULT_STAGES, run_verify_gate

        return run_verify_gate(spec, device=device, budget=budget, seed=seed, timeout=timeout,
                               stages=stages or DEFAULT_STAGES)
    stages = stages or ("properties", "tolerance", "mtp")
    from equiv.candidate import load_candidate
    from equiv.devices import resolve_device
    from equiv.inputs import DTYPES

    budget = check_choice("budget", budget, BUDGETS)
    plan = BUDGETS[budget]
    k = check_int("k", k, min_value=1, max_value=64)
    seed = check_int("seed", seed, min_value=0)
    vocab = check_int("vocab", vocab, min_value=k)
    timeout = check_float("timeout", timeout, min_value=0.0, exclusive_min=True)
    dtypes = tuple(check_choices("dtype", dtypes, DTYPES)) if dtypes else plan["dtypes"]
    device = resolve_device(device)
    stages = check_choices("stages", stages, ("properties", "tolerance", "mtp"))
    cand = load_candidate(spec)                  # CandidateLoadError -> exit 2, before any work
    spec = cand.spec
    t0 = time.perf_counter()
    checks: list[GateCheck] = []
    counts = {}
    if "properties" in stages:
        got = property_checks(spec, k=k, device=device, dtypes=dtypes, budget=budget, seed=seed,
                              timeout=plan["properties_timeout"])
        checks += got
        counts["properties"] = (sum(c.passed for c in got), len(got))
    if "tolerance" in stages:
        got = tolerance_checks(spec, k=k, device=device, dtypes=dtypes, batch=plan["batch"],
                               seeds=plan["seeds"], seed=seed, vocab=vocab, timeout=timeout)
        checks += got
        counts["tolerance"] = (sum(c.passed for c in got), len(got))
    if "mtp" in stages and k == 1:
        hung = any("CallTimeout" in c.detail or "earlier call hung" in c.detail for c in checks)
        got = [GateCheck("mtp", False, "not run: the candidate hung in an earlier stage")] if hung else \
            mtp_checks(spec, device=device, seed=seed, vocab=vocab, timeout=plan["mtp_timeout"])
        checks += got
        counts["mtp"] = (sum(c.passed for c in got), len(got))
    return GateResult(candidate=spec, passed=all(c.passed for c in checks) and bool(checks),
                      checks=tuple(checks), k=k, device=device, dtypes=tuple(dtypes), budget=budget,
                      seed=seed, duration_s=time.perf_counter() - t0, stages=counts)
