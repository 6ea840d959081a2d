"""``equiv mtp`` (equiv/commands/mtp.py): table, JSON, PNG, determinism and exit codes.

Plan: a small run prints the path x consumer table and writes the JSON and PNG atomically; the
same seed writes byte-identical JSON; a candidate that is lossless but drafts badly exits 1 with
a REPRO line; the one known failure (hardcoded_one x confidence) does not fail the run; bad usage
is one line on stderr and exit 2 (run as a subprocess, as CI would).
"""
import json
import subprocess
import sys

import pytest

from equiv.cli import main

SMALL = ["--device", "cpu", "--vocab", "1024", "--sequences", "12", "--rounds", "6"]
BAD_CANDIDATE = '''
import torch

def draft_topk(logits, k):
    idx = (torch.argmax(logits, dim=-1, keepdim=True) + 1) % logits.shape[-1]
    return torch.full(idx.shape, 0.5), idx
'''


def test_table_json_and_plot(tmp_path, capsys):
    js, png = tmp_path / "m.json", tmp_path / "m.png"
    rc = main(["mtp", *SMALL, "--json", str(js), "--plot", str(png)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "hardcoded_one  confidence" in out and "expected-fail" in out and "n/a" in out
    data = json.loads(js.read_text())
    assert len(data["results"]) == 12 and data["passed"] is True
    assert {r["consumer"] for r in data["results"]} == {"greedy", "target_only", "confidence", "tree"}
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.png"]


def test_same_seed_writes_identical_json(tmp_path, capsys):
    args = ["mtp", *SMALL, "--paths", "identity_top1", "--consumers", "target_only,confidence"]
    main([*args, "--json", str(tmp_path / "a.json")])
    main([*args, "--json", str(tmp_path / "b.json")])
    main([*args, "--seed", "5", "--json", str(tmp_path / "c.json")])
    capsys.readouterr()
    a, b, c = ((tmp_path / f"{n}.json").read_bytes() for n in "abc")
    assert a == b and a != c


def test_a_failing_candidate_exits_1_with_repro(tmp_path, capsys):
    cand = tmp_path / "bad.py"
    cand.write_text(BAD_CANDIDATE)
    rc = main(["mtp", *SMALL, "--paths", f"{cand}:draft_topk", "--consumers", "greedy"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL" in out and "equivalent_to_reference" in out
    assert f"REPRO: equiv mtp --paths {cand}:draft_topk --consumers greedy" in out


def test_trace_replay_from_the_cli(capsys):
    rc = main(["mtp", "--device", "cpu", "--trace", "fixtures/traces/tiny_v64.npz",
               "--consumers", "greedy"])
    out = capsys.readouterr().out
    assert rc == 0 and "trace fixtures/traces/tiny_v64.npz" in out


@pytest.mark.parametrize("args, needle", [
    (("--consumers", "beam"), "consumers='beam' is unknown"),
    (("--steps", "0"), "steps=0 is invalid"),
    (("--trace", "no/such.npz"), "no such file"),
    (("--paths", "no.such:thing"), "no module named"),
    (("--device", "tpu"), "device='tpu' is unknown"),
    (("--json", "/no/such/dir/x.json"), "does not exist"),
    (("--plot", "/no/such/dir/x.png"), "does not exist"),
])
def test_usage_errors_are_one_line_exit_2(args, needle, capsys):
    rc = main(["mtp", *SMALL, "--paths", "softmax_topk", "--consumers", "greedy", *args])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_usage_error_from_a_subprocess_has_no_traceback():
    out = subprocess.run([sys.executable, "-m", "equiv", "mtp", "--consumers", "greedy,beam"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == ("equiv mtp: error: consumers='beam' is unknown: choose from "
                                  "greedy, target_only, confidence, tree")
