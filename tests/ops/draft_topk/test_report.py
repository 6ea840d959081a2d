"""The tolerance report in every format; files are written atomically.

Plan: one small real report (3 built-ins and a candidate whose exception message is hostile HTML,
2 dtypes, 3 families, V = 4097) serves the format tests: the summary comes first in every format,
the provenance is in every format (and never fails outside a git checkout), the HTML page has one
error histogram per dtype with rtol drawn on it, escapes the candidate's text, and embeds no image
wider than 1400 px (the MTP panels included); a list cut short says "+N more" (built from
synthetic rows, so it costs nothing). The CLI's exit codes are checked in a subprocess.
"""
import base64
import json
import os
import re
import subprocess
import sys
from dataclasses import replace

import pytest

import equiv
from equiv.atomic import atomic_write
from equiv.ops.draft_topk.report import render
from equiv.ops.draft_topk.report.rows import Report, report_rows
from equiv.figures import PAGE_WIDTH_PX, figure_png, png_size
from equiv.ops.draft_topk.report.html import LIST_LIMIT, error_figure

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # tests/, where the shared candidates live
HOSTILE = '<script>alert("owned")</script><img src=x onerror=alert(1)> & </td></table>'


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    cand = tmp_path_factory.mktemp("cand") / "hostile.py"
    cand.write_text(f"def draft_topk(logits, k):\n    raise RuntimeError({HOSTILE!r})\n")
    return report_rows(["softmax_topk", "hardcoded_one", "identity_top1", f"{cand}:draft_topk"],
                       ["float32", "bfloat16"], ["gaussian", "poison_mix", "ties_max"], vocab=4097,
                       batch=4, device="cpu", argv=["equiv", "report", "--format", "html"])


@pytest.fixture(scope="module")
def page(small_report):
    return render(small_report, "html")


def _images(page):
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)]


def test_rows_and_verdicts(small_report):
    rows = {(r.path, r.dtype, r.family): r for r in small_report.rows}
    assert rows[("identity_top1", "float32", "gaussian")].passed
    assert not rows[("hardcoded_one", "float32", "gaussian")].passed
    assert rows[("hardcoded_one", "float32", "poison_mix")].poisoning_violations > 0
    assert not small_report.passed                # the candidate is required; hardcoded_one is not
    assert 0 < small_report.tightest_rtol["float32"] < 2 ** -13


def test_summary_is_one_line_per_path_and_dtype(small_report):
    summary = {(s.path, s.dtype): s for s in small_report.summary}
    assert len(summary) == 8
    ok, one = summary[("identity_top1", "bfloat16")], summary[("hardcoded_one", "float32")]
    assert ok.verdict == "pass" and 0 < ok.worst_rel_err <= ok.rel_err_allowed
    assert one.verdict == "fail (not required)" and one.failed_cases == 3
    assert one.worst_rel_err > one.rel_err_allowed and "poisoning" in one.failed_checks
    hostile = next(s for s in small_report.summary if s.path.endswith(":draft_topk"))
    assert hostile.verdict == "FAIL" and hostile.worst_rel_err is None   # nothing was measured


def test_summary_comes_first_in_every_format(small_report, page):
    assert render(small_report, "markdown").startswith("| path | dtype | verdict | failed |")
    assert render(small_report, "table").startswith("path")
    assert render(small_report, "table").splitlines()[0].split()[:3] == ["path", "dtype", "verdict"]
    data = json.loads(render(small_report, "json"))
    assert len(data["summary"]) == 8 and data["summary"][0]["verdict"] == "pass"
    order = [page.index(s) for s in ('class="summary"', 'id="errors"', 'id="failures"', 'class="detail"')]
    assert order == sorted(order) and page.index("<table") == order[0] - len("<table ")


def test_provenance_in_every_format(small_report, page):
    data = json.loads(render(small_report, "json"))["provenance"]
    assert data["equiv_version"] == equiv.__version__ and data["command"] == "equiv report --format html"
    assert set(data["libraries"]) == {"torch", "triton", "numpy"} and data["libraries"]["torch"]
    assert data["device"] == "cpu" and data["device_name"] and data["date"].endswith("+00:00")
    for fmt in ("table", "markdown"):
        text = render(small_report, fmt)
        assert f"equiv: {equiv.__version__}" in text and "command: equiv report --format html" in text
    assert '<dl class="provenance">' in page and "<dd>cpu (" in page and "torch " in page


def test_provenance_never_fails_without_git(tmp_path, monkeypatch):
    from equiv import provenance

    assert provenance.git_commit(str(tmp_path / "equiv")) == (None, None)     # not a checkout
    monkeypatch.setenv("PATH", str(tmp_path))                               # no git at all
    assert provenance.git_commit() == (None, None)
    p = provenance.collect("cpu", argv=["/opt/venv/bin/equiv", "report", "--out", "my report.html"])
    assert p.git_commit is None and p.lines()[0] == f"equiv: {equiv.__version__}, not run from a git checkout"
    assert p.command == "equiv report --out 'my report.html'"              # no install path


