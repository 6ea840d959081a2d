"""The pre-merge gate of a tree verifier (``equiv gate --op verify_tree``): one verdict.

Plan
----
1. Load the verifier (an unloadable spec is a usage error, exit 2, before any work) and read
   what it declares: the construction it is lossless for (``drafts``: the option wins, then the
   function's attribute ``drafts``, then ``topk``) and, for a temperature-0 verifier, the
   attribute ``targets = "onehot"`` (its statistical plan then uses one-hot targets only).
2. ``properties``: the exact properties of ``properties/test_verify_tree.py`` through pytest in a
   subprocess (``--equiv-op verify_tree``): Hypothesis-drawn recipes and the fixed contract plan
   (plans.py), one gate check per test. Started first, it runs beside the statistics and is
   read last (``equiv.run.suite.staged``).
3. ``statistics``: the statistical plan of the budget for each declared construction, and the
   independence cases (independence.py: rows of one tree, two generator seeds), through the
   judge (judge.py), in this process; one gate check per judge check. The stage's ``ran`` holds the
   declaration, the efficiency rows (accept length against the tree optimum) and the notes.
The result is ``equiv.gate.GateResult`` (``op="verify_tree"``), so the summary, ``--json`` and
``--junit`` are every op's; ``diagnosis`` holds the defects by cause (defects.py); ``coverage``
has ``calling``: the calling classes (``equiv.run.calling``) the cases were dealt, reached by the
statistical cases, by exact checks only, or not at all.
"""
from __future__ import annotations

import time
from dataclasses import replace

from equiv.checks import stage_of, with_call_defects
from equiv.devices import resolve_device
from equiv.memory import ask_worker, measured
from equiv.ops.verify_tree.draws import calling_of, declaration
from equiv.ops.verify_tree.defects import diagnose
from equiv.ops.verify_tree.independence import independence_cases
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.op import CONSTRUCTIONS, DRAFT_CHOICES
from equiv.ops.verify_tree.plans import BUDGETS, contract_cases, statistical_cases
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.ops.verify_tree.space import reach as tree_reach, table_lines as tree_table_lines
from equiv.options import RunOptions, one_recipe_values
from equiv.run import runner_for
from equiv.run.supervisor import load_target
from equiv.run.calling import reach as calling_reach
from equiv.run.suite import killed_on_error, start_gate_suite, verifier_stages
from equiv.run.timeouts import DEFAULT_TIMEOUT_S, parse_timeout
from equiv.stats import PIT_BINS
from equiv.validation import check_choice, check_choices, check_int
from equiv.verdict import GateResult, finish_stages

STAGES = ("properties", "statistics")
_PROPERTY_TIMEOUT = {"quick": 300, "full": 3600}


def resolve_drafts(option, declared: dict) -> str:
    """The construction judged: an explicit option, else the verifier's attribute, else ``topk``."""
    if option is not None and option != "declared":
        return check_choice("drafts", option, DRAFT_CHOICES)
    got = declared.get("drafts")
    return got if got in CONSTRUCTIONS else "topk"


def _gate_checks(stage, verdict, duration_s):
    """The judge's checks filed under the gate's ``stage``, each with its share of the time."""
    share = duration_s / max(len(verdict.checks), 1)
    return [replace(c, stage=stage, name=f"{stage}:{c.name}",
                    counterexample=None if c.passed or not c.recipe else f"recipe {c.recipe}",
                    repro=None if c.passed else c.repro, duration_s=share)
            for c in verdict.checks]


def _ran(verdict, targets) -> dict:
    eff = verdict.efficiency
    fixed = [e for e in eff if e["token_optimum"] is not None]
    rows = max(sum(e["rows"] for e in fixed), 1)
    mean = (sum(e["accept_length"] * e["rows"] for e in fixed) / rows,
            sum(e["token_optimum"] * e["rows"] for e in fixed) / rows)
    line = f"; efficiency on fixed trees: accept length {mean[0]:.3f} vs tree optimum {mean[1]:.3f}" if fixed else ""
    return {"drafts": verdict.drafts, "targets": targets, "recipes": verdict.recipes, "calls": verdict.calls,
            "rows": verdict.rows, "efficiency": list(eff), "notes": list(verdict.notes),
            "summary": f"drafts={verdict.drafts}{', one-hot targets' if targets == 'onehot' else ''}, "
                       f"{verdict.recipes} recipes, {verdict.calls} calls, {verdict.rows} rows{line}"}


