"""The sweep plugin: shards multiply Hypothesis items, xdist workers are accounted, examples counted."""
import json
import subprocess
import sys
import textwrap

from equiv.pytest.sweep import count_examples

SUITE = textwrap.dedent("""
    from hypothesis import given, settings, strategies as st

    @settings(max_examples=25, derandomize=True, database=None)
    @given(st.integers())
    def test_a(x):
        assert isinstance(x, int)

    def test_plain():
        assert True
""")


def run(tmp_path, *args):
    (tmp_path / "test_suite.py").write_text(SUITE)
    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args,
                           f"--equiv-sweep-json={out}", "test_suite.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text()), proc.stdout


def test_single_process_counts_examples(tmp_path):
    rec, _ = run(tmp_path)
    assert rec["examples"] == 25 and rec["n_workers"] == 1 and rec["workers"]["main"]["items"] == 2


def test_shards_over_two_xdist_workers(tmp_path):
    rec, out = run(tmp_path, "-n", "2", "--equiv-shards", "3")
    assert "4 passed" in out                         # 3 shards of test_a + test_plain
    assert rec["examples"] == 75 and set(rec["workers"]) == {"gw0", "gw1"}
    assert rec["balance_slowest_over_fastest"] >= 1.0


def test_count_examples_parses_hypothesis_statistics():
    text = ("  - during generate phase (0.05 seconds):\n    - 97 passing examples, 1 failing examples, "
            "2 invalid examples\n  - during shrink phase (0.01 seconds):\n"
            "    - 3 passing examples, 4 failing examples, 0 invalid examples\n")
    assert count_examples(text) == 107
    newer = "    - 97 passing, 1 failing, and 2 invalid test cases\n"     # later Hypothesis wording
    assert count_examples(newer) == 100
    assert count_examples("") == 0
