"""JUnit XML for a gate result, in the shape CI systems (GitLab, Jenkins, GitHub reporters) show.

One ``<testsuite>`` per gate run, one ``<testcase>`` per check, classname ``equiv.gate.STAGE``; a
failed check carries a ``<failure>`` whose message is the check's detail and whose body holds
the counterexample and the ``REPRO:`` line.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET


def junit_xml(result) -> str:
    failures = sum(not c.passed for c in result.checks)
    suite = ET.Element("testsuite", name=f"equiv gate {result.candidate}", tests=str(len(result.checks)),
                       failures=str(failures), errors="0", skipped="0", time=f"{result.duration_s:.3f}")
    props = ET.SubElement(suite, "properties")
    for key in ("candidate", "k", "device", "budget", "seed"):
        ET.SubElement(props, "property", name=key, value=str(getattr(result, key)))
    for c in result.checks:
        stage, _, rest = c.name.partition(":")
        case = ET.SubElement(suite, "testcase", classname=f"equiv.gate.{stage}", name=rest or stage,
                             time=f"{c.duration_s:.3f}")
        if not c.passed:
            fail = ET.SubElement(case, "failure", message=c.detail[:1000], type="EquivalenceFailure")
            fail.text = "\n".join(x for x in (c.detail, c.counterexample, c.repro) if x)
    diagnosis = getattr(result, "diagnosis", None)
    if diagnosis is not None:                    # one test case per defect, beside the checks
        from equiv.diagnose.render import junit_cases

        for name, message, body in junit_cases(diagnosis):
            case = ET.SubElement(suite, "testcase", classname="equiv.gate.defect", name=name, time="0.000")
            ET.SubElement(case, "failure", message=message, type="Defect").text = body
        suite.set("tests", str(len(result.checks) + len(diagnosis.defects)))
        suite.set("failures", str(failures + len(diagnosis.defects)))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
