"""Defects as a reader meets them: the console block, the JSON entry, the JUnit test case.

Plan
----
- ``defect_of(suspect, prober)`` turns an isolation's finding into a ``Defect``: the kind's title
  and one-line explanation (``equiv.ops.draft_topk.diagnose.taxonomy``), the trigger (the smallest failing
  input, as a recipe string when it is one), the evidence (the kind's own numbers, the failing
  line of ``compare`` at the trigger, and each complement that passes), the failing checks it
  explains, and a REPRO line that replays the trigger alone (``equiv check`` for a recipe; a
  ``python -c`` line for a raw array or for two calls in a row).
The console block and the JUnit cases are ``equiv.checks.Diagnosis``'s, the same for every op.
"""
from __future__ import annotations

import numpy as np

from equiv.ops.draft_topk.diagnose.probe import OOV, RawInput
from equiv.ops.draft_topk.diagnose.taxonomy import KINDS

_FEATURE = {"pad": "the same values contiguous", "offset": "the same values at the base of their storage",
            "family": "the plain gaussian family, same seed", "mask": "the same rows masked at the tail",
            "dtype": "float32", "shift": "no shift", "scale": "scale 1"}


def trigger_text(finding) -> str:
    t = finding.trigger
    if finding.before is not None:
        return f"{t.inputs} called right after {finding.before.inputs}"
    if isinstance(t.inputs, RawInput):
        v = t.inputs.values
        shown = np.array2string(v, threshold=12, edgeitems=3, separator=", ").replace("\n", "")
        return f"{t.inputs}: {shown}"
    return str(t.inputs)


def _literal(values: np.ndarray) -> str:
    def one(v):
        return f"float('{v}')" if not np.isfinite(v) else repr(float(v))

    return "[" + ", ".join("[" + ", ".join(one(v) for v in row) + "]" for row in values) + "]"


def repro_of(finding, spec: str, k: int, device: str) -> str:
    t = finding.trigger
    if getattr(t, "replay", None):                 # a call history: its own replay line
        return t.replay
    check = getattr(t, "check", None)
    if check is not None:                          # not re-run: the check's own replay line
        return (check.repro or f"REPRO: equiv gate --candidate {spec} --k {k} --device {device}").splitlines()[0]
    if finding.before is not None:
        pair = ", ".join(f"'{r.inputs}'" for r in (finding.before, t))
        return (f"REPRO: python -c \"import equiv; f = equiv.load_candidate('{spec}'); "
                f"[print(equiv.compare(f, equiv.Recipe.parse(r).build('{device}'), k={k})) for r in ({pair})]\"")
    if isinstance(t.inputs, RawInput):
        x = f"torch.tensor({_literal(t.inputs.values)}).to(torch.{t.inputs.dtype})"
        if t.inputs.pad:
            x = (f"torch.nn.functional.pad({x}, (0, {t.inputs.pad}), value=1e4)[:, :{t.inputs.vocab}]")
        return (f"REPRO: python -c \"import equiv, torch; print(equiv.compare('{spec}', "
                f"{x}.to('{device}'), k={k}))\"")
    return t.result.repro


def _kind_facts(finding) -> list[str]:
    t, kind, facts = finding.trigger, finding.kind, finding.facts
    if "evidence" in facts:                        # a call history says it in its own words
        return [facts["evidence"]]
    if kind == "placeholder_probability":
        return [f"topk_p = {facts['constant']:g} on every row of two inputs whose exact probabilities "
                f"run from {facts['exact_lo']:.3g} to {facts['exact_hi']:.3g}"]
    if getattr(t, "faults", None) is None or t.idx is None:
        return []
    if kind == "out_of_vocabulary_index":
        b = int(t.rows_with(OOV)[0])
        return [f"row {b} ({t.ref.kind[b].replace('_', ' ')} row) returned index {int(t.idx[b, 0])} "
                f"with V = {t.inputs.vocab}"]
    if kind == "stale_output":
        b = 0
        return [f"the first call answered right; the second, on other logits of the same shape, returned "
                f"the same index {int(t.idx[b, 0])} (exact {int(t.ref.topk_index[b, 0])})"]
    if kind == "neighbour_rows":
        moved = dict(finding.necessary).get("neighbours")
        if moved is not None:
            b = int(np.flatnonzero(t.faults)[0])
            return [f"row {b} answers index {int(t.idx[b, 0])}, p {t.p[b, 0]:.6g} in its batch and index "
                    f"{int(moved.idx[b, 0])}, p {moved.p[b, 0]:.6g} when its neighbours are copies of it"]
    if kind in ("wrong_index", "rank_order"):
        rel = finding.facts.get("relation", ("any",))
        b = int(np.flatnonzero(t.faults)[0])
        if rel[0] == "offset":
            return [f"every wrong index is the exact one {rel[1]:+d} (row {b} of the trigger: "
                    f"{int(t.idx[b, 0])} for {int(t.ref.topk_index[b, 0])})"]
        if rel[0] == "rank" and kind == "wrong_index":
            return [f"returns the token of rank {rel[1]} (0 = best) in place of the top one"]
        return [f"row {b} returned {t.idx[b].tolist()} for exact {t.ref.topk_index[b].tolist()}"]
    return []


def _complements(finding) -> list[str]:
    out = []
    for feature, comp in finding.necessary:
        if comp is None or feature in ("neighbours", "call order"):
            continue
        if feature == "batch":
            what = f"B = {comp.inputs.batch}"
        elif feature == "vocab":
            what = f"V = {comp.inputs.vocab}"
        elif feature == "vocab above":
            what = f"V = {comp.inputs.vocab} too (larger; three seeds)"
        else:
            what = f"{_FEATURE.get(feature, feature)} ({comp.inputs})"
        out.append(f"passes with {what}")
    return out


def evidence_of(finding) -> str:
    t = finding.trigger
    parts = _kind_facts(finding)
    if hasattr(t, "result"):
        parts.append(f"fails: {t.symptom()[:240]}")
    elif getattr(t, "check", None) is not None:
        parts.append(f"{t.check.name}: {t.check.detail[:240]}")
    return "; ".join(parts + _complements(finding))


def evidence_all(suspect) -> str:
    """The naming finding's evidence, then one line per other finding merged into the defect."""
    main = suspect.finding
    rest = [f for f in suspect.findings if f is not main and f.kind != main.kind]
    text = evidence_of(main)
    for f in rest:
        text += f"; same cause ({', '.join(sorted({n for n, _ in f.necessary}))}) also shows as " \
                f"{KINDS[f.kind].title} on {trigger_text(f)}: {evidence_of(f)}"
    return text
