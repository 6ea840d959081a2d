"""Defects of the call rather than of the input: wrong only at some k, or only in some calling context.

A gate check names the k and the calling context of its failing call as data
(``Check.evidence``: ``{"k": 2, "context": "inference_mode"}``; the MTP stage's tree checks carry
``k``). The single-call isolation of ``equiv.ops.draft_topk.diagnose.core`` re-runs a failing
input at one k in the caller's own context, where such a candidate is right, so it would name
nothing. This module names both by cause, from re-runs of the failing input, before that
isolation runs:

Plan
----
- ``k_dependent``: the run judged several k (``ks``), some check failed at a k above the
  smallest, and none at the smallest. The first such check's recipe is re-run in its context at
  the smallest k (must pass) and at its own k (must fail): the defect claims every failing check
  at a larger k, the MTP tree at those k and ``property:topk_ordering`` (k >= 2 by design).
  When the failure at the larger k is the output's shape and one more call there shows both
  outputs with as many columns as the smallest k (a top-1 path that ignores ``k``), the defect
  says so in its title and names the fix: judge it at that k (``--k 1``), or make it refuse
  (``NotImplementedError``) or declare (``supported_k``) the k it serves.
- ``context_dependent``: a failing check's recipe is re-run in every context the device offers
  (``equiv.run.context.available``); it must fail in its own and pass in at least one other.
  The defect names the failing contexts, and claims every failing check whose own context is one
  of them, the failing MTP checks (the decoder deals every context over its calls), and every
  other failing check whose recipe (``Check.recipe``) fails again in a failing
  context and passes in a passing one (a property's input: the suite draws its context per input).
Each re-run is one ``compare`` through the candidate's runner (a few calls in all). The rest of
the failing checks go to the usual isolation (``diagnose``).
"""
from __future__ import annotations

from dataclasses import replace

from equiv.checks import Defect
from equiv.ops.draft_topk.compare import compare
from equiv.ops.draft_topk.diagnose.taxonomy import KINDS
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run import Array, runner_for
from equiv.run.context import available

ALWAYS_K2 = ("property:topk_ordering",)      # judged at k >= 2 only
IGNORES_K_TITLE = "serves k = {k} only: it ignores k"
IGNORES_K = ("it returns {k} column{s} whatever k it is given (at k = {k_bad} too): right for an engine that "
             "calls it at k = {k} only, wrong at every k above. If that is how it is used, judge it there: "
             "`equiv gate --candidate {spec} --k {k}`; or make it refuse the k it does not serve (raise "
             "NotImplementedError for k != {k}) or declare them (`fn.supported_k = ({k},)`), and the gate "
             "judges only those")


def k_of(check) -> int | None:
    ev = getattr(check, "evidence", None) or {}
    k = ev.get("k") if isinstance(ev, dict) else None
    return int(k) if isinstance(k, int) else None


def context_of(check) -> str | None:
    ev = getattr(check, "evidence", None) or {}
    return ev.get("context") if isinstance(ev, dict) else None


def _recipe(check):
    text = getattr(check, "recipe", None)
    try:
        return Recipe.parse(text) if text else None
    except Exception:                            # a raw input or an unparsable note: not re-run here
        return None


def _first_line(res) -> str:
    return "; ".join(f"{c.name}: {c.detail}" for c in res.failed_checks)[:200]


def _defect(cause: str, trigger: str, evidence: str, checks, repro: str, data: dict) -> Defect:
    kind = KINDS[cause]
    return Defect(cause=cause, title=kind.title, explanation=kind.explanation, where="tokens",
                  trigger=trigger, evidence=evidence, checks=tuple(dict.fromkeys(checks)), repro=repro, data=data)


