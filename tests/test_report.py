"""The tolerance report in every format; files are written atomically."""
import json
import subprocess
import sys

import pytest

from equiv.atomic import atomic_write
from equiv.report import render, report_rows


@pytest.fixture(scope="module")
def small_report():
    return report_rows(["softmax_topk", "hardcoded_one", "identity_top1"], ["float32", "bfloat16"],
                       ["gaussian", "poison_mix", "ties_max"], vocab=4097, batch=4, device="cpu")


def test_rows_and_verdicts(small_report):
    rows = {(r.path, r.dtype, r.family): r for r in small_report.rows}
    assert rows[("identity_top1", "float32", "gaussian")].passed
    assert not rows[("hardcoded_one", "float32", "gaussian")].passed
    assert rows[("hardcoded_one", "float32", "poison_mix")].poisoning_violations > 0
    assert small_report.passed                    # hardcoded_one is reported, not required
    assert 0 < small_report.tightest_rtol["float32"] < 2 ** -13


def test_json_has_the_documented_keys(small_report):
    data = json.loads(render(small_report, "json"))
    keys = {"path", "dtype", "family", "max_ulp", "max_rel_err", "index_mismatches", "passed"}
    assert keys <= set(data["rows"][0]) and "tightest_rtol" in data


def test_markdown_and_table(small_report):
    md = render(small_report, "markdown")
    assert md.startswith("| path | dtype |") and "FAIL value" in md
    assert "tightest rtol" in render(small_report, "table")


def test_html_embeds_tables_and_plots(small_report):
    mtp = [{"path": "softmax_topk", "consumer": "greedy", "histogram": [1, 2, 3, 10]},
           {"path": "hardcoded_one", "consumer": "greedy", "histogram": [1, 2, 4, 9]}]
    page = render(small_report, "html", mtp)
    assert page.count("data:image/png;base64,") == 2 and "<table>" in page
    assert "MTP acceptance histograms" in page


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    with pytest.raises(TypeError):
        atomic_write(target, b"bytes into a text file")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_report_cli_exit_codes(tmp_path):
    run = lambda *a: subprocess.run([sys.executable, "-m", "equiv", "report", *a], capture_output=True,
                                    text=True, timeout=300)
    ok = run("--vocab", "1025", "--batch", "2", "--families", "gaussian", "--device", "cpu",
             "--format", "json", "--out", str(tmp_path / "r.json"))
    assert ok.returncode == 0 and json.loads((tmp_path / "r.json").read_text())["rows"]
    bad = run("--vocab", "1025", "--batch", "2", "--families", "gaussian", "--device", "cpu",
              "--paths", f"{__file__.rsplit('/', 1)[0]}/candidates/misbehaving.py:raises")
    assert bad.returncode == 1 and "FAIL contract" in bad.stdout
    for args, needle in ((("--vocab", "0"), "vocab=0 is invalid"), (("--families", "gauss"), "did you mean"),
                         (("--mtp-json", str(tmp_path / "none.json")), "is not an `equiv mtp --json` file")):
        out = run(*args)
        assert out.returncode == 2 and needle in out.stderr, out.stderr
