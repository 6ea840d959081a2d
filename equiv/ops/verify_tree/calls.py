"""How the judge calls a tree verifier: seeded calls on one recipe, through the runner.

Plan. ``draw(fn, device, payload)`` is a probe of ``equiv.run`` (run next to the live callable:
in the supervised worker for a user's verifier, in process for ours). It builds the recipe's four
inputs once on ``device``, each inside a guard band (``equiv.run.guard.Guarded``, the one rule for
"modified its input"), calls ``fn(parents, draft_token_ids, draft_probs, target_probs,
generator)`` once per seed with a fresh ``torch.Generator``, and checks what needs no statistics:
a pair of tensors, int64, ``[B, D+1]`` each, on the inputs' device, inputs unchanged. It returns
plain values: ``{"paths": [calls, B, D+1], "outputs": [calls, B, D+1], "problem", "cause"}``
(``cause``: ``raise``, ``output type`` or ``input write``; the runner's own failures are
``crash or hang``), as verify's probe does (equiv/ops/verify/calls.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from equiv.errors import CandidateLoadError, EquivError
from equiv.ops.verify_tree.recipes import TreeRecipe
from equiv.run import CandidateSpec, runner_for
from equiv.run.load import Candidate
from equiv.run.calling import Relabel, deal, key_of
from equiv.run.seeded import seeded_calls

INPUT_NAMES = ("parents", "draft_token_ids", "draft_probs", "target_probs")
SEED_UNIT = 100                  # plans.py: slot i's generator seeds from 1000 s + 100 i on


def calling_of(seeds, device="cpu"):
    """The calling classes of the case whose calls use ``seeds`` (``equiv.run.calling.deal``):
    deterministic from the case, so its REPRO line replays them."""
    return deal(key_of(seeds[0], SEED_UNIT), len(seeds), len(INPUT_NAMES), device)


# a rewritten history's first call: the same geometry, other contents (the law under other token names)
OTHER_CONTENTS = Relabel(tokens=(1,), tables=(2, 3))


@dataclass(frozen=True)
class TreeDraws:
    recipe: str
    seeds: tuple
    paths: np.ndarray
    outputs: np.ndarray
    problem: str | None = None
    cause: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None


def _pair_problem(out, want, device) -> str | None:
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    if not isinstance(out, (tuple, list)) or len(out) != 2:
        return f"returned a {type(out).__name__}, not a pair (accepted_path, output_token_ids)"
    for name, t in zip(("accepted_path", "output_token_ids"), out):
        if not isinstance(t, torch.Tensor):
            return f"returned {name} as a {type(t).__name__}, not a torch.Tensor"
        if t.dtype != torch.int64:
            return f"returned {name} of dtype {str(t.dtype).replace('torch.', '')}, not int64"
        if tuple(t.shape) != want:
            return f"returned {name} of shape {list(t.shape)}, not {list(want)} ([B, D+1], D the deepest node)"
        if t.device != device:
            return f"returned {name} on {t.device}, not on the inputs' device {device}"
    return None


def draw(fn, device, payload) -> dict:
    """The probe (module docstring): ``payload = {"recipe": str, "seeds": [int, ...]}``."""
    recipe = TreeRecipe.parse(payload["recipe"])
    built = recipe.build(device)
    dev = built[3].device
    want = (recipe.batch, recipe.trees().max_depth + 1)
    outs, problem, cause = seeded_calls(fn, built, INPUT_NAMES, payload["seeds"],
                                        lambda out: _pair_problem(out, want, dev),
                                        guarded=payload.get("guarded", True),
                                        calling=calling_of(payload["seeds"], dev), relabel=OTHER_CONTENTS)
    paths = [o[0].cpu().numpy() for o in outs]
    outs = [o[1].cpu().numpy() for o in outs]
    empty = np.zeros((0, *want), dtype=np.int64)
    return {"paths": np.stack(paths) if paths else empty, "outputs": np.stack(outs) if outs else empty,
            "problem": problem, "cause": cause}


def run_draws(candidate, recipe, seeds, *, device: str, timeout: float | None, guarded: bool = True) -> TreeDraws:
    """``draw`` for ``candidate`` (a spec, ``Candidate`` or callable) through its runner."""
    if isinstance(candidate, Candidate):
        try:
            target = CandidateSpec.parse(candidate.spec, "verify_tree")
        except CandidateLoadError:
            target = candidate.fn
    else:
        target = CandidateSpec.parse(candidate, "verify_tree")
    payload = {"recipe": str(recipe), "seeds": [int(s) for s in seeds], "guarded": guarded}
    budget = None if timeout is None else timeout * max(len(payload["seeds"]), 1)
    runner = runner_for(target, device=device, timeout=budget, op="verify_tree")
    got = runner.probe("equiv.ops.verify_tree.calls:draw", payload, timeout=budget)
    want = (0, recipe.batch, recipe.trees().max_depth + 1)
    if not got.ok:
        empty = np.zeros(want, dtype=np.int64)
        return TreeDraws(str(recipe), tuple(payload["seeds"]), empty, empty, f"{got.problem}", "crash or hang")
    v = got.value
    return TreeDraws(str(recipe), tuple(payload["seeds"]), v["paths"], v["outputs"], v["problem"], v.get("cause"))


def declared(fn, device, payload) -> dict:
    """The probe that reads what a verifier declares: its ``drafts`` and ``targets`` attributes."""
    drafts, targets = getattr(fn, "drafts", None), getattr(fn, "targets", None)
    return {"drafts": drafts if isinstance(drafts, str) else None,
            "targets": targets if isinstance(targets, str) else None}


def declaration(candidate, *, device: str, timeout: float | None) -> dict:
    """``declared`` for ``candidate`` through its runner ({} when the runner cannot answer)."""
    if callable(candidate) and not isinstance(candidate, CandidateSpec):
        return declared(getattr(candidate, "fn", candidate), device, {})
    runner = runner_for(CandidateSpec.parse(candidate, "verify_tree"), device=device, timeout=timeout,
                        op="verify_tree")
    got = runner.probe("equiv.ops.verify_tree.calls:declared", {}, timeout=timeout)
    return got.value if got.ok else {}


def call_once(fn, device, payload) -> dict:
    """The probe behind ``tree_verifier_function`` for a verifier in its worker: one call on host
    arrays built on ``device``."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

    args = [None if a is None else torch.from_numpy(np.ascontiguousarray(a)).to(device) for a in payload["inputs"]]
    path, out = fn(*args, torch.Generator(device=device).manual_seed(int(payload["seed"])))
    return {"path": path.cpu().numpy(), "out": out.cpu().numpy()}


def tree_verifier_function(candidate, device: str, timeout: float | None = None):
    """``call(parents, draft_token_ids, draft_probs, target_probs, seed) -> (accepted_path,
    output_token_ids)`` for ``candidate`` (what a feature that verifies trees -- the MTP harness --
    asks this op for, ``Op.features("caller")``): ours and a callable run in this process on the
    live tensors; a user's spec runs in its supervised worker on host copies. A call that goes
    wrong raises ``EquivError`` with the runner's one-line problem."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
    import torch

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
