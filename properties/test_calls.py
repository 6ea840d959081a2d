"""Properties of calls rather than of one answer: state, k > 1, and the built-ins' own checks.

Test plan
---------
- ``repeated_calls``: three calls on inputs of one shape -- x1, then x2 (x1 rolled along the
  vocabulary, so its answer is x1's shifted), then x1 again. The second answer must be the
  first one rolled and the third must equal the first: a result cached from an earlier call
  (keyed by shape, pointer or dtype) or state left by the previous call fails. Every call in the
  suite also checks that the subject did not write its input (``Suite.call``).
- ``call_history``: the history of ``equiv.ops.draft_topk.history`` (its plan for the budget:
  6 calls on one input storage rewritten in place, then 200 calls of fresh inputs at one shape
  in the quick budget, 32 and 512 in the full one; each output re-read after each of the 16
  calls after it and at the end; every call in a dealt calling context, its input in a guard
  band at a drawn offset), run where the subject runs; every answer must match the reference of
  its input, every re-read the answer it re-reads, and no input or guard band may change.
  Catches outputs keyed by the input's address, buffers recycled across up to 16 calls, and
  paths that change after their first N calls of a shape (N < 206).
- ``topk_ordering``: at k > 1 (``--equiv-k``; with ``--equiv-k auto`` the ks of 2, 4, 8 the
  candidate accepts; or k in 2..8 for a built-in path that supports it when the run judges at
  k = 1): the full comparison, plus distinct indices, descending
  ``topk_p`` (up to the allowance), and the top-k summing to at most 1. Inputs heavy in ties
  (ties at the max, 1-ULP near-ties, bfloat16-quantized, near-uniform), where orderings break.
- ``builtin_argument_errors``: equiv's built-in paths refuse ``k < 1`` and ``k > V`` with one
  clear line naming k, and answer ``B = 0`` with empty ``[0, k]`` tensors. A candidate is
  judged on valid inputs only, so this property is skipped for ``--equiv-candidate``.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import strategies as st

from equiv.errors import InvalidArgument
from equiv.ops.draft_topk import history, ksupport
from equiv.ops.draft_topk.recipes import HEALTHY_FAMILIES
from equiv.properties import relations as rel

TIE_FAMILIES = ("ties_max", "near_ties", "bf16_quantized", "near_uniform", "gaussian", "zipf")


def test_repeated_calls(subject, suite):
    def repeated_calls(recipe, roll):
        x1 = suite.build(recipe)
        perm = np.roll(np.arange(recipe.vocab), 1 + roll % (recipe.vocab - 1))
        x2 = rel.permute_vocab(x1, perm)
        first = suite.call(x1, what="x1 (first call)")
        second = suite.call(x2, what="x2 = x1 rolled (second call)")
        third = suite.call(x1, what="x1 again (third call)")
        ref = rel.reference_of(x1, suite.k)
        tol = suite.tolerance(recipe.dtype)
        for answer, label, index_map in ((second, "x2 (x1 rolled)", perm), (third, "x1 again", None)):
            problem = rel.disagreement(first, answer, ref, tol, b_index_map=index_map)
            if problem is not None:
                suite.fail(f"recipe {recipe}: the answer for {label} is not the one the first call "
                           f"implies (stale or cached state?): {problem}")

    suite.run(repeated_calls, weight=0.5, recipe=suite.recipes(HEALTHY_FAMILIES + ("poison_mix",), min_vocab=2),
              roll=st.integers(1, 2 ** 20))


def test_call_history(subject, suite):
    if not subject.supports_k(suite.k):
        pytest.skip(f"path {subject.name!r} supports k <= {subject.max_k}; this run judges at k = {suite.k}")
    seed = suite.request.config.getoption("hypothesis_seed", None)
    b = subject.budget
    plan = history.plan_for("quick" if suite.opts.budget == "quick" else "full",
                            int(seed) if str(seed).isdigit() else 0, dtype=suite.dtypes[0], k=suite.k,
                            max_batch=b.max_batch, max_vocab=b.max_vocab, device=suite.device,
                            context=suite.opts.option("context"))
    out = suite.runner.probe("equiv.ops.draft_topk.history:probe", plan.payload(), timeout=suite.opts.timeout)
    if out.abnormal:
        suite.abnormal(f"the subject {out.problem} in the call history")
    if not out.ok:
        suite.fail(f"the call history: the subject {out.problem}")
    suite.request.node.user_properties.append(("equiv_examples", plan.calls))
    problems = history.problems(plan, out.value, suite.device)
    if problems:                                 # what failed, as data for the diagnosis
        suite.request.node.user_properties.append(
            ("equiv_parts", list(dict.fromkeys(part for p in problems for part in p.parts))))
        suite.fail("; ".join(p.line for p in problems), recipe=problems[0].recipe)


def _ordering_k(suite, subject):
    if suite.k > 1 and not subject.supports_k(suite.k):
        pytest.skip(f"path {subject.name!r} supports k <= {subject.max_k}; this run judges at "
                    f"--equiv-k {suite.k}")
    if suite.k > 1:
        return st.just(suite.k)
    if subject.explicit and subject.more_k:      # --equiv-k auto: the other ks it accepts

        taken = ksupport.accepted(suite.runner, subject.more_k, suite.opts.timeout)
        if not taken.accepted:
            pytest.skip(f"the candidate accepts none of k = {', '.join(map(str, subject.more_k))}: {taken.note()}")
        return st.sampled_from(taken.accepted)
    if subject.explicit:                         # judged at the k asked, and only there
        pytest.skip("this run judges the candidate at k = 1; ordering needs --equiv-k >= 2")
    if not subject.supports_k(2):
        pytest.skip(f"path {subject.name!r} supports k <= {subject.max_k} only")
    return st.integers(2, min(subject.max_k or 8, 8))


@pytest.mark.own_k
def test_topk_ordering(subject, suite):
    ks = _ordering_k(suite, subject)

    def topk_ordering(recipe, k):
        x = suite.build(recipe)
        suite.expect_equivalent(x, recipe=recipe, k=k, what=f"recipe {recipe} at k={k}")
        out = suite.call(x, k)
        tol = suite.tolerance(recipe.dtype)
        problem = rel.bounds_problem(out, rel.reference_of(x, k), tol)
        dup = [b for b in range(out.idx.shape[0]) if len(set(out.idx[b].tolist())) < k]
        if dup:
            problem = f"row {dup[0]} repeats an index: {out.idx[dup[0]].tolist()}"
        with np.errstate(invalid="ignore"):
            rises = np.flatnonzero((np.diff(out.p, axis=1) > tol.allowed(out.p[:, 1:], out.p[:, :1])).any(axis=1))
        if rises.size:
            problem = f"row {int(rises[0])}: topk_p is not descending: {out.p[rises[0]].tolist()}"
        if problem is not None:
            suite.fail(f"recipe {recipe} at k={k}: {problem}")

    suite.run(topk_ordering, weight=0.5, recipe=suite.recipes(TIE_FAMILIES, min_vocab=8), k=ks)


def argument_problems(fn, device: str, max_k: int | None) -> tuple[list[str], int]:
    """What is wrong with ``fn``'s handling of k < 1, k > V and B = 0; and how many calls it took."""

    problems, calls = [], 0
    x = torch.zeros((2, 5), device=device)
    for k, needle in ((0, "k=0 is invalid"), (6, "k=6 is invalid for V=5")):
        calls += 1
        try:
            fn(x, k)
        except InvalidArgument as exc:
            if needle not in str(exc) or "\n" in str(exc):
                problems.append(f"k={k} on [2, 5] raised {str(exc)!r}: expected one line containing {needle!r}")
        except Exception as exc:
            problems.append(f"k={k} on [2, 5] raised {type(exc).__name__}: {exc}; expected InvalidArgument")
        else:
            problems.append(f"k={k} on [2, 5] was accepted; expected InvalidArgument ({needle!r})")
    for k in sorted({1, max_k or 3}):
        calls += 1
        p, idx = fn(torch.zeros((0, 16), device=device), k)
        if tuple(p.shape) != (0, k) or tuple(idx.shape) != (0, k) or idx.dtype != torch.int64:
            problems.append(f"B=0 at k={k} returned shapes {list(p.shape)}, {list(idx.shape)} "
                            f"({idx.dtype}); expected [0, {k}] and int64")
    return problems, calls


def argument_probe(fn, device: str, payload: dict) -> tuple[list[str], int]:
    """``argument_problems`` as a probe of ``equiv.run`` (run where the subject runs)."""
    return argument_problems(fn, device, payload["max_k"])


@pytest.mark.own_k
def test_builtin_argument_errors(subject, suite):
    if not subject.builtin:
        pytest.skip("a candidate is judged on valid inputs only (k in [1, V], B >= 1)")
    if not subject.supports_k(subject.k):
        pytest.skip(f"path {subject.name!r} supports k <= {subject.max_k}; this run judges at k = {subject.k}")
    # through the subject's runner: under EQUIV_ISOLATE=always a built-in runs in its worker too
    out = suite.runner.probe("equiv.properties.test_calls:argument_probe", {"max_k": subject.max_k},
                             timeout=suite.opts.timeout)
    if out.abnormal:
        suite.abnormal(f"the subject {out.problem} in the argument checks", kind=out.kind)
    if not out.ok:
        suite.fail(f"the argument checks: the subject {out.problem}")
    problems, calls = out.value
    suite.request.node.user_properties.append(("equiv_examples", calls))
    if problems:
        suite.fail("; ".join(problems))
