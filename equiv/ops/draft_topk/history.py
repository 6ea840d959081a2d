"""The call-history probe: runs a ``HistoryPlan`` (``equiv.ops.draft_topk.history_plan``: the plan,
its judge and what they are for) where the candidate runs.

``probe(fn, device, payload)`` runs the plan in the candidate's process (``equiv.run``'s probe:
the worker for a user's candidate): each call on a recipe built on ``device``, in its calling
context, its input in a guard band (``equiv.run.guard.Guarded``) at the plan's offset, the first
``rewrites`` calls on ONE storage rewritten in place (``equiv.run.seeded.rewrite``); it returns
only host arrays (``equiv.run.invoke.to_host``). The plan's names are here too
(``HistoryPlan``, ``plan_for``, ``judge``, ``problems``): a diagnosis's REPRO line reads them from
this module. Torch is imported at the top: this module runs where the candidate is called.
"""
from __future__ import annotations

import torch

from equiv.ops.draft_topk.history_plan import HistoryPlan, judge, plan_for, problems
from equiv.ops.draft_topk.recipes import Recipe
from equiv.run.guard import Guarded
from equiv.run.invoke import to_host
from equiv.run.seeded import call_in, rewrite

__all__ = ["HistoryPlan", "judge", "plan_for", "probe", "problems"]


def probe(fn, device, payload: dict) -> dict:
    """Run the plan's calls (module docstring); only host arrays come back."""
    recipes, rewrites, keep, k = (payload[n] for n in ("recipes", "rewrites", "keep", "k"))
    contexts, offsets = payload.get("contexts") or (), payload.get("offsets") or ()
    answers, rereads, kept, written = [], [], [], []
    storage = None
    for i, text in enumerate(recipes):
        x = Recipe.parse(text).build(device)
        offset = offsets[i] if i < len(offsets) else 0
        if i < rewrites:
            if storage is None:
                storage = Guarded(x, "logits", offset=offset)
            else:
                # the same storage, new values; every other rewrite leaves the version counter
                rewrite(storage, x, bump=i % 2 == 1)  # as it was (equiv.run.seeded.rewrite)
            guard = storage
        else:
            guard = Guarded(x, "logits", offset=offset)
        context = contexts[i] if i < len(contexts) else None
        out = call_in(context, fn, (guard.tensor, k), device)
        if str(device).startswith("cuda"):
            torch.cuda.synchronize()
        problem = guard.problem("during the call")
        if problem and not written:
            written.append((i, problem))
        answers.append(to_host(out))
        kept = (kept + [(i, out)])[-keep:]
        for j, old in kept[:-1]:
            rereads.append((i, j, to_host(old)))
    for j, old in kept:
        rereads.append((len(recipes), j, to_host(old)))
    return {"answers": answers, "rereads": rereads, "written": written}
