"""Tree verifier properties: losslessness against exact laws (``--equiv-op verify_tree``).

Test plan
---------
The subject is ``--equiv-candidate SPEC`` (a tree verifier ``fn(parents, draft_token_ids,
draft_probs, target_probs, generator) -> (accepted_path, output_token_ids)``) or every built-in
tree verifier, judged for the construction it declares (``--equiv-drafts``, else its attribute
``drafts``, else ``topk``). Each test goes through ``equiv.ops.verify_tree.judge`` (the gate's):

- ``verify_tree_drawn_recipes``: Hypothesis draws recipes (every family, V from 2 to 129280, up
  to 24 nodes, depth up to 8, fan-out up to 8, ragged batches) of the declared construction; one
  call plus the replay of its seed must pass the exact checks -- contract (types, a real chain of
  children, the drafted tokens then one drawn token, inputs unchanged, same seed -> same output),
  support (no emitted token of target probability 0) and greedy (one-hot targets). A failure
  shrinks to the smallest tree and prints the ``equiv check --op verify_tree`` REPRO.
- ``verify_tree_contract_plan``: the same checks on the gate's fixed plan (plans.py).
- ``verify_tree_statistics``: the statistical plan of ``--equiv-budget`` (PIT, score, joint and
  exhaustive tests at the family-wise alpha 1e-4; calibration in docs/verify_tree.md). The gate
  runs it in its own process and deselects it here.
"""
from __future__ import annotations

import pytest

from equiv.ops.verify_tree.draws import declaration
from equiv.ops.verify_tree.gate import resolve_drafts
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.paths import verifier_names
from equiv.ops.verify_tree.plans import constructions_of, contract_cases, statistical_cases
from equiv.properties.verify_tree_strategies import tree_recipes
from equiv.properties.verifier_suite import (EXACT, device, drawn_recipes, first_failure,  # noqa: F401
                                             parametrize_verifiers)                        # (device: a fixture)
from equiv.pytest.plugin import option, run_options

pytestmark = pytest.mark.equiv_op("verify_tree")


def pytest_generate_tests(metafunc):
    parametrize_verifiers(metafunc, verifier_names)


@pytest.fixture
def declared(request, verifier, device):
    """``(drafts, targets)``: what the verifier is judged for (the option wins)."""
    opts = run_options(request.config)
    said = declaration(verifier, device=device, timeout=opts.timeout)
    return resolve_drafts(opts.option("drafts"), said), said.get("targets") or "any"


def _judge(verifier, cases, device, drafts, request, checks):
    verdict = run_judge(verifier, cases, device=device, drafts=drafts, spec=verifier,
                        timeout=run_options(request.config).timeout)
    return first_failure(verdict, verifier, request, checks)


def test_verify_tree_drawn_recipes(verifier, device, declared, request):
    drafts, targets = declared
    request.node.user_properties.append(("equiv_property", "verify_tree_drawn_recipes"))

    def judge_one(recipe):
        if targets == "onehot":
            recipe = recipe.with_(family="onehot_target")
        _judge(verifier, [Case(recipe, 1, recipe.seed)], device, drafts, request, EXACT)
    drawn_recipes(request, tree_recipes(constructions_of(drafts)), judge_one)


def test_verify_tree_contract_plan(verifier, device, declared, request):
    drafts, targets = declared
    request.node.user_properties.append(("equiv_property", "verify_tree_contract_plan"))
    cases = contract_cases(drafts)
    if targets == "onehot":
        cases = [c.__class__(c.recipe.with_(family="onehot_target"), c.calls, c.seed) for c in cases]
    _judge(verifier, cases, device, drafts, request, EXACT)


def test_verify_tree_statistics(verifier, device, declared, request):
    drafts, targets = declared
    request.node.user_properties.append(("equiv_property", "verify_tree_statistics"))
    _judge(verifier, statistical_cases(option(request.config, "equiv_budget"), drafts, 0, targets),
           device, drafts, request, None)
