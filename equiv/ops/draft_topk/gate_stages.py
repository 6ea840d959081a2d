"""The draft top-k gate's judging once its property suite has started (``gate.py``, steps 3-4):
the tolerance stage (``tolerance_checks``), the feature stages it is handed (``mtp``), reading the
suite, the diagnosis and the coverage record, into one ``GateResult``.

``gate.py`` imports this module after it has started the suite: this one imports torch (through
``compare``, the recipes and the paths), and the suite, the critical path, does not wait for that.
"""
from __future__ import annotations

import importlib
import threading
import time

import numpy as np

from equiv.checks import Check, Stage, stage_of
from equiv.devices import resolve_device
from equiv.memory import ask_worker, measured
from equiv.ops.draft_topk import ksupport, space
from equiv.ops.draft_topk.ahead import Ahead
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.coverage import Shape, reaches_huge, tiny_shapes, tolerance_plan
from equiv.ops.draft_topk.diagnose.attach import for_gate
from equiv.ops.draft_topk.history_plan import gate_coverage
from equiv.ops.draft_topk.recipes import FAMILIES, Recipe
from equiv.ops.draft_topk.space import table_lines
from equiv.run import load_check, runner_for
from equiv.run.suite import staged
from equiv.verdict import GateResult, finish_stages



def tolerance_checks(spec: str, *, ks, device: str, dtypes, batch: int, seeds: int, seed: int,
                     vocab: int, timeout: float | None, plan=None, thin_ks=(), context="drawn",
                     k_note: str = "", ahead=None) -> tuple[list[Check], Stage]:
    """``compare`` on every input family x dtype x k; the first failing recipe is the
    counterexample. The worker builds each recipe on the device, and calls the candidate in the
    calling context dealt to that recipe (``space.context_draws``: every context the device offers
    occurs; ``context`` names one for every call instead).

    ``plan`` (an ``equiv.ops.draft_topk.coverage.TolerancePlan``) gives each check its shapes; without one,
    every check runs ``[batch, vocab]``. A k in ``thin_ks`` (the k values the default ``--k``
    adds to k = 1) gets one shape of each check's plan, a different one per k. ``ahead``: a pool
    of ``ahead.Ahead`` started earlier (one is started here otherwise); it is closed at the end."""

    runner = runner_for(spec, device, timeout)
    checks, shapes, calls0, seen, used = [], set(), runner.calls, [], []
    todo = []
    for ki, k in enumerate(ks):
        for dtype in dtypes:
            for fi, family in enumerate(FAMILIES):
                if plan is not None and (family, dtype) not in plan:
                    continue
                planned = plan.shapes_for(family, dtype) if plan is not None else (Shape(batch, vocab),)
                if k in thin_ks:
                    planned = (planned[(fi + ki) % len(planned)],) + tiny_shapes(family, k, seed + ki)
                todo.append((k, dtype, family, planned,
                             [(s, shape) for s in range(seed, seed + (1 if k in thin_ks else seeds)) for shape in planned]))
    dealt = space.context_draws(np.random.default_rng([seed, 0xC7]), device, sum(len(t[-1]) for t in todo))
    if context != "drawn":
        dealt = [context] * len(dealt)

    def recipe_of(s, shape, k, dtype, family):
        return Recipe(family=family, seed=s, batch=shape.batch, vocab=max(shape.vocab, k),
                      dtype=dtype, pad=shape.pad, offset=shape.offset)

    with (ahead or Ahead()).plan([(recipe_of(s, shape, k, dtype, family), k) for k, dtype, family, _, runs in todo
                                  for s, shape in runs]) as ahead:
        checks += _tolerance_runs(spec, todo, runner, ahead, recipe_of, dealt, ks=ks, device=device,
                                  timeout=timeout, seen=seen, used=used, shapes=shapes)

    late = runner.settle()
    if late is not None:
        checks.append(Check("tolerance", "tolerance:late-write", False, f"the candidate {late}"))
    bs = sorted({b for b, _, _ in shapes})
    vs = sorted({v for _, v, _ in shapes})
    padded = sum(1 for _, _, p in shapes if p)
    per_context = {c: used.count(c) for c in dict.fromkeys(used)}
    ran = {"calls": runner.calls - calls0, "device": str(device), "batches": bs, "vocabs": vs, "dtypes": list(dtypes), "k": list(ks),
           "contexts": per_context, "coverage": space.reach(seen, used, ks=ks),
           "summary": f"{runner.calls - calls0} calls; B in {_span(bs)}; V in {_span(vs)}; "
                      f"{len(shapes)} shapes ({padded} with padded rows); {'/'.join(dtypes)}; "
                      f"k={','.join(map(str, ks))}" + (f" (k={','.join(map(str, thin_ks))}: one shape per check)"
                                                       if thin_ks else "")
                      + (f" [{k_note}]" if k_note else "") + "; contexts "
                      + ", ".join(f"{c} {n}" for c, n in per_context.items())}
    return checks, stage_of("tolerance", checks, ran)


