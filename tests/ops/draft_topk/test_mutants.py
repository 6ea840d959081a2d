"""The property suite kills every mutant of the zoo under the ``ci`` profile, and nothing legal.

Plan: each mutant of ``equiv.ops.draft_topk.mutants.MUTANTS`` runs through the whole property suite in-process
(``equiv.properties.killing.run_suite``: ``--equiv-candidate equiv.ops.draft_topk.mutants:NAME -x``, ci profile, full
budget) and must fail a property; each legal variant (ties broken the other way, float64
arithmetic) must pass every property. Each property is also seen failing on its own against a
mutant chosen for it (``CAN_FAIL``), so no property is a check that cannot fail.
"""
import pytest

from equiv.candidate import load_candidate
from equiv.ops.draft_topk.mutants import LEGAL_VARIANTS, MUTANTS
from equiv.properties.killing import _first_failure, kill, legal_failures, run_suite

# property -> a mutant it kills when it runs alone (from `python -m equiv.properties.killing --matrix`)
CAN_FAIL = {
    "equivalence": "second_best_index",
    "poisoned_batches": "nan_masked",
    "raw_arrays": "guarded_division",
    "adversarial_fixtures": "tail_ignored",
    "repeated_calls": "cached_by_shape",
    "bounds": "rows_past_four_unwritten",
    "row_independence": "contiguous_stride_assumed",
    "poison_never_leaks": "global_max_subtraction",
    "shift_invariance": "no_max_subtraction",
    "vocab_permutation": "argmax_of_downcast",
    "monotonicity": "second_best_index",
    "topk_ordering": "topk_ascending",
}


@pytest.fixture
def device(request):
    """The outer run's --equiv-device, so that on a GPU the zoo is judged on the GPU too."""
    from equiv.devices import resolve_device

    return resolve_device(request.config.getoption("equiv_device") or "auto")


def test_the_zoo_is_large_and_loadable():
    assert len(MUTANTS) >= 15
    assert len({m.bug_class for m in MUTANTS.values()}) == len(MUTANTS), "one bug class per mutant"
    for name, m in {**MUTANTS, **LEGAL_VARIANTS}.items():
        assert m.name == name and m.bug_class and m.description and m.k >= 1
        assert load_candidate(f"equiv.ops.draft_topk.mutants:{name}").fn is m


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_suite_kills(name, device):
    result = kill(name, device=device)
    assert result.killed, f"mutant {name} ({result.bug_class}) survived the property suite"
    if result.counterexample:     # a Hypothesis property: its shrunk example
        assert "Falsifying" in result.counterexample or "Failing test case" in result.counterexample
    else:                         # a property over a fixed plan: the REPRO line of the failing input
        assert result.repro and "equiv" in result.repro and result.repro.count("--") >= 2, result


@pytest.mark.parametrize("name", list(LEGAL_VARIANTS))
def test_legal_variants_pass(name, device):
    failures = legal_failures(name, device=device)
    assert not failures, f"legal variant {name} failed {failures[0]['nodeid']}: {failures[0]['message']}"


@pytest.mark.parametrize("prop, name", sorted(CAN_FAIL.items()))
def test_each_property_can_fail_alone(prop, name, device):
    report = run_suite(f"equiv.ops.draft_topk.mutants:{name}", k=MUTANTS[name].k, device=device, extra=["-k", f"test_{prop}"])
    failed = _first_failure(report)
    assert failed is not None and failed["property"] == prop, f"{prop} did not kill {name} on its own"


def test_builtin_argument_checks_can_fail():
    from equiv.properties.test_calls import argument_problems

    unchecked = MUTANTS["constant_probability"].fn          # no k or B validation at all
    problems, _ = argument_problems(unchecked, "cpu", None)
    assert any("k=0" in p for p in problems) and any("k=6" in p for p in problems)
