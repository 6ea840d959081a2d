"""The draft gate's ``mtp`` stage: the candidate decodes in its worker, this process judges.

Plan. The speculative-decoding harness runs as a probe in the candidate's worker (``probe.quick``
returns raw outcomes only) and ``run_mtp`` judges them here against ``softmax_topk`` on the same
seeds: under each consumer the candidate must be lossless, equivalent in accept length, and emit
no invalid output. Greedy, target-only and confidence chains draft at k = 1; the tree consumer
drafts at each k > 1 asked up to ``TREE_MAX_K`` (engines draft EAGLE trees at top-k 4-10; a larger
k asked, as ``--k auto`` draws 17-64, is judged by the tolerance stage alone and named in the
stage's ``not asked``: the tree consumer at k = 14 and 27 tripled the stage on the 2-core CPU,
7.6 -> 22.5 s). The gate judges a candidate strictly (no ledger). ``equiv.gate``
hands this function to the draft op's gate plan as a feature stage (a feature sits above the ops).
"""
from __future__ import annotations

import random
import time
from dataclasses import replace

from equiv.checks import Check, Stage, stage_of
from equiv.mtp.harness import run_mtp
from equiv.ops import ROLES, get_op
from equiv.run import runner_for
from equiv.run.context import available
from equiv.run.load import Candidate

K_ONE_CONSUMERS = ("greedy", "target_only", "confidence")
TREE_MAX_K = 10                  # the largest top-k a tree consumer drafts with here (module docstring)


def mtp_checks(spec, *, ks, device: str, seed: int, vocab: int, timeout: float | None,
               stage_timeout: float = 300, context: str = "drawn", lane: str = "") -> tuple[list[Check], Stage]:
    """The MTP harness (quick budget): the candidate decodes in its worker (a probe that returns
    raw outcomes only) and this process judges them against softmax_topk on the same seeds:
    under each consumer the candidate must be lossless, equivalent in accept length, and emit no
    invalid output. Greedy, target-only and confidence chains draft at k = 1; the tree consumer
    drafts at each k > 1 asked up to ``TREE_MAX_K``. The gate judges a candidate strictly (no ledger).
    Each call of the decoder runs in a calling context dealt from ``equiv.run.context.available``
    (``context`` names one for all instead), with its logits in a guard band at a drawn offset
    (``calling``); what was used is in the stage's ``ran``. ``lane``: the candidate's worker
    (``runner_for``; the gate runs this stage beside its tolerance stage, in a worker of its own)."""
    runner = runner_for(spec, device, timeout, lane=lane)
    runs = ([(list(K_ONE_CONSUMERS), None)] if 1 in ks else []) + [(["tree"], k) for k in ks if 1 < k <= TREE_MAX_K]
    not_asked = [] if any(k > 1 for k in ks) else ["tree (drafts at k > 1; this run judges k = 1 only)"]
    not_asked += [f"tree at k = {k} (the MTP stage drafts trees at top-k up to {TREE_MAX_K}, as engines do; "
                  f"the tolerance stage judges k = {k})" for k in ks if k > TREE_MAX_K]
    checks, used = [], {}
    t0 = time.perf_counter()
    for consumers, tree_k in runs:
        if getattr(runner, "stopped", None):
            checks.append(Check("mtp", "mtp", False, f"not run: {runner.stopped}", outcome="not_called"))
            break
        payload = {"name": spec.text, "builtin": spec.builtin, "consumers": consumers, "seed": seed,
                   "vocab": vocab, "tree_topk": tree_k, **calling(device, seed, context)}
        out = runner.probe("equiv.mtp.probe:quick", payload, timeout=None if timeout is None else
                           max(stage_timeout, timeout))
        if out.ok and isinstance(out.value, dict):
            for ctx, n in out.value.pop("_contexts", {}).items():
                used[ctx] = used.get(ctx, 0) + n
        if not out.ok or not isinstance(out.value, dict):
            problem = out.problem if not out.ok else f"returned {type(out.value).__name__}, not outcomes"
            checks.append(Check("mtp", "mtp", False, f"the MTP harness stopped: the candidate {problem}"[:400],
                                duration_s=time.perf_counter() - t0, outcome=None if out.ok else out.kind))
            continue
        judged = Candidate(spec.text, _NotCalled(get_op(ROLES["draft"]).builtin(spec.target).max_k if spec.builtin else None),
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
                checks.append(Check("mtp", name, True, detail + "; lossless, equivalent", subject=r["consumer"]))
            else:
                why = ", ".join(r["failed_checks"]) + (f": {r['error']}" if r.get("error") else "")
                repro = r["repro"] if r["repro"].startswith("REPRO:") else "REPRO: " + r["repro"]
                checks.append(Check("mtp", name, False, f"{why}; {detail}"[:400], subject=r["consumer"], repro=repro,
                                    evidence={"k": tree_k or 1}))
    dt = time.perf_counter() - t0
    checks = [replace(c, duration_s=dt / max(len(checks), 1)) for c in checks]
    why = ("not applicable: " + "; ".join(not_asked)) if not_asked else ""
    if not checks:
        return [], Stage("mtp", "not applicable", why="; ".join(not_asked) or "no consumer applies")
    return checks, stage_of("mtp", checks, {"consumers": [c.name for c in checks], "contexts": used,
                                          "summary": ", ".join(c.name.removeprefix("mtp:") for c in checks)
                                          + ("; contexts " + ", ".join(f"{c} {n}" for c, n in used.items())
                                             if used else "")}, why)


def calling(device: str, seed: int, context: str = "drawn") -> dict:
    """The decoder's calling contexts (every one ``device`` offers, in a seeded order; or the one
    ``context`` names) and the offsets of its guard bands (1-15 elements past an aligned start,
    and 0): what ``equiv.mtp.probe.quick`` deals to its calls in turn."""
    rng = random.Random(seed * 7919 + 17)
    contexts = list(available(device)) if context == "drawn" else [context]
    rng.shuffle(contexts)
    offsets = [0] + rng.sample(range(1, 16), 3)
    return {"contexts": contexts, "offsets": offsets}


class _NotCalled:
    """The candidate's stand-in in the verdict process: its worker decoded, this process judges;
    ``max_k`` is what the harness reads to tell a consumer that does not apply."""

    def __init__(self, max_k):
        self.max_k = max_k

    def __call__(self, logits, k):
        raise AssertionError("the MTP stage judges the worker's outcomes; nothing calls the candidate here")