def _tolerance_runs(spec, todo, runner, ahead, recipe_of, dealt, *, ks, device, timeout, seen, used,
                    shapes) -> list[Check]:
    """The checks of ``tolerance_checks``' plan ``todo``, one per (k, dtype, family): its recipes
    in order, each called in the context ``dealt`` to it, up to the first failing one; what ran
    is added to ``seen``, ``used`` and ``shapes``."""
    checks, n_call = [], 0
    for k, dtype, family, planned, runs in todo:
        name = f"tolerance:{family}:{dtype}" + (f":k{k}" if len(ks) > 1 else "")
        if getattr(runner, "stopped", None):
            checks.append(Check("tolerance", name, False, f"not run: {runner.stopped}", subject=f"{family}:{dtype}",
                                outcome="not_called"))
            n_call += len(runs)
            continue
        t0 = time.perf_counter()
        worst = None
        for s, shape in runs:
            ctx = dealt[n_call]
            n_call += 1
            recipe = recipe_of(s, shape, k, dtype, family)
            shapes.add((recipe.batch, recipe.vocab, recipe.pad))
            seen.append(recipe)
            used.append(ctx)
            res = compare(spec, recipe, k=k, name=spec, timeout=timeout, device=device, context=ctx,
                          prepared=ahead.take(recipe, k))
            if not res.passed:
                worst = res
                break
        dt = time.perf_counter() - t0
        if worst is None:
            checks.append(Check("tolerance", name, True, f"{len(runs)} recipe(s) within tolerance: "
                                    f"{', '.join(map(str, planned))}", subject=f"{family}:{dtype}", duration_s=dt))
            continue
        detail = "; ".join(f"{c.name}: {c.detail}" for c in worst.failed_checks)[:400]
        where = (f"recipe {worst.recipe}" + (f" under {worst.context}" if worst.context else "")
                 + (f", worst row {worst.worst_row}" if worst.worst_row is not None else ""))
        checks.append(Check("tolerance", name, False, detail, subject=f"{family}:{dtype}", inputs=recipe,
                            counterexample=where, repro=worst.repro,
                            duration_s=dt, outcome=worst.call_kind, recipe=worst.recipe,
                            parts=tuple(c.name for c in worst.failed_checks),
                            cause=worst.contract_cause,
                            evidence={"k": k, "context": worst.context}))
    return checks


def _span(values) -> str:
    return "{" + ", ".join(map(str, values[:12])) + (f", +{len(values) - 12} more" if len(values) > 12 else "") + "}"


