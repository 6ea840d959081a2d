"""The pre-merge gate: one verdict on a candidate, with the evidence a reviewer needs.

Plan
----
1. Resolve the candidate and start its worker (``equiv.run``): a spec that does not load is a
   usage error (exit 2) before any work; an import that exits, is killed or hangs is a failed
   ``load`` check, and no stage runs.
2. ``properties``: run the property suite of ``equiv.properties`` against the candidate through
   pytest in a subprocess (so the gate and ``pytest --equiv-candidate`` are one source of truth),
   and read the per-test JSON the plugin writes. Each property is one check; pytest's exit code
   must agree with the records (a crashed or interrupted run is a failure, never a pass). The
   subprocess is the critical path, so it starts first, once the arguments are checked and
   before this process imports torch, and runs while this process judges the next two stages;
   it is read last, and killed if this process stops first (a device or a spec that fails here
   included). Each stage's ``seconds`` is its own wall time, so the
   properties' overlap the others'.
3. ``tolerance``: ``equiv.ops.draft_topk.compare`` on every input family x dtype x k asked at V = 129280, the
   worker building each recipe on the device; at the end of the stage the inputs are checked once
   more (a late write from a thread or a stream).
4. ``mtp``: the speculative-decoding harness as a probe in the candidate's worker, candidate
   against ``softmax_topk`` on the same seeds: greedy, target-only and confidence chains at
   k = 1, tree drafting at each k > 1 asked. Nothing calls the candidate at a k not asked.
Each stage is reported as run (with what ran), not applicable (why) or not run (why); a verdict
in which no check ran fails with "nothing was checked". Only this process says PASS, after every
stage it owns finished. Budgets: ``quick`` (a pull request: seconds) and ``full`` (nightly).
The result is a frozen ``GateResult`` with ``to_json()``, ``to_junit()`` and ``summary()``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

from equiv.checks import Check, NamedChecks, Stage, stage_of
from equiv.options import DEFAULT_VOCAB
from equiv.run.timeouts import DEFAULT_TIMEOUT_S
from equiv.validation import check_choice, check_choices, check_int

BUDGETS = {
    # families x dtypes of the tolerance stage; rows per recipe; seeds per recipe; pytest budget
    # shape_elements: the coverage plan's largest B x V (2**25: [1024, 32000]; 2**28: [1024, 151936])
    "quick": {"dtypes": ("float32", "bfloat16"), "batch": 4, "seeds": 1, "mtp_timeout": 300,
              "properties_timeout": 300, "shape_elements": 2 ** 25},
    "full": {"dtypes": ("float32", "bfloat16", "float16"), "batch": 16, "seeds": 3, "mtp_timeout": 3600,
             "properties_timeout": 3600, "shape_elements": 2 ** 28},
}
STAGES = ("properties", "tolerance", "mtp")
K_ONE_CONSUMERS = ("greedy", "target_only", "confidence")


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
    op: str = "draft_topk"
    diagnosis: object = None                      # equiv.diagnose.Diagnosis: the defects behind the failures
    coverage: dict = field(default_factory=dict)  # per dimension, the classes covered (space.reach)

    @property
    def failed(self) -> NamedChecks:
        """The failed checks; ``"tolerance:zipf:float32" in result.failed`` tests by name."""
        return NamedChecks(c for c in self.checks if not c.passed)

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def to_json(self) -> dict:
        return {"op": self.op, "candidate": self.candidate, "passed": self.passed, "k": list(self.k),
                "device": self.device,
                "dtypes": list(self.dtypes), "budget": self.budget, "seed": self.seed,
                "duration_s": round(self.duration_s, 3), "calls": self.calls,
                "stages": {s.name: s.to_json() for s in self.stages},
                **({"coverage": self.coverage} if self.coverage else {}),
                **(self.diagnosis.beside_checks() if self.diagnosis is not None else {"defects": []}),
                "checks": [c.to_json() for c in self.checks]}

    def summary(self, shown_per_stage: int = 2) -> str:
        """Compact verdict: a line per stage, then the first failures of each with evidence."""
        verdict = "PASS" if self.passed else "FAIL"
        ks = ",".join(map(str, self.k))
        what = (f"k={ks}, {self.device}, {'/'.join(self.dtypes)}" if self.op == "draft_topk"
                else f"op {self.op}, {self.device}")
        lines = [f"equiv gate: {self.candidate} ({what}, budget {self.budget}, seed {self.seed}): "
                 f"{verdict} in {self.duration_s:.1f} s"]
        if self.diagnosis is not None and not self.passed:
            lines += [self.diagnosis.summary(), "checks:"]
        stage_names = {s.name for s in self.stages}
        for c in self.failed:
            if c.name.split(":")[0] not in stage_names and c.name.split(":")[0] not in _PREFIX_STAGE:
                lines.append(f"  FAIL {c.name}: {c.detail[:300]}")
        for st in self.stages:
            if st.status in ("not applicable", "not run"):
                lines.append(f"  {'n/a' if st.status == 'not applicable' else '-':<4} {st.name:<11} "
                             f"{st.status}: {st.why}")
                continue
            failed = [c for c in self.failed if _PREFIX_STAGE.get(c.name.split(":")[0]) == st.name]
            line = f"  {st.status if st.status == 'FAIL' else 'pass':<4} {st.name:<11} {st.passed}/{st.total} checks passed"
            if failed:
                names = [c.name.partition(":")[2] or c.name for c in failed]
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
        if self.coverage:
            from equiv.ops.draft_topk.space import table_lines

            lines += ["  coverage:"] + ["    " + ln for ln in table_lines(self.coverage)]
        if not any(st.effective for st in self.stages):
            lines.append("  nothing was checked: no stage ran an effective check, so the gate fails")
        return "\n".join(lines)

    def to_junit(self) -> str:
        from equiv.junit import junit_xml

        return junit_xml(self)


_PREFIX_STAGE = {"property": "properties", "properties": "properties", "tolerance": "tolerance",
                 "mtp": "mtp", "statistics": "statistics"}


def start_properties(options, *, stage_timeout: float, select: str | None = None):
    """Start the property suite under ``options`` in a subprocess (``equiv.suite_process``: the
    caller's folder, shielded from its pytest config); ``property_checks(handle)`` reads it."""
    from equiv.suite_process import start_suite

    return start_suite(options, timeout=stage_timeout, select=select)


def property_checks(handle, stage_timeout: float) -> tuple[list[Check], Stage]:
    """Wait for the started suite and turn each of its tests into a check."""
    run = handle.wait()
    repro, tail = run.repro, run.output_tail
    if run.timed_out:
        c = Check("properties", False, f"the property suite did not finish within {stage_timeout:g} s",
                  repro=repro, outcome="timeout")
        return [c], stage_of("properties", [c])
    if run.report is None:
        c = Check("properties", False, f"pytest exited {run.returncode} without a report",
                  counterexample=tail, repro=repro)
        return [c], stage_of("properties", [c])
    tests, returncode = run.report, run.returncode
    records = tests.get("tests", tests) if isinstance(tests, dict) else tests
    checks, skipped, examples = [], [], {}
    for t in records:
        outcome = t.get("outcome")
        prop = t.get("property") or t.get("nodeid", "?").split("::")[-1]
        if outcome == "skipped":
            skipped.append(f"{prop}: {(t.get('message') or 'skipped').strip().splitlines()[0][:160]}")
            continue
        name = "property:" + prop
        passed = outcome == "passed"
        examples[prop] = examples.get(prop, 0) + int(t.get("examples") or 0)
        detail = "held" if passed else (t.get("message") or outcome or "failed").strip().splitlines()[0][:300]
        checks.append(Check(name, passed, detail, counterexample=None if passed else t.get("counterexample"),
                            repro=None if passed else (t.get("repro") or repro),
                            duration_s=float(t.get("duration") or 0.0),
                            outcome=None if passed else t.get("call_kind"),
                            recipe=None if passed else t.get("recipe"),
                            parts=() if passed else tuple(t.get("parts") or ()),
                            cause=None if passed else t.get("cause")))
    failed = [c for c in checks if not c.passed]
    if returncode not in (0, 1) or (returncode == 0) == bool(failed):
        checks.append(Check("properties", False, f"pytest exited {returncode}, which its "
                            f"{len(failed)} failing record(s) do not explain (an interrupted or "
                            f"crashed run)", counterexample=tail, repro=repro))
    ran = {"tests": len(checks), "skipped": skipped, "examples": examples,
           "summary": f"{sum(examples.values())} examples in {len(examples)} properties"
                      + (f"; {len(skipped)} skipped" if skipped else "")}
    if not checks:
        return [], Stage("properties", "not applicable", why="every property test was skipped: "
                         + "; ".join(skipped[:3]), ran=ran)
    return checks, stage_of("properties", checks, ran)


def tolerance_checks(spec: str, *, ks, device: str, dtypes, batch: int, seeds: int, seed: int,
                     vocab: int, timeout: float | None, plan=None) -> tuple[list[Check], Stage]:
    """``compare`` on every input family x dtype x k; the first failing recipe is the
    counterexample. The worker builds each recipe on the device.

    ``plan`` (an ``equiv.ops.draft_topk.coverage.TolerancePlan``) gives each check its shapes; without one,
    every check runs ``[batch, vocab]``."""
    from equiv.ops.draft_topk.compare import compare
    from equiv.ops.draft_topk.coverage import Shape
    from equiv.ops.draft_topk.recipes import FAMILIES, Recipe
    from equiv.run import runner_for

    runner = runner_for(spec, device, timeout)
    checks, shapes, calls0, seen = [], set(), runner.calls, []
    for k in ks:
        for dtype in dtypes:
            for family in FAMILIES:
                if plan is not None and (family, dtype) not in plan:
                    continue
                name = f"tolerance:{family}:{dtype}" + (f":k{k}" if len(ks) > 1 else "")
                if getattr(runner, "stopped", None):
                    checks.append(Check(name, False, f"not run: {runner.stopped}", outcome="not_called"))
                    continue
                t0 = time.perf_counter()
                worst = None
                planned = plan.shapes_for(family, dtype) if plan is not None else (Shape(batch, vocab),)
                runs = [(s, shape) for s in range(seed, seed + seeds) for shape in planned]
                for s, shape in runs:
                    recipe = Recipe(family=family, seed=s, batch=shape.batch, vocab=max(shape.vocab, k),
                                    dtype=dtype, pad=shape.pad, offset=shape.offset)
                    shapes.add((recipe.batch, recipe.vocab, recipe.pad))
                    seen.append(recipe)
                    res = compare(spec, recipe, k=k, name=spec, timeout=timeout, device=device)
                    if not res.passed:
                        worst = res
                        break
                dt = time.perf_counter() - t0
                if worst is None:
                    checks.append(Check(name, True, f"{len(runs)} recipe(s) within tolerance: "
                                            f"{', '.join(map(str, planned))}", duration_s=dt))
                    continue
                detail = "; ".join(f"{c.name}: {c.detail}" for c in worst.failed_checks)[:400]
                where = f"recipe {worst.recipe}" + (f", worst row {worst.worst_row}"
                                                    if worst.worst_row is not None else "")
                checks.append(Check(name, False, detail, counterexample=where, repro=worst.repro,
                                    duration_s=dt, outcome=worst.call_kind, recipe=worst.recipe,
                                    parts=tuple(c.name for c in worst.failed_checks),
                                    cause=worst.contract_cause))
    late = runner.settle()
    if late is not None:
        checks.append(Check("tolerance:late-write", False, f"the candidate {late}"))
    bs = sorted({b for b, _, _ in shapes})
    vs = sorted({v for _, v, _ in shapes})
    padded = sum(1 for _, _, p in shapes if p)
    from equiv.ops.draft_topk.space import reach

    ran = {"calls": runner.calls - calls0, "batches": bs, "vocabs": vs, "dtypes": list(dtypes), "k": list(ks),
           "coverage": reach(seen),
           "summary": f"{runner.calls - calls0} calls; B in {_span(bs)}; V in {_span(vs)}; "
                      f"{len(shapes)} shapes ({padded} with padded rows); {'/'.join(dtypes)}; "
                      f"k={','.join(map(str, ks))}"}
    return checks, stage_of("tolerance", checks, ran)


def _span(values) -> str:
    return "{" + ", ".join(map(str, values[:12])) + (f", +{len(values) - 12} more" if len(values) > 12 else "") + "}"


def mtp_checks(spec, *, ks, device: str, seed: int, vocab: int,
               timeout: float | None) -> tuple[list[Check], Stage]:
    """The MTP harness (quick budget): the candidate decodes in its worker (a probe that returns
    raw outcomes only) and this process judges them against softmax_topk on the same seeds:
    under each consumer the candidate must be lossless, equivalent in accept length, and emit no
    invalid output. Greedy, target-only and confidence chains draft at k = 1; the tree consumer
    drafts at each k > 1 asked. The gate judges a candidate strictly (no ledger)."""
    from equiv.mtp import run_mtp
    from equiv.ops.draft_topk.paths import get_path
    from equiv.run import runner_for
    from equiv.run.load import Candidate

    runner = runner_for(spec, device, timeout)
    runs = ([(list(K_ONE_CONSUMERS), None)] if 1 in ks else []) + [(["tree"], k) for k in ks if k > 1]
    not_asked = [] if any(k > 1 for k in ks) else ["tree (drafts at k > 1; this run judges k = 1 only)"]
    checks = []
    t0 = time.perf_counter()
    for consumers, tree_k in runs:
        if getattr(runner, "stopped", None):
            checks.append(Check("mtp", False, f"not run: {runner.stopped}", outcome="not_called"))
            break
        payload = {"name": spec.text, "builtin": spec.builtin, "consumers": consumers, "seed": seed,
                   "vocab": vocab, "tree_topk": tree_k}
        out = runner.probe("equiv.mtp.probe:quick", payload, timeout=None if timeout is None else
                           max(BUDGETS["quick"]["mtp_timeout"], timeout))
        if not out.ok or not isinstance(out.value, dict):
            problem = out.problem if not out.ok else f"returned {type(out.value).__name__}, not outcomes"
            checks.append(Check("mtp", False, f"the MTP harness stopped: the candidate {problem}"[:400],
                                duration_s=time.perf_counter() - t0, outcome=None if out.ok else out.kind))
            continue
        judged = Candidate(spec.text, _NotCalled(get_path(spec.target).max_k if spec.builtin else None),
                           builtin=spec.builtin)
        run = run_mtp(paths=[judged], consumers=consumers, budget="quick", device=device, seed=seed,
                      vocab=vocab, decoded=out.value, **({"tree_topk": tree_k} if tree_k else {}))
        for rec in run.records:
            r = dict(rec.to_json(), repro=rec.repro)
            name = f"mtp:{r['consumer']}" + (f":k{tree_k}" if tree_k else "")
            if not r["applicable"]:
                not_asked.append(f"{r['consumer']}: {r['reason']}")
                continue
            diff = (r.get("accept_length_difference") or {}).get("mean_difference")
            al = r.get("accept_length")
            detail = (f"accept length {al:.3f}" if isinstance(al, (int, float)) else "no metrics") + \
                (f" (difference vs softmax_topk {diff:+.3f})" if isinstance(diff, (int, float)) else "")
            if r["passed"]:
                checks.append(Check(name, True, detail + "; lossless, equivalent"))
            else:
                why = ", ".join(r["failed_checks"]) + (f": {r['error']}" if r.get("error") else "")
                repro = r["repro"] if r["repro"].startswith("REPRO:") else "REPRO: " + r["repro"]
                checks.append(Check(name, False, f"{why}; {detail}"[:400], repro=repro))
    dt = time.perf_counter() - t0
    checks = [Check(c.name, c.passed, c.detail, c.counterexample, c.repro, dt / max(len(checks), 1))
              for c in checks]
    why = ("not applicable: " + "; ".join(not_asked)) if not_asked else ""
    if not checks:
        return [], Stage("mtp", "not applicable", why="; ".join(not_asked) or "no consumer applies")
    return checks, stage_of("mtp", checks, {"consumers": [c.name for c in checks],
                                          "summary": ", ".join(c.name.partition(":")[2] for c in checks)}, why)


class _NotCalled:
    """The candidate's stand-in in the verdict process: its worker decoded, this process judges;
    ``max_k`` is what the harness reads to tell a consumer that does not apply."""

    def __init__(self, max_k):
        self.max_k = max_k

    def __call__(self, logits, k):
        raise AssertionError("the MTP stage judges the worker's outcomes; nothing calls the candidate here")


def finish_stages(done: list, asked, every, checks) -> tuple[tuple, bool]:
    """The stages of a run with those not asked listed as such, and its verdict: PASS only when
    some stage ran an effective check and every check passed ("nothing was checked" fails)."""
    done = tuple(done) + tuple(Stage(n, "not run", why="not asked (--stages)") for n in every if n not in asked)
    return done, any(st.effective for st in done) and all(c.passed for c in checks)


def _not_run(name: str, why: str) -> Stage:
    return Stage(name, "not run", why=why)


def run_gate(candidate, *, op: str = "draft_topk", k=1, device: str = "auto", dtypes=None,
             budget: str = "quick", seed: int = 0, vocab: int = DEFAULT_VOCAB, timeout=DEFAULT_TIMEOUT_S,
             stages=None, progress=None, law: str = "lossless") -> GateResult:
    """The verdict on ``candidate`` (a spec string, a ``CandidateSpec`` or a callable) for the
    operation ``op`` (module docstring); ``progress(done, total, label)`` is told each stage as
    it starts. Every argument is checked once, into ``RunOptions``, before any work."""
    from equiv.ops import get_op
    from equiv.options import RunOptions

    budget = check_choice("budget", budget, BUDGETS)
    options = RunOptions.make(candidate, op=op, k=k, device=device,
                              dtypes=dtypes or BUDGETS[budget]["dtypes"], budget=budget, seed=seed,
                              timeout=timeout, law=law)
    the_op = get_op(options.op)
    stages = tuple(check_choices("stages", stages, the_op.stages)) if stages else the_op.stages
    return the_op.gate(options, stages=stages, vocab=vocab, progress=progress)


def run_draft_gate(options, *, stages=STAGES, vocab: int = DEFAULT_VOCAB, progress=None) -> GateResult:
    """The draft top-k gate under ``options`` (``equiv.options.RunOptions``, already checked)."""
    from equiv.devices import resolve_device
    from equiv.run import load_check, runner_for

    spec, ks, timeout, budget, seed = options.spec, options.ks, options.timeout, options.budget, options.seed
    plan = BUDGETS[budget]
    dtypes = options.dtypes
    vocab = check_int("vocab", vocab, min_value=max(ks))
    t0 = time.perf_counter()
    stage_timeout = plan["properties_timeout"] if timeout is None else max(
        plan["properties_timeout"], 4 * timeout + 120)
    # the suite first (module docstring, step 2): the device is resolved after, the same way there
    suite = None
    if "properties" in stages:
        suite = start_properties(options, stage_timeout=stage_timeout)
    checks: list[Check] = []
    done: list[Stage] = []
    load = None
    try:
        device = resolve_device(options.device)  # 'cuda' with no GPU -> exit 2
        runner = runner_for(spec, device, timeout)
        load = load_check(spec, device, timeout)   # an import that raises -> exit 2
        if load is not None:
            checks.append(Check("load", False, f"the candidate {load.problem}"))
            done = [_not_run(n, "the candidate could not be loaded") for n in stages]
        else:
            by_name = {}
            order = [n for n in stages if n != "properties"] + (["properties"] if suite else [])
            for n, name in enumerate(order):
                if progress:
                    progress(n, len(stages), name)
                t_stage = suite.t0 if name == "properties" else time.perf_counter()
                if name == "properties":
                    got, st = property_checks(suite, stage_timeout)
                    suite = None
                elif name == "tolerance":
                    from equiv.ops.draft_topk.coverage import reaches_huge, tolerance_plan
                    from equiv.ops.draft_topk.recipes import FAMILIES

                    shape_plan = tolerance_plan(FAMILIES, dtypes, seed=seed, vocab=vocab,
                                                max_shape_elements=plan["shape_elements"],
                                                huge=reaches_huge(device, budget))
                    got, st = tolerance_checks(spec, ks=ks, device=device, dtypes=dtypes, batch=plan["batch"],
                                               seeds=plan["seeds"], seed=seed, vocab=vocab, timeout=timeout,
                                               plan=shape_plan)
                else:
                    got, st = mtp_checks(spec, ks=ks, device=device, seed=seed, vocab=vocab, timeout=timeout)
                by_name[name] = (got, replace(st, seconds=round(time.perf_counter() - t_stage, 3)))
            for name in stages:                  # checks and stages in the order asked
                checks += by_name[name][0]
                done.append(by_name[name][1])
    finally:
        if suite is not None:                    # a failed load, an exception or an interrupt
            suite.kill()
    if progress and load is None:
        progress(len(stages), len(stages), "done")
    done, passed = finish_stages(done, stages, STAGES, checks)
    from equiv.diagnose.attach import for_gate
    from equiv.ops.draft_topk.history import gate_coverage

    diagnosis = for_gate(spec, checks, k=ks[0], device=device, timeout=timeout,
                         elapsed_s=time.perf_counter() - t0)
    return GateResult(candidate=spec.text, passed=passed,
                      checks=tuple(checks), k=ks, device=device, dtypes=tuple(dtypes), budget=budget,
                      seed=seed, duration_s=time.perf_counter() - t0, stages=done,
                      calls=runner.calls, diagnosis=diagnosis, coverage=gate_coverage(done, budget))
