"""``equiv.checks.with_call_defects``: a verifier op's failed calls (exit, hang, raise, a wrong
output, an input written) become defects by cause even when only the property stage saw them.

Test plan: a failed property check carrying the runner's outcome or the probe's cause adds one
defect of that kind (with its repro and trigger) to an empty diagnosis and beside the judge's
own defects, once per kind; passing checks, causes of the statistics (a law) and kinds already
named add nothing.
"""
from equiv.checks import Check, Defect, Diagnosis, with_call_defects


def _failed(**kw):
    return Check("properties", "property:verify_tree_contract_plan", False,
                 "contract: the candidate exited with code 0 during the probe", repro="REPRO: equiv check ...",
                 recipe="realistic:seed=0,batch=2,vocab=262144", **kw)


def test_a_crash_seen_only_by_the_properties_becomes_a_defect():
    got = with_call_defects(None, [_failed(cause="crash or hang")], "exits.py:fn")
    (d,) = got.defects
    assert d.cause == "crash or hang" and d.repro.startswith("REPRO") and "262144" in d.trigger
    assert d.checks == ("property:verify_tree_contract_plan",) and got.candidate == "exits.py:fn"


def test_one_defect_per_kind_beside_the_judges_own():
    law = Defect("residual law", "t", "e", "w", "trig", "ev", ("statistics:x",), "REPRO")
    checks = [_failed(outcome="timeout"), _failed(outcome="timeout"), _failed(cause="raise"),
              Check("statistics", "statistics:x", False, "law", cause="residual law")]
    got = with_call_defects(Diagnosis("c", (law,)), checks, "c")
    assert [d.cause for d in got.defects] == ["residual law", "timeout", "raise"]


def test_nothing_to_add_leaves_the_diagnosis_as_it_was():
    diag = Diagnosis("c", ())
    passing = Check("properties", "property:p", True, "held", cause=None)
    assert with_call_defects(diag, [passing], "c") is diag
    assert with_call_defects(None, [passing], "c") is None
    named = Diagnosis("c", (Defect("raise", "t", "e", "w", "trig", "ev", (), "R"),))
    assert with_call_defects(named, [_failed(cause="raise")], "c") is named