def judge(options, suite, *, plan: dict, stages, all_stages, vocab: int, stage_timeout: float, t0: float,
          progress=None, feature_stages=None, beside=()) -> GateResult:
    """The gate's stages under ``options`` while its property suite ``suite`` (None: not asked)
    runs; ``plan`` is the budget's row of ``gate.BUDGETS``; ``beside``: the stages that run
    beside the tolerance stage, each in a worker of its own (``gate.beside``). The suite is read
    last, or killed if this stops first."""
    spec, ks, timeout, budget, seed = options.spec, options.ks, options.timeout, options.budget, options.seed
    dtypes = options.dtypes
    ahead = None
    checks: list[Check] = []
    done: list[Stage] = []
    load = None
    lane = ""                                    # the MTP stage's worker, when it runs beside
    try:
        if "tolerance" in stages:
            ahead = Ahead()                      # its processes start while the candidate loads
        if "mtp" in stages:                      # its statistics import scipy.special (~0.3 s): meanwhile
            threading.Thread(target=importlib.import_module, args=("scipy.special",), daemon=True).start()
        device = resolve_device(options.device)  # 'cuda' with no GPU -> exit 2
        runner = runner_for(spec, device, timeout)
        load = load_check(spec, device, timeout)   # an import that raises -> exit 2
        if load is not None:
            checks.append(Check("load", "load", False, f"the candidate {load.problem}"))
            done = [_not_run(n, "the candidate could not be loaded") for n in stages]
        else:
            thin, k_note = (), ""
            if options.k_auto:                   # the default --k: every k of auto_ks(seed) it accepts
                drawn = ks
                support = ksupport.accepted(runner, drawn, timeout)
                # none accepted: judged at k = 1 all the same, where its refusal fails every stage
                ks = support.accepted or drawn[:1]
                thin = ks[1:]                    # the first accepted k gets the whole shape plan
                k_note = support.note()
                if support.problem:              # a hang or an exit while probing: a failure
                    checks.append(Check("tolerance", "tolerance:k-support", False,
                                        f"the candidate {support.problem} (when called at k = "
                                        f"{', '.join(map(str, drawn))} to see which k it accepts)",
                                        outcome=support.kind))

            def run(name, _earlier):
                if name == "tolerance":
                    shape_plan = tolerance_plan(FAMILIES, dtypes, seed=seed, vocab=vocab,
                                                max_shape_elements=plan["shape_elements"],
                                                huge=reaches_huge(device, budget))
                    return tolerance_checks(spec, ks=ks, device=device, dtypes=dtypes, batch=plan["batch"],
                                            seeds=plan["seeds"], seed=seed, vocab=vocab, timeout=timeout,
                                            plan=shape_plan, thin_ks=thin, context=options.option("context"),
                                            k_note=k_note, ahead=ahead)
                return (feature_stages or {})[name](spec, ks=ks, device=device, seed=seed, vocab=vocab,
                                                    timeout=timeout, stage_timeout=plan["mtp_timeout"],
                                                    context=options.option("context"), lane=lane)

            # the MTP stage beside the tolerance stage, in a worker of its own (equiv.run.suite.staged)
            lane = "mtp" if "mtp" in beside else ""
            own = {"mtp": measured(run, lambda: ask_worker(runner_for(spec, device, timeout, lane=lane)))}
            rest = measured(run, lambda: ask_worker(runner))
            started, suite = suite, None         # staged reads it, or kills it on the way out
            got, done = staged(stages, started, stage_timeout, lambda name, earlier: own.get(name, rest)(name, earlier),
                               progress, beside=beside)
            checks += got
    finally:
        if suite is not None:                    # a failed load, an exception or an interrupt
            suite.kill()
        if ahead is not None:
            ahead.close()
    if progress and load is None:
        progress(len(stages), len(stages), "done")
    done, passed = finish_stages(done, stages, all_stages, checks)
    diagnosis = for_gate(spec, checks, k=ks[0], ks=ks, device=device, timeout=timeout,
                         elapsed_s=time.perf_counter() - t0)
    coverage = gate_coverage(done, budget)
    return GateResult(candidate=spec.text, passed=passed,
                      checks=tuple(checks), k=ks, device=device, dtypes=tuple(dtypes), budget=budget,
                      seed=seed, duration_s=time.perf_counter() - t0, stages=done,
                      calls=runner.calls + (runner_for(spec, device, timeout, lane=lane).calls if lane else 0),
                      op="draft_topk", diagnosis=diagnosis, coverage=coverage,
                      coverage_lines=tuple(table_lines(coverage)) if coverage else (), takes_k=True)


def _not_run(name: str, why: str) -> Stage:
    return Stage(name, "not run", why=why)
