"""Call-history defects: a failing ``call_history`` check re-run as the smallest history that shows it.

Plan
----
The property ``call_history`` (``equiv.ops.draft_topk.history``) fails on a long history of
calls; its check says what failed as data (``Check.parts``: ``history:in_place``,
``history:run`` or ``history:reread``, and the wrong answer's stage of compare). Each is re-run
small, at a shape of two rows that this process has not called yet (a per-shape count or cache
starts afresh there), through the prober's history call (``Prober.history``):

- ``history:reread`` (or a check whose call saw an earlier output change: ``Check.outcome``
  ``outputs``, from ``equiv.run.invoke``): ``REREAD`` fresh inputs, every output kept alive
  and re-read after each of the ``history_plan.KEEP - 1`` = 16 calls after it. A kept output that
  changes -> ``output_reused``, named with N, the number of calls after which it changed (a ring
  of N output buffers), and whose answer it then holds.
- ``history:in_place``: two calls on one storage rewritten in place. The second answer is the
  first's -> ``stale_output`` (answers keyed by the input's address); the complement, the same
  two inputs each in its own storage, must pass.
- ``history:run``: ``RUN`` fresh inputs at one shape. The first wrong answer, at call N + 1 with
  N >= 1, that repeats no earlier answer, and again first at call N + 1 on a second fresh shape
  with other inputs (seeds from ``OTHER_SEEDS``: an input-dependent bug fails elsewhere there), at
  call N + 1 or up to ``SLACK`` calls later (a wrong path can be right on an input by luck), and
  at least ``MOSTLY`` of the calls after N wrong (a path that switched, not a sporadic input
  bug) -> ``after_n_calls``; a wrong answer that repeats an earlier one is ``stale_output``.
A check with no ``history:`` part runs all three. A wrong answer that breaks the contract, or a
history that shows none of these, is left to the single-call path of ``equiv.ops.draft_topk.diagnose.core``
(the check's recipe, ``Check.recipe``, re-run alone).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from equiv.ops.draft_topk.compare import answer_stage
from equiv.ops.draft_topk.diagnose.isolate import Finding
from equiv.ops.draft_topk.diagnose.probe import row_faults
from equiv.ops.draft_topk.history_plan import KEEP, HistoryPlan, problems, same_value
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run import Array

RUN = 160                        # calls of one shape the run tries (after_n_calls)
REREAD = 18                      # calls of the re-read history: each output re-read 16 calls on
OTHER_SEEDS = 10_000             # the second run's first seed
SLACK = 3                        # calls after n + 1 where the second run's first wrong answer may come
MOSTLY = 0.5                     # the share of calls after the first wrong one that must be wrong too
BATCH = 2
_USED: set = set()               # shapes given to histories in this process
_VOCABS = itertools.count(2003, 2)


@dataclass(frozen=True)
class HistoryTrigger:
    """The smallest history that shows a call-history defect (in place of an ``Observation``)."""

    inputs: str                                  # the history in words (the defect's trigger)
    replay: str                                  # a REPRO line that runs it and prints its problems
    faults: np.ndarray = field(default=None, repr=False)
    status: str = "fail"


def is_history(check) -> bool:
    return check.name == "property:call_history"


def outputs_reused(check) -> bool:
    """A check whose call saw the outputs of an earlier call change (``equiv.run.invoke``)."""
    return getattr(check, "outcome", None) == "outputs" or getattr(check, "cause", None) == "outputs"


def contract_break(check) -> bool:
    return "contract" in tuple(getattr(check, "parts", ()) or ())


def _fresh_vocab(prober) -> int:
    seen = prober.seen_shapes()
    v = next(v for v in _VOCABS if (BATCH, v) not in seen and v not in _USED)
    _USED.add(v)
    return v


def _recipe(seed: int, vocab: int) -> str:
    return f"gaussian:seed={seed},batch={BATCH},vocab={vocab},dtype=float32"


def _plan(n: int, k: int, rewrites: int = 0, keep: int = 1, vocab: int | None = None, first_seed: int = 0):
    """``n`` fresh gaussian inputs at ``[BATCH, vocab]``, seeds ``first_seed`` on."""
    return HistoryPlan(tuple(_recipe(first_seed + i, vocab) for i in range(n)), rewrites, keep, k)


def _replay(plan, spec: str, device: str) -> str:
    first, vocab = _seed_of(plan.recipes[0]), _vocab_of(plan)
    recipes = (f"tuple('{_recipe(0, vocab).replace('seed=0', 'seed=%d')}' % i for i in range({first}, "
               f"{first + plan.calls}))")
    return (f"REPRO: python -c \"import equiv; from equiv.ops.draft_topk import history as h; "
            f"p = h.HistoryPlan({recipes}, {plan.rewrites}, {plan.keep}, {plan.k}); "
            f"print(h.judge(p, h.probe(equiv.load_candidate('{spec}'), '{device}', p.payload())))\"")


def _faults(text: str, value, k: int):
    """Row fault bits of one answer (host arrays) to the recipe ``text``, or None."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, Array) for v in value)):
        return None
    r = Recipe.parse(text)
    p, idx = value[0].values.astype(np.float64), value[1].values.astype(np.int64)
    if p.shape != (r.batch, k) or idx.shape != p.shape:
        return None
    return row_faults(r.build("cpu").float().numpy(), p, idx, k, r.dtype)[0]


