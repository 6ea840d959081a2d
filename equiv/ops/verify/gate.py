"""The pre-merge gate of a verifier (``equiv gate --op verify``): one verdict with its evidence.

Plan
----
1. Load the verifier (an unloadable spec is a usage error, exit 2, before any work).
2. ``properties``: the exact verify properties of ``properties/test_verify.py`` through pytest in
   a subprocess (``--equiv-op verify``), as the draft gate runs its suite (started first, it runs
   beside the statistics and is read last: ``equiv.run.suite.staged``): Hypothesis-drawn
   recipes (shrunk on failure) and the fixed contract plan (``plans.contract_cases``: every
   family x draft kind, n from 1 to 8, V from 1 to 129280, padded rows). One gate check per test.
3. ``statistics``: the statistical plan of the budget through the judge, in this process (each
   case judged in a thread beside the next case's calls, ``judge.run_judge``), under
   ``law`` (``lossless`` by default, or ``token``: judge.py): the exact checks (contract, support,
   greedy) again on its large batches, then the statistical ones at the family-wise alpha of
   ``judge.FAMILY_ALPHA``; one gate check per judge check. The stage's ``ran`` holds the law, the
   efficiency rows (accept length against the token-level optimum) and the notes; its ``why``
   line shows the notes (a lossless verifier that breaks the token law).
The gate's ``coverage`` (JSON and console) is ``space.reach`` of the cases its stages ran: per
dimension of the verifier's input space (n, vocab, batch, layout, draft, family, purpose), the
values drawn, the deepest position that the statistical cases' rows reach, the largest input;
and ``calling``: the calling classes (``equiv.run.calling``) the cases were dealt, reached by the
statistical cases, by exact checks only, or not at all.
The law reaches the property suite's subprocess as ``RunOptions.law`` (``--equiv-law``), so that
its exact checks judge the same law.
The result is ``equiv.gate.GateResult`` (``op="verify"``), so the summary, ``--json`` and
``--junit`` outputs are the draft gate's.
"""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from equiv.checks import stage_of, with_call_defects
from equiv.devices import resolve_device
from equiv.memory import ask_worker, measured
from equiv.ops.verify.defects import diagnose
from equiv.ops.verify.judge import LAWS, Case, run_judge
from equiv.ops.verify.laws import PIT_BINS
from equiv.ops.verify.plans import BUDGETS, plan
from equiv.ops.verify.recipes import VerifyRecipe
from equiv.ops.verify.space import reach, table_lines
from equiv.ops.verify.draws import calling_of
from equiv.run.calling import reach as calling_reach
from equiv.options import RunOptions, one_recipe_values
from equiv.run import runner_for
from equiv.run.supervisor import load_target
from equiv.run.suite import killed_on_error, start_gate_suite, verifier_stages
from equiv.run.timeouts import DEFAULT_TIMEOUT_S, parse_timeout
from equiv.validation import check_choice, check_choices, check_int
from equiv.verdict import GateResult, finish_stages

STAGES = ("properties", "statistics")
DEFAULT_STAGES = STAGES
_PROPERTY_TIMEOUT = {"quick": 300, "full": 3600}


def _gate_checks(stage: str, verdict, duration_s: float) -> list:
    """The judge's checks filed under the gate's ``stage``, each with its share of the time."""
    share = duration_s / max(len(verdict.checks), 1)
    return [replace(c, stage=stage, name=f"{stage}:{c.name}",
                    counterexample=None if c.passed or not c.recipe else f"recipe {c.recipe}",
                    repro=None if c.passed else c.repro, duration_s=share)
            for c in verdict.checks]


def _diagnose(target, verdict, budget, seed, device, spec, timeout):
    """Defects by cause (defects.py); a lossless statistical failure also asks the token law why."""
    token = None
    if verdict.law == "lossless" and any(c.name in ("marginal", "joint", "tail") for c in verdict.failed):
        token = run_judge(target, plan(budget, seed, parts=("statistics",), law="token", device=device),
                          device=device, spec=spec, seed=seed, timeout=timeout, law="token")
    return diagnose(verdict, token)


def _ran(verdict) -> dict:
    """The statistics stage's ``ran``: what ran, the law, efficiency per recipe, notes."""
    eff = verdict.efficiency
    mean = (sum(e["accept_length"] * e["rows"] for e in eff) / max(sum(e["rows"] for e in eff), 1),
            sum(e["token_optimum"] * e["rows"] for e in eff) / max(sum(e["rows"] for e in eff), 1))
    worst = min(eff, key=lambda e: e["ratio"]) if eff else None
    line = (f"; efficiency: accept length {mean[0]:.3f} vs token-level optimum {mean[1]:.3f} on the same "
            f"drafts (lowest ratio {worst['ratio']:.3f}: {worst['recipe']})" if worst else "")
    return {"recipes": verdict.recipes, "calls": verdict.calls, "rows": verdict.rows, "law": verdict.law,
            "efficiency": list(eff), "notes": list(verdict.notes),
            "summary": f"{verdict.law} law, {verdict.recipes} recipes, {verdict.calls} calls, "
                       f"{verdict.rows} rows{line}"}


