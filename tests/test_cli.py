"""The CLI's exit codes and one-line usage errors (run as a subprocess, as CI would)."""
import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "equiv", *args], capture_output=True, text=True, timeout=300)


def test_paths_table_and_json():
    out = run("paths")
    assert out.returncode == 0 and "identity_top1" in out.stdout
    data = json.loads(run("paths", "--json").stdout)
    names = [p["name"] for p in data["paths"]]
    assert names[:3] == ["softmax_topk", "hardcoded_one", "identity_top1"]


@pytest.mark.parametrize("args, needle", [
    (("check", "--candidate", "no.such:thing"), "no module named"),
    (("check", "--candidate", "softmax_topk", "--k", "0"), "k=0 is invalid"),
    (("check", "--candidate", "softmax_topk", "--recipe", "gauss:seed=1"), "family='gauss' is unknown"),
    (("check", "--candidate", "softmax_topk", "--recipe", "gaussian:sed=1"), "recipe item 'sed=1'"),
    (("nonsense",), "invalid choice"),
])
def test_usage_errors_are_one_line_exit_2(args, needle):
    out = run(*args)
    assert out.returncode == 2
    assert needle in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_check_exit_codes():
    bad = run("check", "--candidate", "hardcoded_one", "--device", "cpu", "--recipe", "gaussian:vocab=100")
    assert bad.returncode == 1 and "REPRO: equiv check" in bad.stdout
    good = run("check", "--candidate", "identity_top1", "--device", "cpu", "--recipe", "gaussian:vocab=100")
    assert good.returncode == 0, good.stdout + good.stderr