def k_dependent(spec, failing, ks, device, timeout):
    """The ``k_dependent`` defect behind ``failing`` (module docstring), or None; and its calls."""
    ks = tuple(sorted(set(ks)))
    if len(ks) < 2:
        return None, 0
    known = [(k_of(c), c) for c in failing if k_of(c) is not None]
    if not known or any(k == ks[0] for k, _ in known):
        return None, 0
    k_bad, first = min(((k, c) for k, c in known if _recipe(c) is not None), key=lambda kc: kc[0],
                       default=(None, None))
    if first is None:
        return None, 0
    recipe, ctx = _recipe(first), context_of(first)
    at_min = compare(spec, recipe.with_(vocab=max(recipe.vocab, ks[0])), k=ks[0], timeout=timeout, device=device,
                     context=ctx)
    at_bad = compare(spec, recipe, k=k_bad, timeout=timeout, device=device, context=ctx)
    if not at_min.passed or at_bad.passed:
        return None, 2
    bad_ks = sorted({k for k, _ in known})
    claimed = [c.name for k, c in known] + [c.name for c in failing if c.name in ALWAYS_K2]
    evidence = (f"right at k = {ks[0]} on {recipe}, wrong at k = {k_bad} on the same input; failing "
                f"checks at k = {', '.join(map(str, bad_ks))}, none at k = {ks[0]}; at k = {k_bad}: "
                f"{_first_line(at_bad)}")
    data = {"passing_k": [ks[0]], "failing_k": bad_ks}
    probe = at_bad.contract_cause == "format"         # the shape broke: did it ignore k?
    columns = _columns(spec, recipe, k_bad, device, timeout, ctx) if probe else None
    found = _defect("k_dependent", f"{recipe} at k = {k_bad}", evidence, claimed, at_bad.repro, data)
    if columns != ks[0]:
        return found, 2 + probe
    return replace(found, title=IGNORES_K_TITLE.format(k=ks[0]), explanation=IGNORES_K.format(
        k=ks[0], s="s" * (ks[0] > 1), k_bad=k_bad, spec=spec), data=data | {"ignores_k": True, "fix": f"--k {ks[0]}"}), 3


def _columns(spec, recipe, k, device, timeout, context) -> int | None:
    """The columns of both outputs of ``spec`` called on ``recipe`` at ``k`` (from the returned
    shapes, as data), or None when the call or its answer has no such common count."""
    got = runner_for(spec, device, timeout).call(recipe, k, timeout=timeout, context=context)
    value = got.value if got.ok else None
    if not isinstance(value, (tuple, list)) or len(value) != 2 or not all(isinstance(t, Array) for t in value):
        return None
    shapes = {tuple(t.shape) for t in value}
    shape = shapes.pop() if len(shapes) == 1 else ()
    return shape[-1] if len(shape) == 2 else None


def context_dependent(spec, failing, device, timeout):
    """The ``context_dependent`` defect behind ``failing`` (module docstring), or None; and its calls."""
    first = next((c for c in failing if context_of(c) and _recipe(c) is not None), None)
    if first is None:
        return None, 0
    recipe, k = _recipe(first), k_of(first) or 1
    results = {ctx: compare(spec, recipe, k=k, timeout=timeout, device=device, context=ctx)
               for ctx in available(device)}
    calls = len(results)
    bad = [c for c, r in results.items() if not r.passed]
    good = [c for c, r in results.items() if r.passed]
    if not good or context_of(first) not in bad:
        return None, calls
    claimed = [c.name for c in failing if context_of(c) in bad]
    claimed += [c.name for c in failing if c.stage == "mtp"]    # the decoder deals every context
    for c in failing:                            # a property's input: its context was drawn per input
        other = _recipe(c)
        if c.name in claimed or other is None or context_of(c):
            continue
        kk = k_of(c) or 1
        calls += 2
        if (not compare(spec, other, k=kk, timeout=timeout, device=device, context=bad[0]).passed
                and compare(spec, other, k=kk, timeout=timeout, device=device, context=good[0]).passed):
            claimed.append(c.name)
    evidence = (f"{recipe} at k = {k} fails under {', '.join(bad)} and passes under {', '.join(good)}; "
                f"under {bad[0]}: {_first_line(results[bad[0]])}")
    return _defect("context_dependent", f"{recipe} called under {bad[0]}", evidence, claimed,
                   results[bad[0]].repro, {"failing_contexts": bad, "passing_contexts": good}), calls


def by_dimension(spec, checks, ks, device, timeout) -> tuple:
    """(defects, names of the checks they claim, calls made) for the failing ``checks``."""
    failing = [c for c in checks if not c.passed]
    defects, claimed, calls = [], set(), 0
    for find in (lambda rest: k_dependent(spec, rest, ks, device, timeout),
                 lambda rest: context_dependent(spec, rest, device, timeout)):
        rest = [c for c in failing if c.name not in claimed]
        if not rest:
            break
        found, n = find(rest)
        calls += n
        if found is not None:
            defects.append(found)
            claimed.update(found.checks)
    return tuple(defects), claimed, calls
