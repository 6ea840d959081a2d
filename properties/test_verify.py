"""Verify properties: a rejection sampler against the exact law (``--equiv-op verify``).

Test plan
---------
The subject is ``--equiv-candidate SPEC`` (a verifier ``fn(draft_token_ids, draft_probs,
target_probs, generator)``) or every built-in verifier. Each test goes through the judge of
``equiv.ops.verify.judge`` (the one the gate runs), under the law of ``--equiv-law``
(``lossless``, the default, or ``token``; the verify gate passes its own to this suite's subprocess):

- ``verify_drawn_recipes``: Hypothesis draws recipes (every family, V from 1 to 129280, n from 1
  to 8, padded rows, one-hot drafts); one call plus the replay of its seed must pass the exact
  checks -- contract (types, -1 layout, inputs unchanged, same seed -> same output), support
  (nothing of probability zero under the law) and greedy (one-hot targets). A failure shrinks to the smallest
  recipe and prints the ``equiv check --op verify`` REPRO.
- ``verify_contract_plan``: the same checks on the gate's fixed plan (every family x draft kind).
- ``verify_statistics``: the gate's statistical plan of ``--equiv-budget`` (acceptance binomial
  tests and PIT chi-square with a total-variation floor, family-wise alpha 1e-4; its measured
  false-positive rate and power are in docs/verify.md). Not a Hypothesis test: the family-wise
  alpha covers exactly this plan.
"""
from __future__ import annotations

import pytest
from hypothesis import given, seed as with_seed, settings

from equiv.devices import resolve_device
from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.paths import verifier_names
from equiv.ops.verify.plans import contract_cases, statistical_cases
from equiv.properties.verify_strategies import verify_recipes
from equiv.pytest.plugin import option, run_options, suite_settings

pytestmark = pytest.mark.equiv_op("verify")
EXACT = ("contract", "support", "greedy")
QUICK_EXAMPLES = 6


def pytest_generate_tests(metafunc):
    if "verifier" in metafunc.fixturenames:
        spec = option(metafunc.config, "equiv_candidate")

        names = [spec] if spec else verifier_names()
        metafunc.parametrize("verifier", names, ids=[n.replace("/", "_") for n in names])


@pytest.fixture
def device(request):
    return resolve_device(option(request.config, "equiv_device"))


def _judge(verifier, cases, device, request, checks):
    opts = run_options(request.config)
    verdict = run_judge(verifier, cases, device=device, spec=verifier, timeout=opts.timeout, law=opts.option("law"))
    failed = [c for c in verdict.checks if (checks is None or c.name in checks) and not c.passed]
    if failed:
        c = failed[0]
        request.node.user_properties += [("equiv_message", f"{c.name}: {c.detail}"), ("equiv_cause", c.cause),
                                         ("equiv_counterexample", c.recipe), ("equiv_repro", c.repro)]
        raise AssertionError(f"{c.name} [{verifier}]: {c.detail}\n{c.repro}")
    return verdict


def test_verify_drawn_recipes(verifier, device, request):

    request.node.user_properties.append(("equiv_property", "verify_drawn_recipes"))
    quick = option(request.config, "equiv_budget") == "quick"
    count = {"examples": 0}

    @settings(suite_settings(), max_examples=QUICK_EXAMPLES if quick else suite_settings().max_examples,
              report_multiple_bugs=False)
    @given(recipe=verify_recipes())
    def drawn(recipe):
        count["examples"] += 1
        _judge(verifier, [Case(recipe, 1, recipe.seed)], device, request, EXACT)

    seed = request.config.getoption("hypothesis_seed", None)
    if seed is not None:
        drawn = with_seed(int(seed))(drawn)
    try:
        drawn()
    finally:
        request.node.user_properties.append(("equiv_examples", count["examples"]))


def test_verify_contract_plan(verifier, device, request):
    request.node.user_properties.append(("equiv_property", "verify_contract_plan"))
    _judge(verifier, contract_cases(), device, request, EXACT)


def test_verify_statistics(verifier, device, request):
    request.node.user_properties.append(("equiv_property", "verify_statistics"))
    budget = option(request.config, "equiv_budget")
    law = run_options(request.config).option("law")
    _judge(verifier, statistical_cases(budget, law=law), device, request, None)