def _coverage(budget, seed, law, device, stages) -> dict:
    """``space.reach`` of the cases that ``stages`` run (the contract plan for the properties)."""
    covered = plan(budget, seed, parts=tuple(p for p, st in (("contract", "properties"), ("statistics", "statistics"))
                                             if st in stages), law=law, device=device)
    if not covered:
        return {}
    # the calling classes (equiv.run.calling) each case was dealt; the independence case is judged
    # by a statistical test (its calls in pairs that share a generator)
    return {**reach(covered), "calling": calling_reach(
        [(calling_of(c.seeds, device), c.statistical or c.purpose == "independence") for c in covered], device)}


def run_verify_gate(spec, *, device: str = "auto", budget: str = "quick", seed: int = 0,
                    timeout=DEFAULT_TIMEOUT_S, stages=DEFAULT_STAGES, progress=None, law: str = "lossless"):
    """Run the verify gate on ``spec`` (module docstring); returns a ``GateResult``."""
    budget = check_choice("budget", budget, BUDGETS)
    law = check_choice("law", law, LAWS)
    seed = check_int("seed", seed, min_value=0)
    timeout = parse_timeout(timeout)
    stages = check_choices("stages", stages, STAGES)
    t0 = time.perf_counter()
    # the suite first, before this process imports torch or loads the verifier; killed if this stops
    suite, stage_timeout = start_gate_suite(spec, stages, limit=_PROPERTY_TIMEOUT[budget], timeout=timeout,
                                            select="not verify_statistics", make_options=RunOptions.make,
                                            op="verify", device=device, budget=budget, seed=seed, law=law)
    with killed_on_error(suite):
        device = resolve_device(device)
        target, spec, loaded = load_target(spec, "verify", device, timeout)   # CandidateLoadError -> exit 2
    calls, diagnosis = 0, None

    def statistics(name, _earlier):
        nonlocal calls, diagnosis
        again = (f"REPRO: equiv gate --op verify --candidate {spec} --stages statistics --budget {budget} "
                 f"--seed {seed} --device {device}" + (" --law token" if law == "token" else ""))
        t_stage = time.perf_counter()
        verdict = run_judge(target, plan(budget, seed, parts=("statistics",), law=law, device=device),
                            device=device, spec=spec, seed=seed, timeout=timeout, repro=again, law=law)
        calls += verdict.calls
        diagnosis = _diagnose(target, verdict, budget, seed, device, spec, timeout) if not verdict.passed else None
        got = _gate_checks("statistics", verdict, time.perf_counter() - t_stage)
        return got, stage_of("statistics", got, _ran(verdict), why=" | ".join(verdict.notes))

    with killed_on_error(suite), ThreadPoolExecutor(1) as beside:   # the coverage table, meanwhile
        early = beside.submit(_coverage, budget, seed, law, device, set(stages))
        # the judge beside the suite; a verifier that did not load fails ``load``
        measured_statistics = measured(statistics, lambda: ask_worker(runner_for(target, device, timeout, "verify")))
        checks, done = verifier_stages(suite, stage_timeout, loaded, stages, measured_statistics, progress)
    if progress:
        progress(len(stages), len(stages), "done")
    done, passed = finish_stages(done, stages, STAGES, checks)
    ran = {st.name for st in done if st.status in ("pass", "FAIL")}
    coverage = early.result() if ran == set(stages) else _coverage(budget, seed, law, device, ran)
    return GateResult(candidate=spec, passed=passed,
                      checks=tuple(checks), k=(), device=device, dtypes=("float32",), budget=budget,
                      seed=seed, duration_s=time.perf_counter() - t0, stages=done, calls=calls,
                      op="verify", diagnosis=with_call_defects(diagnosis, checks, spec), coverage=coverage,
                      coverage_lines=tuple(table_lines(coverage)))


def run_verify_check(spec, recipe, *, calls: int = 1, seed: int = 0, device: str = "auto",
                     timeout=DEFAULT_TIMEOUT_S, law: str = "lossless"):
    """Judge ``spec`` on one recipe (what a ``REPRO:`` line runs): the exact checks, and the
    statistical ones when the calls draw at least ``5 * PIT_BINS`` tokens."""
    recipe = recipe if isinstance(recipe, VerifyRecipe) else VerifyRecipe.parse(recipe)
    calls, seed, device, timeout = one_recipe_values(calls, seed, device, timeout)
    target, spec, _ = load_target(spec, "verify", device, timeout)
    lawful = law == "token" or recipe.drafts == "sampled"       # losslessness needs drafts drawn from q
    case = Case(recipe, calls, seed, statistical=lawful and recipe.batch * calls >= 5 * PIT_BINS)
    return run_judge(target, [case], device=device, spec=spec, seed=seed, timeout=timeout, law=law)
