"""The third verdict, NOT JUDGED: the machine's failures are not the candidate's (issue 42, part 3).

Before: an out-of-memory error while equiv built the input ended the worker ("exited with code 1
while building the input") and the gate said FAIL, "crash or hang ... the candidate raised
OutOfMemoryError"; a candidate's out-of-memory error on a device another process held was a
defect of the candidate. Each cause is simulated on the CPU through the test hook
``EQUIV_TEST_FAULT`` (equiv.run.faults; docs/trust.md) and ``EQUIV_BUILD_TIMEOUT_S``; every test
here failed before the change (no hook, no ``not_judged`` kind, no verdict field, exit 1).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest

from equiv import Recipe
from equiv.checks import Check
from equiv.run import close_all, faults, runner_for
from equiv.run.suite import SuiteRun, property_checks
from equiv.verdict import GateResult, not_judged_result

HERE = os.path.dirname(os.path.abspath(__file__))
OOM = os.path.join(HERE, "candidates", "out_of_memory.py")
GOOD = os.path.join(HERE, "candidates", "hostile.py") + ":k1_only"
SMALL = Recipe(family="gaussian", seed=0, batch=3, vocab=50)
PLENTY = str(10 ** 15)                           # free bytes: more than any call needs


@pytest.fixture(autouse=True)
def _fresh_runners():
    close_all()
    yield
    close_all()


def _call(spec, monkeypatch, fault: str, **env):
    monkeypatch.setenv(faults.HOOK, fault)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    runner = runner_for(spec, "cpu", timeout=60)
    return runner, runner.call(SMALL, 1)


# -- the runner: each cause is an outcome of kind not_judged, noted, and later calls are not made --
@pytest.mark.parametrize("fault, words", [
    ("build=memory", "out of host memory (MemoryError) while equiv built the input"),
    ("build=oom", "out of memory (OutOfMemoryError) while equiv built the input"),
    ("build=busy", "the device is busy or lost"),
])
def test_a_machine_failure_while_equiv_builds_the_input_is_not_judged(fault, words, monkeypatch):
    start = faults.mark()
    runner, out = _call(GOOD, monkeypatch, fault)
    assert not out.ok and out.kind == "not_judged" and words in out.problem, out.problem
    assert "exited" not in out.problem
    assert any(words in line for line in faults.since(start))
    later = runner.call(SMALL, 1)
    assert later.kind == "not_called" and "not judged" in later.problem


def test_out_of_memory_in_the_call_with_too_little_free_memory_is_not_judged(monkeypatch):
    runner, out = _call(f"{OOM}:draft_topk", monkeypatch, "free=1000")
    assert out.kind == "not_judged", out.problem
    for words in ("during the candidate's call", "free of", "held by other processes", "the call needs about"):
        assert words in out.problem, out.problem


def test_out_of_memory_in_the_call_with_enough_free_memory_is_the_candidates_defect(monkeypatch):
    runner, out = _call(f"{OOM}:draft_topk", monkeypatch, f"free={PLENTY}")
    assert out.kind == "raised" and "out-of-memory defect of the candidate" in out.problem, out.problem
    assert "OutOfMemoryError" in out.problem


@pytest.mark.parametrize("others_after, verdict", [(40, "not judged"), (9, "the candidate's"), (2, "the candidate's")])
def test_out_of_memory_while_other_processes_grew_during_the_call_is_not_judged(others_after, verdict, monkeypatch):
    """Two gates on one GPU: 30 GiB free when the call started (enough), then the other gate took
    memory while the call ran. A second reading when the call failed takes the others' growth
    off the free memory: NOT JUDGED when what is left is below the call's need (failed before:
    the candidate's out-of-memory defect whatever the others did)."""
    import torch

    gib = 2 ** 30
    start = faults.Memory(free=30 * gib, total=80 * gib, ours=40 * gib)            # others: 10 GiB
    after = faults.Memory(free=80 * gib - 40 * gib - others_after * gib, total=80 * gib, ours=40 * gib)
    monkeypatch.setattr(faults, "memory", lambda device: after)
    args = (torch.empty(2 * gib // 4 // 4, device="meta"),)                 # 0.5 GiB: needs ~2.25 GiB
    got = faults.judged(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), start, args, "cuda:0")
    if verdict == "not judged":
        assert isinstance(got, faults.NotJudged), got
        assert "other processes took 30.00 GiB more during the call" in str(got), got
    else:
        assert not isinstance(got, faults.NotJudged) and "out-of-memory defect of the candidate" in str(got), got


def test_the_harness_running_past_its_own_time_out_is_not_judged(monkeypatch):
    runner, out = _call(GOOD, monkeypatch, "build=hang", EQUIV_BUILD_TIMEOUT_S="2")
    assert out.kind == "not_judged", out.problem
    assert "did not finish building the input within 2 s" in out.problem and "not the candidate's" in out.problem


@pytest.mark.parametrize("op, recipe", [("verify", "realistic:seed=0,batch=4,n=2,vocab=50"),
                                        ("verify_tree", None)])
def test_a_probe_of_either_verifier_meets_the_same_rule(op, recipe, monkeypatch):
    """The verifiers' calls go through a probe (``run_probe`` and ``faults.Watched``), not ``invoke``."""
    import importlib

    if recipe is None:
        recipe = str(importlib.import_module(f"equiv.ops.{op}.recipes").TreeRecipe.parse(
            "realistic:seed=0,batch=4,vocab=50"))
    target = f"equiv.ops.{op}.calls:draw"
    for fault, kind, words in (("build=oom", "not_judged", "in equiv's own code in the worker"),
                               ("free=1000", "not_judged", "held by other processes"),
                               (f"free={PLENTY}", None, "out-of-memory defect of the candidate")):
        close_all()
        monkeypatch.setenv(faults.HOOK, fault)
        got = runner_for(f"{OOM}:{op}", "cpu", timeout=60, op=op).probe(target, {"recipe": recipe, "seeds": [0]})
        if kind is None:                         # the candidate's: the probe reports it as its problem
            assert got.ok and words in got.value["problem"], got
        else:
            assert got.kind == kind and words in got.problem, got.problem


# -- the property suite: its stage time-out and its process's notes --------------------------------
def _handle(run: SuiteRun):
    return SimpleNamespace(wait=lambda: run)


def test_the_property_suite_past_its_stage_time_out_is_not_judged():
    start = faults.mark()
    checks, stage = property_checks(_handle(SuiteRun(None, None, "", "REPRO: x", True, 9.0)), 5.0)
    assert checks[0].outcome == "not_judged" and "equiv's own stage limit" in checks[0].detail
    assert faults.since(start) == [checks[0].detail]


def test_the_suites_not_judged_lines_reach_the_gate():
    start = faults.mark()
    report = {"tests": [{"nodeid": "t::x", "property": "x", "outcome": "not judged", "message": "m"}],
              "not_judged": ["out of memory (OutOfMemoryError) while equiv built the input"]}
    property_checks(_handle(SuiteRun(1, report, "", "REPRO: x", False, 1.0)), 5.0)
    assert faults.since(start) == ["out of memory (OutOfMemoryError) while equiv built the input"]


# -- the verdict: field, exit code, summary line, JUnit error --------------------------------------
def _result(**kw):
    checks = (Check("tolerance", "tolerance:gaussian", False, "the candidate was not judged: x"),
              Check("tolerance", "tolerance:zipf", True, "held"))
    base = dict(candidate="c", passed=False, checks=checks, k=(1,), device="cpu", dtypes=("float32",),
                budget="quick", seed=0, duration_s=1.0, diagnosis=SimpleNamespace(defects=("d",)))
    return GateResult(**{**base, **kw})


def test_a_not_judged_result_is_neither_pass_nor_a_defect():
    plain = _result()
    assert plain.verdict == "fail" and plain.exit_code == 1 and not_judged_result(plain, []) is plain
    res = not_judged_result(plain, ["out of memory (MemoryError) while equiv built the input"] * 2)
    assert (res.verdict, res.exit_code, res.passed, res.diagnosis) == ("not judged", 3, False, None)
    assert res.not_judged == ("out of memory (MemoryError) while equiv built the input",)
    assert [ln for ln in res.summary().splitlines() if ln.strip().startswith("NOT JUDGED:")] == [
        "  NOT JUDGED: out of memory (MemoryError) while equiv built the input"]
    doc = res.to_json()
    assert doc["verdict"] == "not judged" and doc["defects"] == [] and doc["not_judged"] == list(res.not_judged)
    suite = ET.fromstring(res.to_junit())
    assert (suite.get("failures"), suite.get("errors")) == ("0", "2")
    assert suite.find(".//failure") is None
    assert [e.get("type") for e in suite.iter("error")] == ["NotJudged", "NotJudged"]
    assert _result(passed=True, checks=()).verdict == "pass"


# -- the command line, as CI runs it -----------------------------------------------------------------
def _equiv(tmp_path, fault, *args, **env):
    out = tmp_path / "v.json"
    junit = tmp_path / "v.xml"
    got = subprocess.run([sys.executable, "-m", "equiv", *args, "--device", "cpu", "--json", str(out),
                          *(["--junit", str(junit)] if args[0] == "gate" else [])],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, faults.HOOK: fault, **env})
    doc = json.loads(out.read_text()) if out.exists() else None
    xml = ET.parse(junit).getroot() if junit.exists() else None
    return got, doc, xml


