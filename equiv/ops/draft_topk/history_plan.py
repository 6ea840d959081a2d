"""Call histories: what a candidate does across many calls, as an engine calls it (the plan and
the judge; the probe that runs a plan is ``equiv.ops.draft_topk.history``).

A single call's answer says nothing about a path that recycles its output buffers across two or
more calls, keys its answers by the input's address (as a CUDA-graph engine's captured inputs
are: same storage, new values), or changes after its first N calls of a shape (an autotuner, a
warm-up path, a cache that fills). This module plans such histories, runs them where the
candidate runs, and hands back raw outputs for the verdict process to judge.

Plan
----
- ``plan_for(budget, seed, ...)``: a ``HistoryPlan``: ``rewrites`` calls on ONE input storage
  rewritten in place between calls (``equiv.run.seeded.rewrite``: ``x.copy_(next values)``, and
  every other time through ``x.data``, which leaves ``x._version`` as it was), then ``run_calls`` calls with
  fresh inputs at the same shape (``SHAPE``, [8, 4097]: cheap); the outputs of the last
  ``keep`` calls are kept alive, so each output is re-read after each of up to ``KEEP - 1`` = 16
  later calls and once more at the end (a ring of N output buffers overwrites an output N calls
  later). ``run_calls`` is the N of "behaviour after the first N calls of a shape" (``RUN_CALLS``:
  quick 200, so 206 calls at one shape, past an autotuner that switches after 100; full 512).
  Each call has its calling context (``space.context_draws``: every context the device offers,
  dealt in a seeded order) and its input sits in a guard band (``equiv.run.guard.Guarded``) at
  a drawn offset of 0-15 elements past an aligned start, as every call through ``equiv.run`` does.
- ``probe(fn, device, payload)`` runs the plan in the candidate's process (``equiv.run``'s
  probe: the worker for a user's candidate) and returns only host arrays: each call's answer
  read right after the call, every re-read of a kept output, and each write into an input or
  its guard band. Outputs are read by ``equiv.run.invoke.to_host`` (torch functions disabled;
  a tensor subclass crosses as Opaque).
- ``judge(plan, reply)`` (the verdict process): each answer against the float64 reference of
  its recipe (``compare.answer_stage``), and every re-read bit-identical to the answer it
  re-reads. Returns the problems, one line each, first the earliest; ``problems`` returns them
  as data (``Problem``: what went wrong, at which call, in which context, the failing stage, how
  many calls after an output it changed), which the property hands to the gate as
  ``Check.parts`` for the diagnosis.
- ``KINDS`` names what a run covered (the gate's coverage table, dimension ``history``).

This module imports no torch (the gate's plan reads it at its start); ``history.py``, the probe,
runs where the candidate is called and imports torch at its top.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.ops.draft_topk.compare import answer_stage
from equiv.ops.draft_topk.recipes import Recipe
from equiv.ops.draft_topk.space import context_draws
from equiv.run import Array

KINDS = ("in-place rewrite of one storage (with and without a version bump)", "kept outputs re-read after every call",
         "long run of fresh inputs at one shape")
RUN_CALLS = {"quick": 200, "full": 512}          # N: calls at one shape in one run
REWRITES = {"quick": 6, "full": 32}
KEEP = 17                                        # outputs kept alive: each re-read after 16 later calls
OFFSETS = 16                                     # guard-band offsets drawn from 0..15 elements
SHAPE = (8, 4097)                                # [B, V] of the history (capped by the subject)


@dataclass(frozen=True)
class HistoryPlan:
    recipes: tuple                               # recipe strings, in call order
    rewrites: int                                # the first ``rewrites`` share one storage
    keep: int
    k: int
    contexts: tuple = ()                         # the calling context of each call (None: the caller's)
    offsets: tuple = ()                          # the guard-band offset of each call's input

    @property
    def calls(self) -> int:
        return len(self.recipes)

    def payload(self) -> dict:
        """What ``probe`` takes, where the candidate runs."""
        return {"recipes": self.recipes, "rewrites": self.rewrites, "keep": self.keep, "k": self.k,
                "contexts": self.contexts, "offsets": self.offsets}

    def context(self, i: int):
        return self.contexts[i] if i < len(self.contexts) else None

    def reach(self) -> dict:
        return {"history": list(KINDS), "calls per shape": f"{self.calls} at one shape "
                f"({self.rewrites} on one storage rewritten in place, each output re-read after each "
                f"of the {self.keep - 1} calls after it; contexts "
                f"{', '.join(sorted({c for c in self.contexts if c}))}; guard-band offsets "
                f"{min(self.offsets, default=0)}-{max(self.offsets, default=0)})"}


def plan_for(budget: str, seed: int, *, dtype: str = "float32", k: int = 1, max_batch: int = SHAPE[0],
             max_vocab: int = SHAPE[1], device: str = "cpu", context: str = "drawn") -> HistoryPlan:
    """The history of ``budget`` (module docstring); ``context`` names one calling context for
    every call instead of dealing them."""
    batch, vocab = min(SHAPE[0], max_batch), max(min(SHAPE[1], max_vocab), k)
    families = ("gaussian", "confident", "zipf", "masked")
    n = REWRITES[budget] + RUN_CALLS[budget]
    recipes = tuple(str(Recipe(family=families[i % len(families)], seed=seed + i, batch=batch,
                               vocab=vocab, dtype=dtype)) for i in range(n))
    rng = np.random.default_rng([seed, 0x41])
    contexts = tuple(context_draws(rng, device, n)) if context == "drawn" else (context,) * n
    offsets = tuple(int(o) for o in rng.integers(0, OFFSETS, n))
    return HistoryPlan(recipes, REWRITES[budget], KEEP, k, contexts, offsets)


def same_value(a, b) -> bool:
    if not (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b)):
        return False
    return all(isinstance(x, Array) and isinstance(y, Array) and x.values.shape == y.values.shape
               and np.array_equal(x.values, y.values, equal_nan=x.values.dtype.kind == "f")
               for x, y in zip(a, b))


@dataclass(frozen=True)
class Problem:
    """One problem of a history's reply, as data (``what``: ``in_place`` -- a wrong answer on the
    storage rewritten in place --, ``run`` -- a wrong answer among fresh inputs of one shape --,
    ``reread`` -- a kept output that changed --, ``written`` -- an input or its guard band
    written); ``call`` is 0-based (for a re-read: the call after which it changed, ``plan.calls``
    at the end), ``of`` the call whose kept output changed, ``later`` how many calls after it
    (None: only at the end), ``stage`` the wrong answer's failing stage of compare (contract,
    index, value, poisoning), ``context`` the calling context of the call."""

    what: str
    call: int
    line: str
    of: int | None = None
    stage: str | None = None
    recipe: str | None = None                    # the input of the wrong answer, or of the kept output
    later: int | None = None
    context: str | None = None

    @property
    def parts(self) -> tuple:
        """The data a failing check carries (``Check.parts``): ``history:WHAT``, the stage, and for
        a re-read ``later:N`` (the output changed N calls after its own)."""
        return ((f"history:{self.what}",) + ((self.stage,) if self.stage else ())
                + ((f"later:{self.later}",) if self.later is not None else ()))


def problems(plan: HistoryPlan, reply: dict, device: str = "cpu") -> list:
    """The ``Problem`` s of a history's reply: the first wrong answer, then the first kept output
    that changed (module docstring)."""
    out = []
    answers = reply["answers"]
    for i, text in reply.get("written", ()):
        ctx = plan.context(i)
        out.append(Problem("written", i, f"call {i + 1}{f' under {ctx}' if ctx else ''}: the subject {text}",
                           stage="contract", recipe=plan.recipes[i], context=ctx))
    for i, (text, value) in enumerate(zip(plan.recipes, answers)):
        recipe = Recipe.parse(text)
        failed = answer_stage(value, recipe.build("cpu"), plan.k, device)
        if failed is not None:
            in_place = 0 < i < plan.rewrites
            ctx = plan.context(i)
            where = (f"call {i + 1} on one storage rewritten in place" if in_place
                     else f"call {i + 1} at [{recipe.batch}, {recipe.vocab}] (after {i} calls of this shape)")
            # the call's input sat at a guard-band offset: the recipe that replays it says so
            offset = plan.offsets[i] if i < len(plan.offsets) else 0
            shown = str(recipe.with_(offset=offset)) if offset and not recipe.offset else text
            out.append(Problem("in_place" if in_place else "run", i,
                               f"{where}{f' under {ctx}' if ctx else ''}, recipe {shown}: {failed[0]}: {failed[1]}",
                               stage=failed[0], recipe=shown, context=ctx))
            break
    for after, j, value in reply["rereads"]:
        if not same_value(value, answers[j]):
            later = after - j if after < plan.calls else None
            when = "at the end" if later is None else f"after call {after + 1}, {later} call(s) later"
            out.append(Problem("reread", after, f"the outputs of call {j + 1}, kept alive, changed {when}: "
                               f"it reuses its output buffers across calls, so a caller that keeps "
                               f"topk_p of earlier draft steps reads the wrong values", of=j,
                               recipe=plan.recipes[j], later=later))
            break
    return out


def judge(plan: HistoryPlan, reply: dict, device: str = "cpu") -> list:
    """The problems of a history's reply, one line each (module docstring)."""
    return [p.line for p in problems(plan, reply, device)]


def gate_coverage(stages, budget: str) -> dict:
    """The gate's coverage table: the tolerance stage's reach, the call history when the
    property suite ran it (``history.plan_for``), and what was not reached, per dimension."""
    by_name = {s.name: s for s in stages}
    tol, props = by_name.get("tolerance"), by_name.get("properties")
    out = dict(tol.ran.get("coverage", {})) if tol is not None and tol.status in ("pass", "FAIL") else {}
    ran_history = props is not None and "call_history" in props.ran.get("examples", {})
    if ran_history:
        device = tol.ran.get("device", "cpu") if tol is not None else "cpu"
        out.update(plan_for(budget, 0, device=device).reach())
    elif out:
        out["history"] = "not run (the property suite's call_history did not run)"
    return out
