"""The verify_tree gate through the core: ``equiv gate/check --op verify_tree``, JSON, JUnit, the
``--drafts`` option and its usage errors.

Test plan: the gate's statistics stage with the statistical plan shrunk (monkeypatched to the
small plan of test_verify_tree_judge) so each run takes seconds: a built-in passes under its
declaration and fails an explicit construction it does not declare, with defects by cause in
the JSON and a JUnit document; a mutant spec fails with its cause; ``--drafts`` with a bad value
is a one-line usage error (exit 2); ``equiv check`` replays a REPRO recipe.
"""
import json
import subprocess
import sys

import pytest

from equiv.gate import run_gate
from equiv.ops.verify_tree import gate

from test_verify_tree_judge import small_cases


@pytest.fixture
def small_plan(monkeypatch):
    def small(budget="quick", drafts="topk", seed=0, targets="any", **_):
        cases = small_cases(drafts, seed)
        return [c for c in cases if c.recipe.family == "onehot_target"] if targets == "onehot" else cases
    monkeypatch.setattr(gate, "statistical_cases", small)      # the gate's plan (imported at its top)


def test_builtin_passes_its_declaration_and_fails_another(small_plan):
    ok = run_gate("specinfer", op="verify_tree", stages="statistics")
    assert ok.passed and ok.op == "verify_tree", ok.summary()
    assert ok.stage("statistics").ran["drafts"] == "iid"
    bad = run_gate("specinfer", op="verify_tree", stages="statistics", drafts="topk")
    assert not bad.passed
    doc = json.loads(json.dumps(bad.to_json()))
    assert doc["defects"] and all("--op verify_tree" in d["repro"] and "--drafts topk" in d["repro"]
                                  for d in doc["defects"])
    assert "<testsuite" in bad.to_junit()


def test_mutant_spec_fails_with_its_cause(small_plan):
    r = run_gate("equiv.ops.verify_tree.mutants:fallback_zero_prob", op="verify_tree", stages="statistics")
    assert not r.passed
    assert "drew a token of target probability 0" in [d.cause for d in r.diagnosis.defects]


def test_bad_drafts_is_a_usage_error():
    out = subprocess.run([sys.executable, "-m", "equiv", "gate", "--op", "verify_tree", "--candidate",
                          "target_only", "--drafts", "beam"], capture_output=True, text=True)
    assert out.returncode == 2
    assert "drafts" in out.stderr and "Traceback" not in out.stderr


def test_check_replays_a_recipe():
    from equiv.api import check

    run = check("target_only", "realistic:seed=1,batch=32,vocab=64,nodes=8,depth=3,fanout=3", op="verify_tree")
    assert run.passed
    bad = check("specinfer", "realistic:seed=1,batch=32,vocab=64,nodes=8,depth=3,fanout=3", op="verify_tree",
                drafts="topk", k=1)
    assert bad.result.drafts == "topk"


@pytest.mark.parametrize("op", ["verify", "verify_tree"])
def test_a_verifier_that_exits_on_import_fails_load_without_a_traceback(op, tmp_path):
    (tmp_path / "exits.py").write_text("import os\nos._exit(3)\n\ndef v(*args, **kwargs):\n    pass\n")
    out = subprocess.run([sys.executable, "-m", "equiv", "gate", "--op", op, "--candidate", "exits.py:v",
                          "--device", "cpu", "--json", "v.json"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr
    data = json.loads((tmp_path / "v.json").read_text())
    assert [(c["name"], c["passed"]) for c in data["checks"]] == [("load", False)]
    assert "exited with code 3" in data["checks"][0]["detail"]
    assert {s["status"] for s in data["stages"].values()} == {"not run"}
