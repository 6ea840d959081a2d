"""Failing checks in, defects out: the diagnosis stage that runs after the checks of a gate.

Plan
----
1. Nothing failed: return at once, no call (``defects: []``; a passing candidate pays nothing).
2. The bland input first: one Gaussian batch (B = 4, V = 1000, float32, contiguous). If it fails,
   its defect is one that every later failure may share (a placeholder probability, an offset
   index), so it is isolated before anything else.
3. Each failing check, smallest inputs first (properties, fixtures, then the tolerance stage's
   full-size recipes, then the MTP consumers): its failing input is read back
   (``equiv.ops.draft_topk.diagnose.sources``) and re-run (``Prober.observe``). Whatever the defects found so far
   leave unexplained (``equiv.ops.draft_topk.diagnose.explain``) is isolated (``equiv.ops.draft_topk.diagnose.isolate``) into a
   new defect, until the observation is explained. A failing call history is re-run as the
   smallest history that shows it (``equiv.ops.draft_topk.diagnose.calls``). A metamorphic property whose recipe passes on
   its own is re-run through its relation's follow-up input (the poisoned batch, a row subset,
   reversed columns, a shifted copy, a second call of the same shape). The check is listed under
   every defect that explains part of it. A defect of a kind already found is merged into it.
   A check whose only fault is a value at most ``EDGE`` times over the table, where the candidate
   still meets the regression rule against softmax_topk on that input, is listed at the
   tolerance's edge (the table, not the candidate, is at issue) rather than isolated. Once two
   checks alike (same stage, failing sub-checks, dtype, padding, poisoning) were re-run and wholly
   explained by the same defects, the further ones alike join those defects without a call
   (listed ``by_likeness``): re-running every full-size check would cost the stage again.
4. Consolidate: a defect whose own trigger the other defects explain is folded into them; a
   defect that explains no failing check is dropped (it is not what failed this run).
5. The deadline (a share of the gate's own wall time) stops new calls; what is left is listed
   as not diagnosed, never guessed.
The result is a frozen ``Diagnosis`` of frozen ``Defect`` s (``equiv.checks``; ``render`` writes its texts).
"""
from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from equiv.checks import Defect, Diagnosis
from equiv.errors import InvalidArgument
from equiv.ops.draft_topk.diagnose import calls, render, sources
from equiv.ops.draft_topk.diagnose.explain import Explained, explained, merge_scopes, scope_of
from equiv.ops.draft_topk.diagnose.isolate import STATUS_KIND, Finding, Isolation, Residual
from equiv.ops.draft_topk.diagnose.probe import INDEX, OOV, VALUE, Prober
from equiv.ops.draft_topk.diagnose.taxonomy import KINDS
from equiv.ops.draft_topk.recipes import Recipe
from equiv.ops.draft_topk.tolerance import tolerance_for
from equiv.run.timeouts import DEFAULT_TIMEOUT_S

BLAND = "gaussian:seed=0,batch=4,vocab=1000,dtype={dtype}"
EDGE = 1.25                  # a value failure within 25% over the table may be the table's own edge
_RELATION_FIRST = ("poison_never_leaks", "row_independence", "vocab_permutation", "shift_invariance")


@dataclass
class _Suspect:
    """A defect being built: its findings (one per isolation that ended here), their scopes,
    the checks it explains and the fault bits it was seen explaining."""

    findings: list
    scopes: list
    checks: list = field(default_factory=list)
    seen_bits: int = 0
    version: int = 0                                 # bumped whenever a finding is folded in

    @property
    def finding(self):
        """The finding that names the defect: the most severe kind among its findings."""
        return min(self.findings, key=lambda f: KINDS[f.kind].severity)

    @property
    def kind(self) -> str:
        return self.finding.kind

    @property
    def bits(self) -> int:
        return self.seen_bits | np.bitwise_or.reduce([s["bits"] for s in self.scopes])


# Features that, shared by two findings, say they have one cause (a family is not one of them:
# two poison defects both need a poisoned row).
CAUSAL_FEATURES = {"pad", "offset", "mask", "vocab", "tile", "dtype", "batch", "neighbours", "shift", "scale"}