class _History:
    def __init__(self, prober, k: int):
        self.prober, self.k = prober, k

    def run(self, plan):
        reply = self.prober.history(plan)
        return reply, (problems(plan, reply, self.prober.device) if reply is not None else None)

    def trigger(self, plan, words: str, text: str, value) -> HistoryTrigger:
        return HistoryTrigger(words, _replay(plan, self.prober.spec, self.prober.device.split(":")[0]),
                              _faults(text, value, self.k))

    def reread(self):

        plan = _plan(REREAD, self.k, keep=KEEP, vocab=_fresh_vocab(self.prober))
        reply, found = self.run(plan)
        bad = [p for p in found or () if p.what == "reread"]
        if not bad:
            return None
        p = bad[0]
        value = next(v for after, j, v in reply["rereads"] if after == p.call and j == p.of)
        holds = [i + 1 for i, a in enumerate(reply["answers"]) if i != p.of and same_value(value, a)]
        when = ("at the end" if p.later is None
                else f"{p.later} call{'s' if p.later != 1 else ''} later (after call {p.call + 1})")
        evidence = (f"the outputs of call {p.of + 1} were right when returned and were overwritten {when}"
                    + (f": they then hold the answer of call {holds[0]}" if holds else "")
                    + (f"; a ring of {p.later} output buffers" if p.later else "")
                    + f" ({plan.calls} calls of fresh inputs at [{BATCH}, {_vocab_of(plan)}], every output kept)")
        words = (f"{plan.calls} calls of fresh inputs at [{BATCH}, {_vocab_of(plan)}], outputs kept and re-read"
                 + (f": overwritten {p.later} calls later" if p.later else ""))
        return Finding("output_reused", "history", self.trigger(plan, words, p.recipe, value),
                       facts={"evidence": evidence, "n": p.later})

    def in_place(self):
        vocab = _fresh_vocab(self.prober)
        plan = _plan(2, self.k, rewrites=2, vocab=vocab)
        reply, found = self.run(plan)
        bad = [p for p in found or () if p.what == "in_place"]
        if not bad or not same_value(reply["answers"][1], reply["answers"][0]):
            return None
        apart = _plan(2, self.k, vocab=_fresh_vocab(self.prober))
        _, apart_found = self.run(apart)
        if apart_found is None or apart_found:
            return None
        evidence = (f"call 2, on the storage of call 1 rewritten in place with other logits, returned "
                    f"call 1's answer; passes with the same two inputs each in its own storage")
        words = f"2 calls at [{BATCH}, {vocab}] on one storage rewritten in place"
        return Finding("stale_output", "history", self.trigger(plan, words, plan.recipes[1], reply["answers"][1]),
                       facts={"evidence": evidence})

    def first_wrong(self, first_seed: int = 0):
        """(plan, reply, index of the first wrong answer or None) of a run at a fresh shape."""
        plan = _plan(RUN, self.k, vocab=_fresh_vocab(self.prober), first_seed=first_seed)
        reply, found = self.run(plan)
        bad = [p for p in found or () if p.what == "run"]
        return plan, reply, (bad[0].call if bad else None)

    def after_n(self):
        plan, reply, n = self.first_wrong()
        if not n:                                # none wrong, or the first call already
            return None
        wrong = reply["answers"][n]
        vocab = _vocab_of(plan)
        if any(same_value(wrong, a) for a in reply["answers"][:n]):
            evidence = f"call {n + 1} at [{BATCH}, {vocab}] returned the answer of an earlier call"
            return Finding("stale_output", "history", self.trigger(plan, f"{n + 1} calls of fresh inputs at "
                           f"[{BATCH}, {vocab}]", plan.recipes[n], wrong), facts={"evidence": evidence})
        if _share_wrong(plan, reply, n, self.k, self.prober.device) < MOSTLY:
            return None                          # sporadic failures: the inputs decide, not the count
        # other inputs (seeds far from the first run's: a fresh V alone keeps a row's first draws)
        again = self.first_wrong(first_seed=OTHER_SEEDS)
        # a wrong path may still be right on a few inputs (the call after the switch can pass by
        # luck): the other run's first wrong call must come at n + 1 or within SLACK calls after
        if again[2] is None or not n <= again[2] <= n + SLACK:    # the inputs decide: not this kind
            return None
        other = f"call {again[2] + 1}" + (" too" if again[2] == n else "")
        evidence = (f"the first {n} calls of a shape are right, call {n + 1} is not (at "
                    f"[{BATCH}, {vocab}]; with other inputs at [{BATCH}, {_vocab_of(again[0])}], a fresh "
                    f"shape, the first wrong answer is at {other})")
        return Finding("after_n_calls", "history",
                       self.trigger(plan, f"{n + 1} calls of fresh inputs at [{BATCH}, {vocab}]",
                                    plan.recipes[n], wrong), facts={"evidence": evidence, "n": n})


def _share_wrong(plan, reply, n: int, k: int, device: str) -> float:
    """The share of the calls from ``n`` on whose answer is wrong."""
    later = list(zip(plan.recipes[n:], reply["answers"][n:]))
    wrong = sum(answer_stage(v, Recipe.parse(t).build("cpu"), k, device) is not None for t, v in later)
    return wrong / max(len(later), 1)


def _vocab_of(plan) -> int:
    return Recipe.parse(plan.recipes[0]).vocab


def _seed_of(text: str) -> int:
    return Recipe.parse(text).seed


_BY_PART = {"history:reread": "reread", "history:in_place": "in_place", "history:run": "after_n"}


def isolate(prober, check, k: int) -> list:
    """The call-history findings behind a failing ``call_history`` check (module docstring)."""
    parts = [p for p in (getattr(check, "parts", ()) or ()) if p in _BY_PART]
    steps = ([_BY_PART[p] for p in parts] or (["reread"] if outputs_reused(check) else [])
             or list(_BY_PART.values()))
    h = _History(prober, k)
    out = []
    for step in steps:
        if prober.exhausted:
            break
        found = getattr(h, step)()
        if found is not None:
            out.append(found)
    return out
