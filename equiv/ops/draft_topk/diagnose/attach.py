"""The diagnosis stage as ``gate``, ``check`` and ``report`` call it (one function each).

Plan
----
- The stage runs only when something failed: a passing run returns an empty ``Diagnosis``
  without a call.
- Its deadline is a share of the run's own wall time (``SHARE`` of it, at least ``MIN_S``), so
  the diagnosis adds at most about half to a failing gate; what the deadline leaves is listed as
  not diagnosed.
- ``for_gate`` takes the gate's checks as they are: the defects of the call first (wrong only at
  some k, or in some calling context: ``dimensions``), then the rest isolated as usual; ``for_comparison`` turns one failing
  ``compare`` (``equiv check``) into its single check; ``for_report`` turns each failing row of a
  tolerance report into a check of its path and diagnoses each failing path, and
  ``with_defects`` puts them in the rendered report.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace

from equiv.checks import Check
from equiv.ops.draft_topk.diagnose.core import Diagnosis, diagnose
from equiv.ops.draft_topk.diagnose.dimensions import by_dimension

SHARE = 0.45                 # of the run's own wall time
MIN_S = 2.0


def budget_for(elapsed_s: float) -> float:
    return max(MIN_S, SHARE * float(elapsed_s))


def for_gate(spec: str, checks, *, k: int, device: str, timeout: float, elapsed_s: float,
             ks=None) -> Diagnosis:
    """The gate's diagnosis: first the defects of the call (wrong only at some of ``ks``, or only
    in some calling context: ``dimensions``), then the usual isolation of the other failing checks
    at ``k``."""
    if all(c.passed for c in checks):
        return Diagnosis(spec)
    t0 = time.perf_counter()
    found, claimed, calls = by_dimension(spec, checks, ks or (k,), device, timeout)
    rest = [c for c in checks if c.name not in claimed]
    if all(c.passed for c in rest):
        return Diagnosis(str(getattr(spec, "text", spec)), found, calls=calls,
                         duration_s=time.perf_counter() - t0)
    diag = diagnose(spec, rest, k=k, device=device, timeout=timeout, budget_s=budget_for(elapsed_s))
    return replace(diag, defects=found + diag.defects, calls=diag.calls + calls,
                   duration_s=time.perf_counter() - t0)


def for_comparison(spec: str, result, *, device: str, timeout: float | None, elapsed_s: float) -> Diagnosis:
    if result.passed:
        return Diagnosis(spec)
    detail = "; ".join(f"{c.name}: {c.detail}" for c in result.failed_checks)
    check = Check("check", "check", False, detail, recipe=result.recipe, counterexample=f"recipe {result.recipe}" if result.recipe else None,
                      repro=result.repro)
    return diagnose(spec, [check], k=result.k, device=device, dtype=result.dtype,
                    timeout=timeout, budget_s=budget_for(elapsed_s))


def for_report(report, *, timeout: float | None, elapsed_s: float) -> dict:
    """``{path: Diagnosis}`` for every path with a failing row of ``report``."""
    failing = [r for r in report.rows if not r.passed]
    paths = list(dict.fromkeys(r.path for r in failing))
    out = {}
    for path in paths:
        checks = [Check("report", f"report:{r.family}:{r.dtype}", False, ", ".join(r.failed_checks),
                        subject=f"{r.family}:{r.dtype}", repro=r.repro, recipe=r.recipe)
                  for r in failing if r.path == path]
        out[path] = diagnose(path, checks, k=report.k, device=report.device, timeout=timeout,
                             budget_s=budget_for(elapsed_s) / len(paths))
    return out


def with_defects(text: str, fmt: str, diagnoses: dict) -> str:
    """A rendered report with its paths' defects: a ``defects`` key in JSON (``{path: [...]}``),
    a block per failing path before a table or Markdown report; HTML is left as it is."""
    if not diagnoses:
        return text
    if fmt == "json":
        doc = json.loads(text)
        doc["defects"] = {p: [d.to_json() for d in diag.defects] for p, diag in diagnoses.items()}
        return json.dumps(doc, indent=2)
    if fmt in ("table", "markdown"):
        blocks = [f"{path}: {diag.summary()}" for path, diag in diagnoses.items()]
        return "\n".join(blocks) + "\n\n" + text
    return text