def run_tree_gate(spec, *, device: str = "auto", budget: str = "quick", seed: int = 0,
                  timeout=DEFAULT_TIMEOUT_S, stages=STAGES, progress=None, drafts=None):
    """Run the verify_tree gate on ``spec`` (module docstring); returns a ``GateResult``."""
    budget = check_choice("budget", budget, BUDGETS)
    seed = check_int("seed", seed, min_value=0)
    timeout = parse_timeout(timeout)
    stages = check_choices("stages", stages, STAGES)
    if drafts is not None:
        drafts = check_choice("drafts", drafts, DRAFT_CHOICES)
    t0 = time.perf_counter()
    # the suite first, before this process imports torch or loads the verifier (the suite reads
    # its declaration itself, the same way); killed if this stops
    suite, stage_timeout = start_gate_suite(spec, stages, limit=_PROPERTY_TIMEOUT[budget], timeout=timeout,
                                            select="not verify_tree_statistics", make_options=RunOptions.make,
                                            op="verify_tree", device=device, budget=budget, seed=seed, drafts=drafts)
    with killed_on_error(suite):
        device = resolve_device(device)
        target, text, loaded = load_target(spec, "verify_tree", device, timeout)
        declared = declaration(target, device=device, timeout=timeout) if loaded is None else {}
    calls, diagnosis = 0, None
    drafts = resolve_drafts(drafts, declared)
    targets = declared.get("targets") or "any"

    def statistics(name, _earlier):
        nonlocal calls, diagnosis
        again = (f"REPRO: equiv gate --op verify_tree --candidate {text} --stages statistics --budget {budget} "
                 f"--seed {seed} --device {device} --drafts {drafts}")
        t_stage = time.perf_counter()
        cases = (statistical_cases(budget, drafts, seed, targets, device=str(device))
                 + independence_cases(drafts, seed, targets))
        verdict = run_judge(target, cases, device=device,
                            drafts=drafts, spec=text, seed=seed, timeout=timeout, repro=again)
        calls += verdict.calls
        diagnosis = diagnose(verdict) if not verdict.passed else None
        got = _gate_checks("statistics", verdict, time.perf_counter() - t_stage)
        return got, stage_of("statistics", got, _ran(verdict, targets), why=" | ".join(verdict.notes))

    # the judge beside the suite; a verifier that did not load fails ``load``
    with killed_on_error(suite):
        measured_statistics = measured(statistics, lambda: ask_worker(runner_for(target, device, timeout, "verify_tree")))
        checks, done = verifier_stages(suite, stage_timeout, loaded, stages, measured_statistics, progress)
    if progress:
        progress(len(stages), len(stages), "done")
    done, passed = finish_stages(done, stages, STAGES, checks)
    coverage = _coverage(budget, seed, drafts, targets, device,
                         {st.name for st in done if st.status in ("pass", "FAIL")})
    return GateResult(candidate=text, passed=passed, checks=tuple(checks), k=(), device=device,
                      dtypes=("float32",), budget=budget, seed=seed, duration_s=time.perf_counter() - t0,
                      stages=done, calls=calls, op="verify_tree", diagnosis=with_call_defects(diagnosis, checks, text),
                      coverage=coverage, coverage_lines=tuple(tree_table_lines(coverage)))


def _coverage(budget, seed, drafts, targets, device, ran) -> dict:
    """The gate's coverage: ``calling``, the calling classes (``equiv.run.calling``) that the cases
    of the stages that ran were dealt: the contract plan's (properties: exact checks only), the
    statistical and independence cases' (statistics); and ``space.reach`` of the same cases: where
    each class of each data dimension was judged (statistical, exact checks only, not reached)."""
    exact = contract_cases(drafts, 0) if "properties" in ran else []
    dealt = [(calling_of(c.seeds, device), False) for c in exact]
    stat = []
    if "statistics" in ran:
        cases = statistical_cases(budget, drafts, seed, targets, device=str(device))
        stat, exact = cases, exact + independence_cases(drafts, seed, targets)
        dealt += [(calling_of(c.seeds, device), True) for c in cases + independence_cases(drafts, seed, targets)]
    data = tree_reach(stat, exact) if stat or exact else {}     # where each data class was judged (space.py)
    return {**data, "calling": calling_reach(dealt, device)} if dealt else data


def run_tree_check(spec, recipe, *, calls: int = 1, seed: int = 0, device: str = "auto",
                   timeout=DEFAULT_TIMEOUT_S, drafts=None):
    """Judge ``spec`` on one recipe (what a ``REPRO:`` line runs): the exact checks, and the
    statistical ones when the calls emit enough texts (``5 * PIT_BINS`` rows)."""
    recipe = recipe if isinstance(recipe, TreeRecipe) else TreeRecipe.parse(recipe)
    calls, seed, device, timeout = one_recipe_values(calls, seed, device, timeout)
    target, text, _ = load_target(spec, "verify_tree", device, timeout)
    drafts = resolve_drafts(drafts, declaration(target, device=device, timeout=timeout))
    case = Case(recipe, calls, seed, statistical=recipe.batch * calls >= 5 * PIT_BINS)
    return run_judge(target, [case], device=device, drafts=drafts, spec=text, seed=seed, timeout=timeout)