_CALLS = {"non_contiguous": 1, "misaligned_base": 1, "neighbour_rows": 3, "stale_output": 3}


def _cost(suspect) -> int:
    """Calls an explanation by ``suspect`` may need (its complements)."""
    return max(_CALLS.get(sc["kind"], 0) for sc in suspect.scopes)


def _trace(*parts) -> None:
    if os.environ.get("EQUIV_DIAGNOSE_TRACE"):
        print("diagnose:", *parts, file=sys.stderr)


def _features(finding) -> set:
    return {f for f, _ in finding.necessary} & CAUSAL_FEATURES


def _stage_order(check) -> int:
    name = check.name
    return 0 if name.startswith("property") else 2 if name.startswith("tolerance") else 3 if name.startswith("mtp") else 1


class _Work:
    def __init__(self, prober: Prober, k: int):
        self.prober, self.k = prober, k
        self.suspects: list[_Suspect] = []
        self.unexplained: list[str] = []
        self.tolerance_edge: list[str] = []
        self.not_diagnosed: list[str] = []
        self._explained: dict = {}
        self.alone_passing: list = []                # checks whose inputs pass when re-run alone
        self.likes: dict = {}                        # likeness -> (defects, like checks re-run)
        self.by_likeness: list = []                  # checks attributed by likeness, not re-run
        self.regression_only: list = []              # checks that fail only the regression rule
        self.deferring = False

    # -- explanation ----------------------------------------------------------------------------
    def explain(self, suspect, obs):
        """What ``suspect`` explains in ``obs`` (the union over its scopes), cached per call."""
        key = (id(suspect), suspect.version, obs.order)
        if key not in self._explained:
            parts = [explained(scope, obs, self.prober) for scope in suspect.scopes]
            rows = np.bitwise_or.reduce([p.rows for p in parts]) if parts[0].rows.size else parts[0].rows
            self._explained[key] = Explained(rows, any(p.status for p in parts), any(p.regression for p in parts))
        return self._explained[key]

    def account(self, obs, among=None) -> tuple[Residual, list]:
        """What the defects leave unexplained in ``obs``, and which of them explained a part.
        Defects whose scope costs no call are asked first; the rest only while something is left."""
        rows = obs.faults.copy() if obs.faults is not None else np.zeros(0, dtype=np.int64)
        status = obs.status if obs.status in STATUS_KIND else None
        regression = obs.regression_failed
        owners = []
        for s in sorted(self.suspects if among is None else among, key=_cost):
            if status is None and not regression and not (rows != 0).any():
                break
            e = self.explain(s, obs)
            if (rows.size and (rows & e.rows).any()) or (status and e.status) or (regression and e.regression):
                owners.append(s)
            if rows.size:
                rows &= ~e.rows
            status = None if e.status else status
            regression = regression and not e.regression
        return Residual(rows, status, regression), owners

    def residual(self, obs, among=None) -> Residual:
        return self.account(obs, among)[0]

    def explainers(self, obs) -> list:
        return self.account(obs)[1]

    # -- finding -------------------------------------------------------------------------------
    def add(self, finding) -> _Suspect:
        """A new defect, or the one it shares a kind or a causal feature with."""
        scope = scope_of(finding)
        for s in self.suspects:
            same = [i for i, sc in enumerate(s.scopes) if sc["kind"] == scope["kind"]]
            if same:
                s.scopes[same[0]] = merge_scopes(s.scopes[same[0]], scope)
                s.findings.append(finding)
                s.version += 1
                return s
            if any(_features(finding) & _features(f) for f in s.findings):
                s.scopes.append(scope)
                s.findings.append(finding)
                s.version += 1
                return s
        s = _Suspect([finding], [scope])
        self.suspects.append(s)
        return s

    def settle(self, obs) -> bool:
        """Isolate until ``obs`` is explained; False if the deadline or no progress stops it."""
        for _ in range(4):
            res = self.residual(obs)
            if res.empty:
                return True
            if self.prober.exhausted:
                return False
            before = res
            finding = Isolation(self.prober, self.residual, self.k).run(obs)
            _trace(f"{obs.inputs}: primary {res.primary()} -> {finding.kind} at {finding.trigger.inputs}",
                   f"necessary {[n for n, _ in finding.necessary]} ({self.prober.calls} calls)")
            self.add(finding)
            after = self.residual(obs)
            if _same_residual(before, after):
                return after.empty
        return self.residual(obs).empty

    def attribute(self, name: str, observations) -> bool:
        owners = []
        for obs in observations:
            for s in self.explainers(obs):
                rows = self.explain(s, obs).rows
                s.seen_bits |= int(np.bitwise_or.reduce(rows)) if rows.size else 0
                if s not in owners:
                    owners.append(s)
        for s in owners:
            if name not in s.checks:
                s.checks.append(name)
        return bool(owners)

    # -- checks --------------------------------------------------------------------------------
    def check(self, check) -> None:
        if self.prober.exhausted:
            self.not_diagnosed.append(check.name)
            return
        if sources.consumer_of(check) is not None:
            return self._mtp(check)
        if abnormal_kind(check) is not None:
            return self._unrun(check)
        known = self._contract_known(check)
        if known is not None:                    # the same contract break, already isolated
            known.checks.append(check.name)
            return
        if calls.is_history(check) and not calls.contract_break(check) and self._history(check):
            return
        if calls.outputs_reused(check) and self._history(check):     # by cause, not by its rows
            return
        like = _likeness(check)
        owners = self.likes.get(like)
        if owners is not None and owners[1] >= LIKENESS_RUNS:
            for s in owners[0]:                  # two like checks re-run, both wholly these defects
                s.checks.append(check.name)
            self.by_likeness.append(check.name)
            return
        inputs = sources.inputs_of(check)
        failing = [o for o in (self._observe(i) for i in inputs[:2]) if not o.passed]
        prop = sources.property_name(check)
        if inputs and (not failing or prop in _RELATION_FIRST or prop == "repeated_calls"):
            failing += self._relations(check, inputs[0], need=not failing)
        if not failing:
            _trace(check.name, "no failing input found from", [str(i) for i in inputs])
            self.alone_passing.append((check, bool(inputs)))
            return
        if all(self._at_tolerance_edge(o) for o in failing):
            self.tolerance_edge.append(check.name)
            return
        if not self.deferring and all(self.residual(o).primary() == "regression" for o in failing):
            self.regression_only.append(check)    # after the rest: a row-level defect may explain it
            return
        settled = all([self.settle(o) for o in failing])
        _trace(check.name, [str(o.inputs) for o in failing], "settled" if settled else "NOT settled")
        before = len(self.suspects)
        if not self.attribute(check.name, failing) or not settled:
            (self.not_diagnosed if self.prober.exhausted else self.unexplained).append(check.name)
        elif before == len(self.suspects) and like is not None:
            owners = tuple(s for s in self.suspects if check.name in s.checks)
            seen = self.likes.get(like)
            self.likes[like] = (owners, seen[1] + 1) if seen and seen[0] == owners else (owners, 1)

    def _contract_known(self, check):
        """A defect of a contract kind already isolated that broke the check's contract the same
        way (``Check.cause``, else how its call ended): the check is that defect without another
        call."""
        cause = getattr(check, "cause", None) or getattr(check, "outcome", None)
        for s in self.suspects:
            if cause in _CONTRACT_CAUSES.get(s.kind, ()):
                return s
        return None

    def _at_tolerance_edge(self, obs) -> bool:
        """Only values off, by at most ``EDGE`` times the table's relative allowance, and within
        the regression rule of softmax_topk on the same input: the baseline errs about as much, so
        the tolerance table -- not the candidate -- is at issue."""
        if obs.faults is None or obs.status != "fail" or (obs.faults & ~VALUE).any():
            return False
        if not self.residual(obs).rows.any():
            return False                         # a known defect explains it
        if obs.result.max_rel_err > EDGE * tolerance_for(obs.inputs.dtype).rtol:
            return False
        judged = self.prober.observe(obs.inputs, regression=True)
        reg = judged.result.check("regression")
        return reg.ran and reg.passed and reg.cause != "not_comparable"

    def _observe(self, inputs):
        """A check's input; judged under the regression rule too only if it passes without."""
        obs = self.prober.observe(inputs)
        return self.prober.observe(inputs, regression=True) if obs.passed else obs

    def _relations(self, check, recipe, need: bool) -> list:
        if not isinstance(recipe, Recipe):
            return []
        prop = sources.property_name(check)
        if prop == "repeated_calls" or need:
            first = self.prober.observe(recipe)
            found = Isolation(self.prober, self.residual, self.k).stale(first, "regression")
            if found is not None:
                self.add(found)
                return [found.trigger]
        probes = sources.relational_probes(check, recipe)
        out = []
        for p in probes if need else probes[:1]:
            obs = self.prober.observe(p)
            if not obs.passed:
                out.append(obs)
                break
        return out

    def _history(self, check) -> bool:
        """A failing call history, re-run small (``equiv.ops.draft_topk.diagnose.calls``); False if that shows
        nothing (the check's own recipe is then re-run alone, as any check's)."""
        found = calls.isolate(self.prober, check, self.k)
        for finding in found:
            _trace(check.name, "->", finding.kind, "at", finding.trigger.inputs)
            s = self.add(finding)
            if check.name not in s.checks:
                s.checks.append(check.name)
        return bool(found)

    def _mtp(self, check) -> None:
        consumer = sources.consumer_of(check)
        wanted = INDEX | OOV if consumer in ("greedy", "target_only") else INDEX | OOV | VALUE
        owners = [s for s in self.suspects if s.bits & wanted or s.kind in STATUS_KIND.values()]
        owners = owners or self.suspects            # downstream of whatever is wrong upstream
        for s in owners:
            s.checks.append(check.name)
        if not owners:
            self.unexplained.append(check.name)

    def _unrun(self, check) -> None:
        """A hang or an abnormal end (exit, signal, interrupt): named from the check itself; the
        input is not re-run (each re-run would cost a time-out or a worker restart)."""
        kind = abnormal_kind(check)
        inputs = sources.inputs_of(check)
        trigger = _Unrun(inputs[0] if inputs else check.name, check, status=kind)
        s = self.add(Finding(kind, kind, trigger))
        s.checks.append(check.name)

    # -- the end -------------------------------------------------------------------------------
    def history_dependent(self) -> None:
        """A check whose input passes alone failed after other calls: a stale defect explains it."""
        stale = [s for s in self.suspects if s.kind == "stale_output"]
        for check, had_inputs in self.alone_passing:
            if stale and had_inputs:
                stale[0].checks.append(check.name)
            else:
                self.unexplained.append(check.name)

    def consolidate(self) -> None:
        for s in list(self.suspects):
            others = [o for o in self.suspects if o is not s]
            triggers = [f.trigger for f in s.findings]
            if not others or any(not hasattr(t, "result") or not self.residual(t, among=others).empty
                                 for t in triggers):          # a hang or a history is not re-judged
                continue
            self.suspects.remove(s)
            for o in [o for o in others if any(o in self.explainers(t) for t in triggers)]:
                o.checks += [c for c in s.checks if c not in o.checks]
        self.suspects = [s for s in self.suspects if s.checks]