def _not_judged_lines(text: str) -> list:
    return [ln for ln in text.splitlines() if ln.strip().startswith("NOT JUDGED:")]


@pytest.mark.parametrize("op, stages", [("draft_topk", "tolerance"), ("verify", "statistics"),
                                        ("verify_tree", "statistics")])
def test_the_gate_of_every_op_exits_3_when_the_device_is_short_of_memory(op, stages, tmp_path):
    got, doc, xml = _equiv(tmp_path, "free=1000", "gate", "--op", op, "--candidate", f"{OOM}:{op}",
                           "--stages", stages, *(["--k", "1"] if op == "draft_topk" else []))
    assert got.returncode == 3, got.stdout + got.stderr
    lines = _not_judged_lines(got.stdout)
    assert len(lines) == 1 and "held by other processes" in lines[0], got.stdout
    assert doc["verdict"] == "not judged" and doc["passed"] is False and doc["defects"] == []
    assert xml.find(".//failure") is None and xml.find(".//error[@type='NotJudged']") is not None


def test_the_gate_exits_3_when_equiv_runs_out_of_memory_building_the_input(tmp_path):
    got, doc, xml = _equiv(tmp_path, "build=memory", "gate", "--candidate", GOOD, "--k", "1",
                           "--stages", "tolerance")
    assert got.returncode == 3, got.stdout + got.stderr
    line = _not_judged_lines(got.stdout)[0]
    assert "out of host memory (MemoryError)" in line and ("equiv built the input" in line or "equiv's own code" in line)
    assert "exited with code" not in got.stdout and doc["verdict"] == "not judged"
    assert xml.get("failures") == "0" and int(xml.get("errors")) >= 1


