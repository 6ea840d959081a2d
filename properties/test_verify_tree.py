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
from hypothesis import given, seed as with_seed, settings

from equiv.devices import resolve_device
from equiv.ops.verify_tree.calls import declaration
from equiv.ops.verify_tree.gate import resolve_drafts
from equiv.ops.verify_tree.judge import Case, run_judge
from equiv.ops.verify_tree.paths import verifier_names
from equiv.ops.verify_tree.plans import constructions_of, contract_cases, statistical_cases
from equiv.properties.verify_tree_strategies import tree_recipes
from equiv.pytest.plugin import option, run_options, suite_settings

pytestmark = pytest.mark.equiv_op("verify_tree")
EXACT = ("contract", "support", "greedy")
QUICK_EXAMPLES = 6


def pytest_generate_tests(metafunc):
    if "verifier" in metafunc.fixturenames:
        spec = option(metafunc.config, "equiv_candidate")

        names = [spec] if spec else list(verifier_names())
        metafunc.parametrize("verifier", names, ids=[n.replace("/", "_") for n in names])


@pytest.fixture
def device(request):
    return resolve_device(option(request.config, "equiv_device"))


@pytest.fixture
def declared(request, verifier, device):
    """``(drafts, targets)``: what the verifier is judged for (the option wins)."""
    opts = run_options(request.config)
    said = declaration(verifier, device=device, timeout=opts.timeout)
    return resolve_drafts(opts.option("drafts"), said), said.get("targets") or "any"


def _judge(verifier, cases, device, drafts, request, checks):
    verdict = run_judge(verifier, cases, device=device, drafts=drafts, spec=verifier,
                        timeout=run_options(request.config).timeout)
    failed = [c for c in verdict.checks if (checks is None or c.name in checks) and not c.passed]
    if failed:
        c = failed[0]
        request.node.user_properties += [("equiv_message", f"{c.name}: {c.detail}"), ("equiv_cause", c.cause),
                                         ("equiv_counterexample", c.recipe), ("equiv_repro", c.repro)]
        raise AssertionError(f"{c.name} [{verifier}]: {c.detail}\n{c.repro}")
    return verdict


def test_verify_tree_drawn_recipes(verifier, device, declared, request):

    drafts, targets = declared
    request.node.user_properties.append(("equiv_property", "verify_tree_drawn_recipes"))
    quick = option(request.config, "equiv_budget") == "quick"
    count = {"examples": 0}

    @settings(suite_settings(), max_examples=QUICK_EXAMPLES if quick else suite_settings().max_examples,
              report_multiple_bugs=False)
    @given(recipe=tree_recipes(constructions_of(drafts)))
    def drawn(recipe):
        count["examples"] += 1
        if targets == "onehot":
            recipe = recipe.with_(family="onehot_target")
        _judge(verifier, [Case(recipe, 1, recipe.seed)], device, drafts, request, EXACT)

    seed = request.config.getoption("hypothesis_seed", None)
    if seed is not None:
        drawn = with_seed(int(seed))(drawn)
    try:
        drawn()
    finally:
        request.node.user_properties.append(("equiv_examples", count["examples"]))


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