@dataclass(frozen=True)
class _Unrun:
    """A trigger the diagnosis does not re-run (a hang): the check's own input and REPRO."""

    inputs: object
    check: object
    faults: object = None
    status: str = "hang"


LIKENESS_RUNS = 2


def _likeness(check):
    """Checks alike enough that two of them re-run and wholly explained by the same defects stand
    for the rest: the same stage, the same failing sub-checks of compare, the same dtype, padding
    and poisoning of the input. None for a check that carries no recipe (``Check.recipe``)."""
    stage = check.stage
    if not getattr(check, "recipe", None) or not check.subject:
        return None
    try:
        r = Recipe.parse(check.recipe)
    except InvalidArgument:
        return None
    return (stage, tuple(sorted(getattr(check, "parts", ()))), r.dtype, r.pad > 0, r.offset > 0,
            r.family == "poison_mix")


# How compare words a contract break of each contract kind (a shortcut for checks of a kind
# already isolated; an index out of range is not one: it is read per row).
# A contract defect kind and the breaks (``Check.cause``: compare's ``ContractBreak.cause`` or
# the ``CallOutcome.kind`` of the call) that are it.
_CONTRACT_CAUSES = {"input_write": ("input",), "output_format": ("format",), "crash": ("raised",),
                    "output_reused": ("outputs",)}

