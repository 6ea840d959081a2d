"""Calibration on the zoo: every mutant maps to its expected kinds, no extra defect, none for a
correct path (the table of docs/diagnosis.md comes from the same ``calibrate``, on the real gate).

Plan: each candidate of ``equiv.ops.draft_topk.diagnose.calibrate.EXPECTED_KINDS`` -- the mutants, the
multi-defect mutants, ``hardcoded_one``, the correct built-in paths and the legal variants -- is
put through the mini gate (a fixed battery of inputs, one per feature the isolation varies, and a
second call of one shape), and the diagnosis of its failing checks must name exactly the
expected kinds. A few seconds for the whole zoo on the CPU.
"""
import pytest

from equiv.ops.draft_topk.diagnose import KINDS
from equiv.ops.draft_topk.diagnose.calibrate import EXPECTED_KINDS, calibrate
from equiv.ops.draft_topk.mutants import MUTANTS


@pytest.mark.parametrize("name", list(EXPECTED_KINDS))
def test_each_candidate_maps_to_its_expected_kinds(name):
    row = calibrate([name], gate=False)[0]
    assert row.ok, (f"{name}: expected {list(row.expected)}, found {list(row.found)} "
                    f"(triggers {list(row.triggers)}; unexplained {list(row.unexplained)})")
    assert not row.unexplained or not row.expected, f"{name}: checks left unexplained: {row.unexplained}"


def test_every_mutant_has_an_expected_kind():
    missing = [n for n in MUTANTS if n not in EXPECTED_KINDS]
    assert not missing, f"no expected kind recorded for {missing}: add them to EXPECTED_KINDS"
    assert set(KINDS) >= {k for kinds in EXPECTED_KINDS.values() for k in kinds}, "an expected kind is not a kind"
    multi = [n for n, kinds in EXPECTED_KINDS.items() if len(kinds) > 1]
    assert {len(EXPECTED_KINDS[n]) for n in multi} == {2, 3}, "two- and three-defect mutants"
