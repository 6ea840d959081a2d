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

from equiv.ops.verify.judge import Case, run_judge
from equiv.ops.verify.paths import verifier_names
from equiv.ops.verify.plans import contract_cases, statistical_cases
from equiv.properties.verify_strategies import verify_recipes
from equiv.properties.verifier_suite import (EXACT, device, drawn_recipes, first_failure,  # noqa: F401
                                             parametrize_verifiers)                        # (device: a fixture)
from equiv.pytest.plugin import option, run_options

pytestmark = pytest.mark.equiv_op("verify")


def pytest_generate_tests(metafunc):
    parametrize_verifiers(metafunc, verifier_names)


def _judge(verifier, cases, device, request, checks):
    opts = run_options(request.config)
    verdict = run_judge(verifier, cases, device=device, spec=verifier, timeout=opts.timeout, law=opts.option("law"))
    return first_failure(verdict, verifier, request, checks)


def test_verify_drawn_recipes(verifier, device, request):
    request.node.user_properties.append(("equiv_property", "verify_drawn_recipes"))
    drawn_recipes(request, verify_recipes(),
                  lambda recipe: _judge(verifier, [Case(recipe, 1, recipe.seed)], device, request, EXACT))


def test_verify_contract_plan(verifier, device, request):
    request.node.user_properties.append(("equiv_property", "verify_contract_plan"))
    _judge(verifier, contract_cases(), device, request, EXACT)


def test_verify_statistics(verifier, device, request):
    request.node.user_properties.append(("equiv_property", "verify_statistics"))
    budget = option(request.config, "equiv_budget")
    law = run_options(request.config).option("law")
    _judge(verifier, statistical_cases(budget, law=law), device, request, None)