# How a call that stops a worker ended (``Check.outcome``: the ``CallOutcome.kind`` of
# ``equiv.run``, or the properties stage's own time-out), and the defect kind it is.
_ABNORMAL = {"timeout": "hang", "exit": "crash", "signal": "crash", "interrupt": "crash"}


def abnormal_kind(check) -> str | None:
    return _ABNORMAL.get(getattr(check, "outcome", None))


def _same_residual(a: Residual, b: Residual) -> bool:
    return a.status == b.status and a.regression == b.regression and np.array_equal(a.rows, b.rows)


def diagnose(spec, checks, *, k: int = 1, device: str = "cpu", timeout: float | None = DEFAULT_TIMEOUT_S,
             dtype: str = "float32", budget_s: float | None = None, max_calls: int = 400) -> Diagnosis:
    """The defects behind ``checks`` (objects with ``name``, ``passed``, ``detail``,
    ``counterexample``, ``repro``) of candidate ``spec`` judged at ``k`` on ``device``."""
    t0 = time.perf_counter()
    failing = [c for c in checks if not c.passed]
    if not failing:
        return Diagnosis(str(getattr(spec, "spec", spec)))
    deadline = None if budget_s is None else t0 + budget_s
    prober = Prober(spec, k=k, device=device, timeout=timeout, deadline=deadline, max_calls=max_calls)
    work = _Work(prober, k)
    unrun = [c for c in failing if abnormal_kind(c) is not None]
    for c in unrun:                              # never re-run a call that hung or ended abnormally
        work._unrun(c)
    if not unrun:
        bland = prober.observe(Recipe.parse(BLAND.format(dtype=dtype)).with_(vocab=max(1000, k)))
        if not bland.passed:
            work.settle(bland)
    for c in sorted((c for c in failing if c not in unrun), key=_stage_order):
        work.check(c)
    work.deferring = True
    for c in work.regression_only:
        work.check(c)
    work.history_dependent()
    work.consolidate()
    defects = tuple(defect_of(s, prober) for s in sorted(work.suspects, key=_report_order))
    return Diagnosis(prober.spec, defects, tuple(dict.fromkeys(work.unexplained)),
                     tuple(dict.fromkeys(work.tolerance_edge)), tuple(work.by_likeness),
                     tuple(dict.fromkeys(work.not_diagnosed)), prober.calls, time.perf_counter() - t0)


def _report_order(s: _Suspect):
    kind = KINDS[s.kind]
    rank = {"process": 0, "memory": 1, "tokens": 2, "probabilities": 3}
    tokens = kind.affects == "tokens" or bool(s.bits & (INDEX | OOV))
    return (rank[kind.affects] if not tokens or kind.affects in ("process", "memory") else 2, kind.severity)


def defect_of(suspect, prober):
    f = suspect.finding
    kind = KINDS[suspect.kind]
    device = prober.device.split(":")[0]
    affects = kind.affects
    if affects not in ("process", "memory"):
        affects = "tokens" if suspect.bits & (INDEX | OOV) else "probabilities"
    return Defect(cause=kind.name, title=kind.title, explanation=kind.explanation, where=affects,
                  trigger=render.trigger_text(f), evidence=render.evidence_all(suspect), checks=tuple(suspect.checks),
                  repro=render.repro_of(f, prober.spec, prober.k, device))
