"""The MTP stage of the gate as a probe: the candidate decodes where it runs (its worker).

``quick(fn, device, payload)`` decodes with the candidate under the consumers named in the
payload on the gate's quick-budget synthetic model (``harness.decode_in_worker``) and returns the
raw outcomes only (accepted and proposed counts, emitted tokens, invalid outputs), which cross
back to the verdict process; ``equiv.gate`` judges them there against ``softmax_topk`` on the same
seeds (``run_mtp(..., decoded=...)``). The candidate is called inside the decode loop, so an
exit, a signal or a hang there ends the probe like any call: the supervisor reports it. Each
call of the candidate runs in the next of the payload's ``contexts`` with its logits in a guard
band at the next of its ``offsets`` (``equiv.run.seeded.Rotating``); a write into the logits or
past them is an error of that consumer. ``_contexts`` in the reply counts the calls per context.
"""
from __future__ import annotations

from equiv.mtp.decoding import TREE_TOPK
from equiv.mtp.harness import decode_in_worker
from equiv.run.seeded import Rotating
from equiv.run.load import Candidate


def quick(fn, device, payload) -> dict:

    calls = Rotating(fn, payload.get("contexts") or (None,), payload.get("offsets") or (0,), str(device))
    cand = Candidate(payload["name"], calls, builtin=payload.get("builtin", False))
    out = decode_in_worker(cand, list(payload["consumers"]), budget="quick", device=str(device),
                           seed=payload["seed"], vocab=payload["vocab"],
                           tree_topk=payload.get("tree_topk") or TREE_TOPK)
    out["_contexts"] = {str(c): n for c, n in calls.used.items()}
    return out
