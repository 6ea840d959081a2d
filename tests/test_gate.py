"""The gate's verdicts, exit codes and outputs (tolerance stage in-process; the property and MTP
stages have their own tests)."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from equiv.gate import run_gate

HERE = os.path.dirname(__file__)
MIS = os.path.join(HERE, "candidates", "misbehaving.py")


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_hardcoded_one_fails_and_identity_passes_the_tolerance_stage():
    bad = run_gate("hardcoded_one", device="cpu", stages="tolerance")
    good = run_gate("identity_top1", device="cpu", stages="tolerance")
    assert not bad.passed and good.passed
    assert all(c.repro.startswith("REPRO: equiv check") for c in bad.failed)
    assert "poison_mix" in " ".join(c.name for c in bad.failed)


@pytest.mark.parametrize("fn, reason", [
    ("raises", "RuntimeError: CUDA error"),
    ("hangs", "did not return within 1 s"),
    ("returns_list_of_floats", "topk_p is a list"),
    ("returns_numpy", "topk_p is a ndarray"),
])
def test_misbehaving_candidates_fail_with_the_reason(fn, reason):
    res = run_gate(f"{MIS}:{fn}", device="cpu", stages="tolerance", timeout=1.0)
    assert not res.passed
    assert reason in res.failed[0].detail
    if fn == "hangs":                            # one hang, then the rest are not run
        assert "not run: the candidate hung on an earlier call" in res.failed[1].detail


def test_correct_file_candidate_passes():
    # a k = 1 path that ignores k: right at k = 1, wrong at the default's k = 2 (issue 34)
    assert run_gate(f"{MIS}:correct", device="cpu", stages="tolerance", k=1).passed


def test_json_and_junit_outputs(tmp_path):
    j, x = tmp_path / "gate.json", tmp_path / "gate.xml"
    out = cli("gate", "--candidate", "hardcoded_one", "--device", "cpu", "--stages", "tolerance",
              "--json", str(j), "--junit", str(x))
    assert out.returncode == 1, out.stderr
    data = json.loads(j.read_text())
    assert data["candidate"] == "hardcoded_one" and data["passed"] is False
    failed = [c for c in data["checks"] if not c["passed"]]
    assert failed and {"name", "passed", "detail", "counterexample", "repro"} <= set(failed[0])
    suite = ET.parse(x).getroot()
    # one failing test case per failing check, and one per defect of the diagnosis
    assert suite.tag == "testsuite" and int(suite.get("failures")) == len(failed) + len(data["defects"])
    assert suite.find("testcase/failure") is not None
    assert oct(os.stat(j).st_mode & 0o777) != "0o600"


@pytest.mark.parametrize("args, needle", [
    (("--candidate", "no.such:thing"), "no module named 'no'"),
    (("--candidate", f"{MIS}:NOT_CALLABLE"), "not a callable"),
    (("--candidate", "identity_top1", "--budget", "fast"), "budget='fast' is unknown"),
    (("--candidate", "identity_top1", "--dtype", "fp8"), "dtype='fp8' is unknown"),
    (("--candidate", "identity_top1", "--timeout", "-1"), "timeout=-1.0 is invalid"),
    (("--candidate", "identity_top1", "--stages", "tolerance,speed"), "stages='speed' is unknown"),
])
def test_gate_usage_errors_exit_2_with_one_line(args, needle, tmp_path):
    out = cli("gate", *args, "--json", str(tmp_path / "never.json"))
    assert out.returncode == 2, out.stdout + out.stderr
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "never.json").exists()


def test_unwritable_output_is_a_usage_error(tmp_path):
    out = cli("gate", "--candidate", "identity_top1", "--device", "cpu", "--stages", "tolerance",
              "--json", str(tmp_path / "no" / "such" / "dir.json"))
    assert out.returncode == 2 and "does not exist" in out.stderr


@pytest.mark.parametrize("candidate, device", [("identity_top1", "cuda"), ("no_such_path", "cpu")])
def test_the_suite_starts_first_and_is_killed_when_the_command_fails_after(monkeypatch, candidate, device):
    # the property suite is the critical path, so it starts before the device is resolved; a
    # failure there (no GPU) is still a usage error, and the started suite is killed, not left
    # running. A spec that names nothing is refused before anything starts (it is parsed once,
    # first, with every other argument)
    import importlib

    from equiv.errors import UsageError

    gate = importlib.import_module("equiv.ops.draft_topk.gate")     # the draft op's gate plan starts it
    if device == "cuda":
        import torch

        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    started = []

    class Handle:
        killed = False

        def kill(self):
            self.killed = True

    def fake_start(options, **kw):
        started.append((options.candidate, options.device, Handle()))
        return started[-1][2]

    monkeypatch.setattr(gate, "start_properties", fake_start)
    with pytest.raises(UsageError):
        run_gate(candidate, device=device)
    if candidate == "no_such_path":
        assert started == []
    else:
        assert [(s, d) for s, d, _ in started] == [(candidate, device)] and started[0][2].killed
