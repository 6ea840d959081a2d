"""The diagnosis inside ``gate``, ``check`` and ``report``: defects first, beside the checks.

Plan: the gate's tolerance stage alone (seconds on the CPU) on the split-vocabulary argmax, whose
recipes (padded rows among them, and ``poison_mix`` with an all -inf row) show its three defects;
the console leads with the defects, the JSON carries ``defects`` beside ``checks``, the JUnit file
one test case per defect; a passing candidate has ``defects: []`` and costs no call. ``equiv
check`` and ``equiv report`` print the same block. The diagnosis's deadline is raised here so that
a loaded test machine does not cut it short.
"""
import json
import xml.etree.ElementTree as ET

import pytest

from equiv.cli import main
from equiv.gate import run_gate


@pytest.fixture(autouse=True)
def unhurried(monkeypatch):
    from equiv.ops.draft_topk.diagnose import attach

    monkeypatch.setattr(attach, "MIN_S", 60.0)


def test_gate_names_the_defects_beside_its_checks():
    result = run_gate("equiv.ops.draft_topk.mutants:split_vocab_argmax", device="cpu", stages=("tolerance",), vocab=4097)
    kinds = sorted(d.kind for d in result.diagnosis.defects)
    assert kinds == ["non_contiguous", "out_of_vocabulary_index", "placeholder_probability"], result.summary()
    text = result.summary()
    assert text.splitlines()[1].startswith("3 defects") and text.index("defects") < text.index("tolerance")
    doc = result.to_json()
    assert [d["kind"] for d in doc["defects"]] == [d.kind for d in result.diagnosis.defects]
    assert doc["checks"] and doc["diagnosis"]["calls"] > 0 and "duration_s" in doc
    cases = ET.fromstring(result.to_junit()).findall("testcase")
    defect_cases = [c for c in cases if c.get("classname") == "equiv.gate.defect"]
    assert len(defect_cases) == 3 and all(c.find("failure") is not None for c in defect_cases)
    oov = next(d for d in result.diagnosis.defects if d.kind == "out_of_vocabulary_index")
    assert any(c.startswith("tolerance:poison_mix") for c in oov.checks) and "returned index" in oov.evidence


def test_a_passing_gate_pays_nothing():
    result = run_gate("softmax_topk", device="cpu", stages=("tolerance",), vocab=1025, dtypes=("float32",))
    assert result.passed and result.diagnosis.defects == () and result.diagnosis.calls == 0
    assert result.to_json()["defects"] == []
    assert "defect" not in result.summary()


def test_check_prints_the_defect_first(capsys):
    rc = main(["check", "--candidate", "equiv.ops.draft_topk.mutants:contiguous_stride_assumed", "--device", "cpu",
               "--recipe", "gaussian:seed=5,batch=2,vocab=2,dtype=float32,pad=1"])
    out = capsys.readouterr().out
    assert rc == 1 and out.startswith("1 defect") and "non_contiguous" in out
    rc = main(["check", "--candidate", "equiv.ops.draft_topk.mutants:contiguous_stride_assumed", "--device", "cpu", "--json",
               "--recipe", "gaussian:seed=5,batch=2,vocab=2,dtype=float32,pad=1"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and [d["kind"] for d in doc["defects"]] == ["non_contiguous"] and doc["checks"]


def test_report_diagnoses_each_failing_path():
    from equiv.ops.draft_topk.diagnose.attach import for_report, with_defects
    from equiv.ops.draft_topk.report import render
    from equiv.ops.draft_topk.report.rows import report_rows

    report = report_rows(["hardcoded_one", "softmax_topk"], ["float32"], ["gaussian", "poison_mix"], vocab=1000,
                         batch=6, seed=0, k=1, device="cpu")
    diagnoses = for_report(report, timeout=None, elapsed_s=1.0)
    assert list(diagnoses) == ["hardcoded_one"]
    doc = json.loads(with_defects(render(report, "json"), "json", diagnoses))
    assert [d["kind"] for d in doc["defects"]["hardcoded_one"]] == ["placeholder_probability"]
    table = with_defects(render(report, "table"), "table", diagnoses)
    assert table.startswith("hardcoded_one: 1 defect")
