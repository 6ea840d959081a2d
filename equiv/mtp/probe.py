"""The MTP stage of the gate as a probe: the harness runs where the candidate runs (its worker).

``quick(fn, device, payload)`` decodes with the candidate under the consumers named in the
payload (the gate's quick budget, the candidate against ``softmax_topk`` on the same seeds) and
returns plain records (``MtpRecord.to_json`` plus its REPRO), which cross back to the verdict
process. The candidate is called inside the decode loop, so an exit, a signal or a hang there
ends the probe like any call: the supervisor reports it.
"""
from __future__ import annotations


def quick(fn, device, payload) -> list[dict]:
    from equiv.candidate import Candidate
    from equiv.mtp import run_mtp

    cand = Candidate(payload["name"], fn, builtin=payload.get("builtin", False))
    extra = {"tree_topk": payload["tree_topk"]} if payload.get("tree_topk") else {}
    run = run_mtp(paths=[cand], consumers=list(payload["consumers"]), budget="quick", device=device,
                  seed=payload["seed"], vocab=payload["vocab"], **extra)
    return [dict(r.to_json(), repro=r.repro) for r in run.records]