def test_git_commit_is_equivs_own_checkout_only(tmp_path):
    from equiv.provenance import git_commit

    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True)
    try:
        git("init", "-q")
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is not installed")
    (tmp_path / "equiv").mkdir()
    (tmp_path / "site" / "equiv").mkdir(parents=True)
    (tmp_path / "equiv" / "a.py").write_text("x = 1\n")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    commit, modified = git_commit(str(tmp_path / "equiv"))
    assert re.fullmatch(r"[0-9a-f]{40}", commit) and modified is False
    (tmp_path / "equiv" / "a.py").write_text("x = 2\n")
    assert git_commit(str(tmp_path / "equiv"))[1] is True
    # a wheel installed inside a user's repository must not report the user's commit
    assert git_commit(str(tmp_path / "site" / "equiv")) == (None, None)


def test_one_histogram_per_dtype_with_rtol(small_report, page):
    from equiv.ops.draft_topk.tolerance import TOLERANCES

    section = page[page.index('id="errors"'):page.index('id="failures"')]
    assert len(_images(section)) == 2
    assert 'alt="relative error per row, float32 input"' in section
    assert 'alt="relative error per row, bfloat16 input"' in section
    for dtype in ("float32", "bfloat16"):
        fig = error_figure(small_report, dtype)
        ax = fig.axes[0]
        vertical = [ln.get_xdata()[0] for ln in ax.lines if len(set(ln.get_xdata())) == 1]
        assert vertical == [TOLERANCES[dtype].rtol] and dtype in ax.get_title()
        assert ax.get_xlim()[0] < TOLERANCES[dtype].rtol < ax.get_xlim()[1]
        figure_png(fig)


def test_hostile_text_is_escaped(page):
    assert "<script" not in page and "onerror=alert(1)>" not in page
    assert "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;" in page
    assert page.count("<table") == page.count("</table>")


def test_a_cut_list_says_how_many_it_left_out(small_report):
    failing = [r for r in small_report.rows if not r.passed][0]
    rows = tuple(replace(failing, family=f"case{i}") for i in range(LIST_LIMIT + 16))
    page = render(Report(rows, 4097, 4, 0, "cpu", 1), "html")
    section = page[page.index('id="failures"'):page.index('id="detail"')]
    assert section.count("REPRO:") == LIST_LIMIT and "+16 more failing cases" in section
    assert page.count("case35") == 1                                        # the detail keeps all
    short = render(Report(rows[:LIST_LIMIT], 4097, 4, 0, "cpu", 1), "html")
    assert "more failing cases" not in short and "not recorded" in short    # no provenance given


def test_images_fit_a_1400px_page(page, small_report):
    from equiv.mtp.report import acceptance_png, html_section
    from equiv.figures import pyplot

    paths = ["softmax_topk", "hardcoded_one", "identity_top1", "fused_triton"]
    mtp = [{"path": p, "consumer": c, "histogram": [1, 2, 3, 10], "accept_length": 3.1}
           for p in paths for c in ("greedy", "target_only", "confidence", "tree")]
    full = render(small_report, "html", html_section(mtp))
    widths = [png_size(img)[0] for img in _images(full)]
    assert len(widths) == 3 and max(widths) <= PAGE_WIDTH_PX and "MTP acceptance" in full
    width, height = png_size(acceptance_png(mtp, "a title"))
    assert width <= PAGE_WIDTH_PX and height > width / 2            # 2 x 2 panels, not 4 shrunk in a row
    fig, ax = pyplot().subplots(figsize=(30, 3))                           # 3300 px at 110 dpi
    ax.set_title("x" * 400)
    assert png_size(figure_png(fig))[0] <= PAGE_WIDTH_PX


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
    data = json.loads((tmp_path / "r.json").read_text())
    assert ok.returncode == 0 and data["rows"] and data["provenance"]["command"].startswith("equiv report")
    bad = run("--vocab", "1025", "--batch", "2", "--families", "gaussian", "--device", "cpu",
              "--paths", f"{TESTS}/candidates/misbehaving.py:raises")
    assert bad.returncode == 1 and "FAIL contract" in bad.stdout
    for args, needle in ((("--vocab", "0"), "vocab=0 is invalid"), (("--families", "gauss"), "did you mean"),
                         (("--mtp-json", str(tmp_path / "none.json")), "is not an `equiv mtp --json` file")):
        out = run(*args)
        assert out.returncode == 2 and needle in out.stderr, out.stderr
