"""JUnit XML for a gate result, in the shape CI systems (GitLab, Jenkins, GitHub reporters) show.

One ``<testsuite>`` per gate run, one ``<testcase>`` per check, classname ``equiv.gate.STAGE``; a
failed check carries a ``<failure>`` whose message is the check's detail and whose body holds
the counterexample and the ``REPRO:`` line. A result NOT JUDGED (the machine or the harness
failed, ``GateResult.not_judged``) is an error, not a failure: one ``equiv.gate.not_judged`` test
case with an ``<error>`` saying why, and each failed check an ``<error>`` too, ``type="NotJudged"``
(CI tells "re-run" from "fix the code"). The standard library's ElementTree writes the XML
(escaping ``<``, ``&`` and quotes); what no XML 1.0 document may hold even escaped -- control
characters, lone surrogates, from a candidate's own exception message -- is cleaned first by
``equiv.sanitize``, so the file stays well-formed whatever the candidate raised.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET

from equiv._version import __version__
from equiv.sanitize import clean_text


def junit_xml(result) -> str:
    def element(parent, tag, **attrs):
        attrs = {k: clean_text(v) for k, v in attrs.items()}
        return ET.Element(tag, attrs) if parent is None else ET.SubElement(parent, tag, attrs)

    not_judged = tuple(getattr(result, "not_judged", ()))
    failures = sum(not c.passed for c in result.checks)
    errors = failures + 1 if not_judged else 0
    failures = 0 if not_judged else failures
    suite = element(None, "testsuite", name=f"equiv gate {result.candidate}",
                    tests=str(len(result.checks) + bool(not_judged)), failures=str(failures), errors=str(errors),
                    skipped="0", time=f"{result.duration_s:.3f}")
    props = element(suite, "properties")
    element(props, "property", name="equiv_version", value=__version__)
    for key in ("candidate", "k", "device", "budget", "seed"):
        element(props, "property", name=key, value=str(getattr(result, key)))
    if not_judged:
        case = element(suite, "testcase", classname="equiv.gate.not_judged", name="not judged", time="0.000")
        element(case, "error", message=not_judged[0][:1000], type="NotJudged").text = clean_text("\n".join(not_judged))
    for c in result.checks:
        case = element(suite, "testcase", classname=f"equiv.gate.{c.stage}", name=c.subject or c.name,
                       time=f"{c.duration_s:.3f}")
        if not c.passed:
            fail = element(case, "error" if not_judged else "failure", message=c.detail[:1000],
                           type="NotJudged" if not_judged else "EquivalenceFailure")
            fail.text = clean_text("\n".join(x for x in (c.detail, c.counterexample, c.repro) if x))
    diagnosis = getattr(result, "diagnosis", None)
    if diagnosis is not None:                    # one test case per defect, beside the checks
        for name, message, body in diagnosis.junit_cases():
            case = element(suite, "testcase", classname="equiv.gate.defect", name=name, time="0.000")
            element(case, "failure", message=message, type="Defect").text = clean_text(body)
        suite.set("tests", str(len(result.checks) + len(diagnosis.defects)))
        suite.set("failures", str(failures + len(diagnosis.defects)))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
