"""An operation defined only in the tests gets the whole house with no edit of the core.

``tests/argmax_op/`` is registered through the environment (``EQUIV_OPS``), as a host project
would register its own op, and every command runs it in a fresh process from an unrelated
folder: ``paths``, ``check``, ``gate`` (JSON and JUnit), ``selftest``, ``report`` and the
pytest plugin's suite. The correct built-in and the legal variant pass; each mutant fails with
its cause named. Without the registration the op is unknown (exit 2).
"""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _env(registered: bool = True) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([HERE, ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("EQUIV_OPS", None)
    if registered:
        env["EQUIV_OPS"] = "argmax=argmax_op.op:OP"
    return env


def _equiv(tmp_path, *args, registered=True):
    return subprocess.run([sys.executable, "-m", "equiv", "-q", *args], cwd=tmp_path, env=_env(registered),
                          capture_output=True, text=True, timeout=600)


def test_unregistered_op_is_a_usage_error(tmp_path):
    run = _equiv(tmp_path, "gate", "--op", "argmax", "--candidate", "torch_argmax", registered=False)
    assert run.returncode == 2 and "op='argmax' is unknown" in run.stderr


def test_paths_and_check(tmp_path):
    run = _equiv(tmp_path, "paths", "--op", "argmax", "--mutants")
    assert run.returncode == 0 and "torch_argmax" in run.stdout and "off_by_one" in run.stdout
    ok = _equiv(tmp_path, "check", "--op", "argmax", "--candidate", "torch_argmax", "--device", "cpu")
    bad = _equiv(tmp_path, "check", "--op", "argmax", "--candidate", "argmax_op.op:last_of_ties", "--device", "cpu")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert bad.returncode == 1 and "wrong_index" in bad.stdout and "REPRO: equiv check --op argmax" in bad.stdout


@pytest.mark.parametrize("candidate,passes,cause", [
    ("torch_argmax", True, None),
    ("argmax_op.op:via_stable_sort", True, None),
    ("argmax_op.op:in_half_precision", False, "wrong_index"),
])
def test_gate_json_and_junit(tmp_path, candidate, passes, cause):
    run = _equiv(tmp_path, "gate", "--op", "argmax", "--candidate", candidate, "--device", "cpu",
                 "--json", "v.json", "--junit", "j.xml")
    assert run.returncode == (0 if passes else 1), run.stdout + run.stderr
    doc = json.load(open(tmp_path / "v.json"))
    assert doc["op"] == "argmax" and doc["passed"] is passes
    assert {s for s in doc["stages"]} == {"properties", "exact"}
    assert all(doc["stages"][s]["status"] == ("pass" if passes else doc["stages"][s]["status"]) for s in doc["stages"])
    assert [d["cause"] for d in doc["defects"]] == ([] if passes else [cause])
    suite = ET.parse(tmp_path / "j.xml").getroot()
    assert int(suite.get("failures")) == (0 if passes else len(doc["defects"]) + sum(not c["passed"] for c in doc["checks"]))
    assert {c.get("classname") for c in suite.iter("testcase")} >= {"equiv.gate.exact", "equiv.gate.properties"}


def test_selftest_and_report(tmp_path):
    run = _equiv(tmp_path, "selftest", "--op", "argmax", "--device", "cpu", "--seeds", "2", "--json", "s.json")
    doc = json.load(open(tmp_path / "s.json"))
    assert run.returncode == 0 and doc["kill_rate"] == 1.0 and doc["false_positives"] == 0, run.stdout
    assert {m["name"] for m in doc["mutants"]} == {"last_of_ties", "in_half_precision", "off_by_one"}
    rep = _equiv(tmp_path, "report", "--op", "argmax", "--device", "cpu")
    assert rep.returncode == 0 and "torch_argmax" in rep.stdout


def test_the_plugin_runs_the_ops_own_property(tmp_path):
    def suite(candidate):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--pyargs",
                               "equiv.properties", "--equiv-op", "argmax", "--equiv-candidate", candidate],
                              cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=600)
    ok, bad = suite("torch_argmax"), suite("argmax_op.op:off_by_one")
    assert ok.returncode == 0 and "1 passed" in ok.stdout, ok.stdout[-800:]
    assert bad.returncode == 1 and "test_op_property[exact]" in bad.stdout, bad.stdout[-800:]