def test_the_gate_fails_a_candidate_that_runs_out_of_memory_on_an_idle_device(tmp_path):
    got, doc, xml = _equiv(tmp_path, f"free={PLENTY}", "gate", "--candidate", f"{OOM}:draft_topk", "--k", "1",
                           "--stages", "tolerance")
    assert got.returncode == 1, got.stdout + got.stderr
    assert "FAIL" in got.stdout.splitlines()[0] and "out-of-memory defect of the candidate" in got.stdout
    assert doc["verdict"] == "fail" and "not_judged" not in doc
    assert xml.find(".//failure") is not None and xml.find(".//error") is None


def test_another_command_says_not_judged_in_one_line(tmp_path):
    got, doc, _ = _equiv(tmp_path, "build=oom", "check", "--candidate", GOOD, "--recipe",
                         "gaussian:seed=0,batch=3,vocab=50")
    assert got.returncode == 3, got.stdout + got.stderr
    assert len([ln for ln in got.stderr.splitlines() if "NOT JUDGED" in ln]) == 1, got.stderr


def test_the_property_suites_machine_failures_make_the_gate_not_judged(tmp_path):
    """The suite runs in its own pytest process: its plugin reports the lines (``not_judged``)."""
    got, doc, xml = _equiv(tmp_path, "build=oom", "gate", "--candidate", GOOD, "--k", "1", "--stages", "properties")
    assert got.returncode == 3, got.stdout + got.stderr
    assert "while equiv built the input" in _not_judged_lines(got.stdout)[0]
    assert doc["verdict"] == "not judged" and xml.find(".//failure") is None


# -- the classification and the candidate as the worker calls it (in this process) -----------------
class AcceleratorError(RuntimeError):
    """As torch 2.13 raises a CUDA error (seen on an H100: "CUDA error: out of memory")."""


@pytest.mark.parametrize("exc, words", [
    (MemoryError(), "out of host memory"),
    (AcceleratorError("CUDA error: out of memory\nSearch for `cudaErrorMemoryAllocation'"), "out of memory"),
    (RuntimeError("CUDA error: CUDA-capable device(s) is/are busy or unavailable"), "busy or lost"),
    (RuntimeError("CUDA error: an illegal memory access was encountered"), None),   # the candidate's kernel
    (ValueError("k must be positive"), None),
])
def test_which_failures_are_the_machines(exc, words):
    got = faults.machine_fault(exc)
    assert (got is None) if words is None else (words in got), got


def test_the_watched_candidate_keeps_its_attributes_and_signature():
    import inspect

    def fn(logits, k):
        return logits
    fn.supported_k = (1, 2)
    watched = faults.Watched(fn, "cpu")
    assert watched.supported_k == (1, 2) and watched.__name__ == "fn"
    assert list(inspect.signature(watched).parameters) == ["logits", "k"]
    assert watched(3, 1) == 3 and not hasattr(watched, "max_k")
