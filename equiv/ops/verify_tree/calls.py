"""How the judge calls a tree verifier: seeded calls on one recipe, through the runner.

Plan. ``draw(fn, device, payload)`` is a probe of ``equiv.run`` (run next to the live callable:
in the supervised worker for a user's verifier, in process for ours). It builds the recipe's four
inputs once on ``device``, each inside a guard band (``equiv.run.guard.Guarded``, the one rule for
"modified its input"), calls ``fn(parents, draft_token_ids, draft_probs, target_probs,
generator)`` once per seed (a batch of ``equiv.run.calling.SPLIT_FROM`` rows or more in three
calls: its rows but the last 3-5, then 2-4 rows, then its last row alone), and checks what needs no statistics:
a pair of tensors, int64, ``[B, D+1]`` each, on the inputs' device, inputs unchanged. It returns
plain values: ``{"paths": [calls, B, D+1], "outputs": [calls, B, D+1], "problem", "cause"}``
(``cause``: ``raise``, ``output type`` or ``input write``; the runner's own failures are
``crash or hang``), as verify's probe does (equiv/ops/verify/calls.py). ``run_draws`` and ``declaration``, which ask
a runner for these probes, are ``equiv.ops.verify_tree.draws`` (no torch: the gate's plan reads it
at its start); this module runs where the candidate is called and imports torch at its top.
"""
from __future__ import annotations

import numpy as np
import torch

from equiv.errors import EquivError
from equiv.ops.verify_tree.draws import INPUT_NAMES, calling_of, declared
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.run import CandidateSpec, runner_for
from equiv.run.calling import last_rows_apart, window_seed
from equiv.run.seeded import Relabel, int64_problem, seeded_calls

__all__ = ["call_once", "declared", "draw", "tree_verifier_function"]

# a rewritten history's first call: the same geometry, other contents (the law under other token names)
OTHER_CONTENTS = Relabel(tokens=(1,), tables=(2, 3))


def _pair_problem(out, want, device) -> str | None:
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return f"returned a {type(out).__name__}, not a pair (accepted_path, output_token_ids)"
    for name, t in zip(("accepted_path", "output_token_ids"), out):
        problem = int64_problem(t, want, device, name=name, shape_note="[B, D+1], D the deepest node")
        if problem:
            return problem
    return None


def draw(fn, device, payload) -> dict:
    """The probe (module docstring): ``payload = {"recipe": str, "seeds": [int, ...]}``. A batch
    of ``SPLIT_FROM`` rows or more goes in three calls per seed (``last_rows_apart``: its rows
    but the last 3-5, then 2-4, then the last alone; window ``j`` seeded ``s + j * WINDOW_SEED_STRIDE``), each of its
    rows' own ``[b, D_w + 1]`` (``D_w`` their deepest node), joined with ``-1`` past ``D_w``.
    ``"rows": [start, stop]`` and ``"window": j`` build and call those rows alone, as one call
    seeded ``s + j * WINDOW_SEED_STRIDE`` (a window under the memory budget: ``run_draws``)."""
    recipe = TreeRecipe.parse(payload["recipe"])
    rows = payload.get("rows")
    built = recipe.build(device, rows=rows, table_rows=True)
    dev = built[3].device
    case_seeds = [int(s) for s in payload["seeds"]]
    trees = recipe.trees()
    depth, D = trees.depth, trees.max_depth
    if rows is None:
        first, windows = 0, last_rows_apart(0, recipe.batch, case_seeds[0] if case_seeds else 0)
    else:
        first, (start, stop) = int(payload["window"]), rows
        depth, windows = depth[start:stop], [(0, stop - start)]
    B = int(built[0].shape[0])
    empty = np.zeros((0, B, D + 1), dtype=np.int64)
    paths, outs = [], []
    for j, (a, b) in enumerate(windows, start=first):
        whole = (a, b) == (0, B)
        part = built if whole else tuple(None if t is None else t[a:b] for t in built)
        d = D if whole and rows is None else int(depth[a:b].max())
        want = (b - a, d + 1)
        got, problem, cause = seeded_calls(fn, part, INPUT_NAMES, [window_seed(s, j) for s in case_seeds],
                                           lambda out, want=want: _pair_problem(out, want, dev),
                                           guarded=payload.get("guarded", True),
                                           calling=calling_of(case_seeds, dev), relabel=OTHER_CONTENTS)
        pad = ((0, 0), (0, 0), (0, D - d))
        if problem is not None:
            if whole:
                stacked = [np.pad(np.stack([o[i].cpu().numpy() for o in got]), pad, constant_values=-1) if got
                           else empty for i in (0, 1)]
                return {"paths": stacked[0], "outputs": stacked[1], "problem": problem, "cause": cause}
            return {"paths": empty, "outputs": empty, "cause": cause,
                    "problem": f"{problem} (rows {a}-{b - 1} of {B}, call {j + 1} of the {len(windows)} it was sent in)"}
        paths.append(np.pad(np.stack([o[0].cpu().numpy() for o in got]), pad, constant_values=-1))
        outs.append(np.pad(np.stack([o[1].cpu().numpy() for o in got]), pad, constant_values=-1))
    return {"paths": np.concatenate(paths, axis=1), "outputs": np.concatenate(outs, axis=1),
            "problem": None, "cause": None}


def call_once(fn, device, payload) -> dict:
    """The probe behind ``tree_verifier_function`` for a verifier in its worker: one call on host
    arrays built on ``device``."""
    args = [None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in payload["inputs"]]
    path, out = fn(*args, torch.Generator(device=device).manual_seed(int(payload["seed"])))
    return {"path": path.cpu().numpy(), "out": out.cpu().numpy()}


def tree_verifier_function(candidate, device: str, timeout: float | None = None):
    """``call(parents, draft_token_ids, draft_probs, target_probs, seed) -> (accepted_path,
    output_token_ids)`` for ``candidate`` (what a feature that verifies trees -- the MTP harness --
    asks this op for, ``Op.features("caller")``): ours and a callable run in this process on the
    live tensors; a user's spec runs in its supervised worker on host copies. A call that goes
    wrong raises ``EquivError`` with the runner's one-line problem."""
    target = candidate if callable(candidate) and not isinstance(candidate, CandidateSpec) else \
        CandidateSpec.parse(candidate, "verify_tree")
    runner = runner_for(target, device=device, timeout=timeout, op="verify_tree")
    if not runner.isolated:
        def local(parents, tokens, q, p, seed):
            return runner.fn(parents, tokens, q, p, torch.Generator(device=p.device).manual_seed(int(seed)))
        return local

    def isolated(parents, tokens, q, p, seed):
        host = [None if t is None else t.cpu().numpy() for t in (parents, tokens, q, p)]
        got = runner.probe("equiv.ops.verify_tree.calls:call_once", {"inputs": host, "seed": int(seed)},
                           timeout=timeout)
        if not got.ok:
            raise EquivError(f"the tree verifier {got.problem}")
        return (torch.from_numpy(got.value["path"]).to(p.device), torch.from_numpy(got.value["out"]).to(p.device))
    return isolated
