"""``equiv gate --op verify`` and ``equiv check --op verify``: verdicts, outputs and exit codes.

Test plan (as CI runs it: subprocesses): the whole quick gate passes ``torch_sampler`` under the
default lossless law and writes its JSON (with the law and the efficiency rows) and JUnit files; a mutant fails with exit 1 and a REPRO that ``equiv check --op verify``
replays to the same failure; an unloadable verifier, a draft-style candidate and a stage of the
other operation are usage errors (exit 2, one line); the default op stays the draft top-k.
"""
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET


TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
HERE = TESTS


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_quick_gate_passes_the_torch_sampler_with_json_and_junit(tmp_path):
    js, xml = tmp_path / "g.json", tmp_path / "g.xml"
    res = cli("gate", "--op", "verify", "--candidate", "torch_sampler", "--device", "cpu",
              "--json", str(js), "--junit", str(xml))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "(op verify, cpu, budget quick, seed 0): PASS" in res.stdout
    data = json.loads(js.read_text())
    assert data["op"] == "verify" and data["passed"] is True
    assert {c["name"] for c in data["checks"]} >= {"statistics:marginal", "statistics:joint", "statistics:tail",
                                                   "property:verify_contract_plan"}
    ran = data["stages"]["statistics"]["ran"]
    assert ran["law"] == "lossless" and ran["efficiency"] and "token-level optimum" in res.stdout
    assert ET.parse(xml).getroot().get("failures") == "0"


def test_a_mutant_fails_and_its_repro_replays_the_failure():
    res = cli("gate", "--op", "verify", "--candidate", "equiv.ops.verify.mutants:reused_uniform",
              "--device", "cpu", "--stages", "statistics")
    assert res.returncode == 1, res.stdout + res.stderr
    failing = re.search(r"failing: ([^\n]*)", res.stdout).group(1)    # the statistics stage's failing checks
    assert "defect" in res.stdout and failing, res.stdout
    repro = re.search(r"REPRO: (equiv gate --op verify .*)", res.stdout).group(1)
    again = cli(*repro.split()[1:])                     # statistics pool every case: the stage replays
    assert again.returncode == 1 and re.search(r"failing: ([^\n]*)", again.stdout).group(1) == failing


def test_an_exact_failure_replays_with_equiv_check():
    res = cli("gate", "--op", "verify", "--candidate", "equiv.ops.verify.mutants:continues_after_rejection",
              "--device", "cpu", "--stages", "statistics")
    assert res.returncode == 1
    repro = re.search(r"REPRO: (equiv check --op verify .*)", res.stdout).group(1)
    args = [a.strip("'") for a in re.findall(r"'[^']*'|\S+", repro)][1:]
    again = cli(*args)
    assert again.returncode == 1 and "contract     FAIL" in again.stdout


def test_usage_errors_exit_2_with_one_line():
    for args, message in (
        (("--candidate", "no_such_module:fn"), "no module named 'no_such_module'"),
        (("--candidate", "softmax_topk"), "is not a built-in verifier"),
        (("--candidate", "torch_sampler", "--stages", "tolerance"), "stages='tolerance' is unknown"),
    ):
        res = cli("gate", "--op", "verify", "--device", "cpu", *args)
        assert res.returncode == 2 and message in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_the_default_op_is_still_the_draft_top_k():
    res = cli("check", "--candidate", "softmax_topk", "--device", "cpu", "--recipe",
              "gaussian:seed=0,batch=2,vocab=1000")
    assert res.returncode == 0 and "softmax_topk k=1 float32 [2, 1000] on cpu: PASS" in res.stdout


def test_the_law_asked_on_the_command_line_is_the_law_judged(tmp_path):
    """``--law token`` reaches the judge through ``RunOptions`` (it once stopped at the op's
    adapter: every verify gate judged the lossless law whatever was asked)."""
    spec = "equiv.ops.verify.mutants:ratio_in_float16"     # lossless to the gate's draws; breaks the token law
    verdicts = {}
    for law in ("lossless", "token"):
        js = tmp_path / f"{law}.json"
        res = cli("gate", "--op", "verify", "--candidate", spec, "--device", "cpu", "--stages", "statistics",
                  "--law", law, "--json", str(js))
        data = json.loads(js.read_text())
        assert data["stages"]["statistics"]["ran"]["law"] == law, res.stdout
        verdicts[law] = res.returncode
    assert verdicts == {"lossless": 0, "token": 1}
