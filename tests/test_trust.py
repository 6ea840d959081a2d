"""Gate-level trust: both answers of the gate can be believed (issue 10's classes, end to end).

A wrong candidate never passes because it exits, interrupts or hangs; a correct k = 1 kernel is
never called at another k; a gate in which nothing was checked fails.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from equiv.gate import run_gate
from equiv.run import close_all

HERE = os.path.dirname(os.path.abspath(__file__))
HOSTILE = os.path.join(HERE, "candidates", "hostile.py")


@pytest.fixture(autouse=True)
def _fresh_runners():
    yield
    close_all()


def equiv_cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("name", ["exits_zero", "os_exits_zero", "segfaults"])
def test_a_candidate_that_exits_or_crashes_fails_the_gate_with_a_json_verdict(name, tmp_path):
    out = tmp_path / "verdict.json"
    proc = equiv_cli("gate", "--candidate", f"{HOSTILE}:{name}", "--device", "cpu", "--vocab", "1000",
                     "--stages", "tolerance,mtp", "--json", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL" in proc.stdout.splitlines()[0]
    verdict = json.loads(out.read_text())
    assert verdict["passed"] is False and verdict["stages"]["tolerance"]["status"] == "FAIL"


def test_a_keyboard_interrupt_in_the_property_suite_is_a_failure_not_a_pass():
    res = run_gate(f"{HOSTILE}:keyboard_interrupt", device="cpu", stages="properties", timeout=30)
    assert not res.passed
    assert any("KeyboardInterrupt" in c.detail for c in res.failed), res.summary()


def test_a_k1_kernel_is_judged_at_k1_only_and_passes():
    res = run_gate(f"{HOSTILE}:k1_only", k=1, device="cpu", vocab=2000, stages="tolerance,mtp", timeout=60)
    assert res.passed, res.summary()
    assert "tree" in res.stage("mtp").why                       # said, not silently dropped


def test_nothing_checked_fails():
    res = run_gate("hardcoded_one", k=4, device="cpu", stages="properties")
    assert not res.passed
    assert res.stage("properties").status == "not applicable"
    assert "nothing was checked" in res.summary()


def test_timeout_inf_means_no_limit():
    res = run_gate("softmax_topk", device="cpu", vocab=1000, stages="tolerance", timeout="inf")
    assert res.passed, res.summary()


def test_check_has_a_time_out_so_a_repro_of_a_hang_ends():
    t0 = time.perf_counter()
    proc = equiv_cli("check", "--candidate", f"{HOSTILE}:sleeps", "--device", "cpu", "--timeout", "2",
                     "--recipe", "gaussian:batch=2,vocab=100", timeout=120)
    assert proc.returncode == 1 and "did not return within 2 s" in proc.stdout
    assert time.perf_counter() - t0 < 60


def test_the_timeout_holds_in_the_property_stage_too():
    t0 = time.perf_counter()
    res = run_gate(f"{HOSTILE}:sleeps", device="cpu", stages="properties", timeout=2)
    assert not res.passed and time.perf_counter() - t0 < 120, res.summary()


def test_a_candidate_that_patches_equiv_in_its_worker_cannot_pass_the_mtp_stage():
    # the worker only decodes (raw tokens and counts come back); the verdict process judges them
    from equiv.mtp.stage import mtp_checks
    from equiv.run import CandidateSpec

    spec = CandidateSpec.parse(os.path.join(HERE, "candidates", "judge_patcher.py") + ":runner_up")
    assert spec.isolated
    checks, stage = mtp_checks(spec, ks=(1,), device="cpu", seed=0, vocab=1000, timeout=120)
    failed = {c.name for c in checks if not c.passed}
    assert "mtp:greedy" in failed and stage.status == "FAIL", [c.detail for c in checks]
