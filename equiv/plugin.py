"""pytest plugin (entry point ``pytest11``): options that point the property suite at a candidate.

- ``--equiv-candidate SPEC``: judge this candidate (built-in name, pkg.mod:fn, file.py:fn)
  instead of the built-in paths; the known-failure ledger does not apply to it.
- ``--equiv-device cpu|cuda|auto``: where inputs are built and the candidate runs (auto).
- ``--equiv-dtype D[,D...]``: input dtypes the candidate is judged at (float32,bfloat16,float16).
- ``--equiv-k K``: the k the candidate is judged at (default 1).
- ``--equiv-budget quick|full``: ``quick`` runs a few examples per property (the pre-merge gate),
  ``full`` (default) the example counts of the Hypothesis profile.
- ``--equiv-op draft_topk|verify``: which operation's properties run (default draft_topk); with
  ``verify`` the candidate is a verifier ``fn(draft_token_ids, draft_probs, target_probs,
  generator)`` and only the verify properties (properties/test_verify.py) are collected.
- ``--equiv-report-json FILE``: write one record per test (nodeid, property, outcome, duration,
  message, counterexample, repro, examples) to FILE when the session ends.
Hypothesis profiles ``dev``, ``ci`` and ``nightly`` are registered here and picked by the
``HYPOTHESIS_PROFILE`` environment variable (default ``dev``; ``--hypothesis-profile`` wins).
Bad option values stop the run with one line naming the value and the fix. torch is imported
only when an option needs it (a candidate to load, a device to resolve).

The plugin is registered by the entry point as ``equiv``; ``-p equiv.plugin`` (what the gate
passes, and what works with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) registers the same module under
another name, so the first hook that sees the plugin manager blocks the entry point's name.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

BUDGETS = ("quick", "full")
PROFILES = ("dev", "ci", "nightly")
_REPORT_KEY = pytest.StashKey()


def pytest_addoption(parser, pluginmanager):
    own_name = pluginmanager.get_name(sys.modules[__name__])
    if own_name not in (None, "equiv"):          # loaded by -p equiv.plugin: skip the entry point
        pluginmanager.set_blocked("equiv")
    group = parser.getgroup("equiv", "equiv: numerical-equivalence property suite")
    group.addoption("--equiv-candidate", default=None, metavar="SPEC",
                    help="candidate to judge: built-in path, package.module:function or file.py:function")
    group.addoption("--equiv-device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="device for inputs and candidate (default auto: cuda when present)")
    group.addoption("--equiv-dtype", default=None, metavar="DTYPES",
                    help="comma-separated input dtypes to judge at (default: every dtype)")
    group.addoption("--equiv-k", default=1, type=int, metavar="K",
                    help="the k the candidate is judged at (default 1)")
    group.addoption("--equiv-budget", default="full", choices=BUDGETS,
                    help="quick: a few examples per property (pre-merge gate); full: the profile's counts")
    group.addoption("--equiv-op", default="draft_topk", choices=("draft_topk", "verify"),
                    help="the operation judged: draft_topk (default) or verify (a rejection sampler)")
    group.addoption("--equiv-report-json", default=None, metavar="FILE",
                    help="write one JSON record per test (outcome, counterexample, repro) to FILE")


def register_profiles() -> None:
    from hypothesis import HealthCheck, Phase, settings

    slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
    # No explain phase: it traces coverage while re-running the failing example with parts
    # varied, which multiplies the cost of a failure at V = 129280 (15 s instead of 3 s) for a
    # note the REPRO line already makes unnecessary. --hypothesis-explain turns it back on.
    phases = [p for p in Phase if p is not Phase.explain]
    common = dict(deadline=None, suppress_health_check=slow_ok, phases=phases)
    settings.register_profile("dev", max_examples=30, **common)
    settings.register_profile("ci", max_examples=30, derandomize=True, database=None, print_blob=True,
                              **common)
    settings.register_profile("nightly", max_examples=10_000, print_blob=True, **common)


def _usage(message: str):
    return pytest.UsageError(message)


def _validate(config) -> None:
    """Cheap checks of the equiv options; the candidate is loaded only when one is given."""
    from equiv.errors import UsageError
    from equiv.validation import check_choices

    k = config.getoption("equiv_k")
    if k < 1:
        raise _usage(f"--equiv-k={k} is invalid: k must be an integer >= 1")
    dtypes = config.getoption("equiv_dtype")
    try:
        if dtypes is not None:
            check_choices("--equiv-dtype", dtypes, ("float32", "bfloat16", "float16"))
        spec = config.getoption("equiv_candidate")
        if spec and config.getoption("equiv_op") == "verify":
            from equiv.ops.verify.paths import load_verifier

            load_verifier(spec)
        elif spec:
            from equiv.candidate import load_candidate

            load_candidate(spec)
        if config.getoption("equiv_device") == "cuda":
            from equiv.devices import resolve_device

            resolve_device("cuda")
    except UsageError as exc:
        raise _usage(str(exc)) from None


@pytest.hookimpl(tryfirst=True)                  # before Hypothesis loads --hypothesis-profile
def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped when none is present")
    config.addinivalue_line("markers", "equiv_op(name): a property of that operation (default draft_topk)")
    try:
        register_profiles()
    except ImportError:                          # hypothesis missing: property tests will say so
        return
    from hypothesis import settings

    profile = os.environ.get("HYPOTHESIS_PROFILE", "dev")
    if profile not in PROFILES:
        raise _usage(f"HYPOTHESIS_PROFILE={profile!r} is unknown: choose from {', '.join(PROFILES)}")
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(profile)
    _validate(config)
    path = config.getoption("equiv_report_json")
    if path:
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise _usage(f"--equiv-report-json={path!r}: folder {folder!r} does not exist; create it first")
        config.stash[_REPORT_KEY] = JsonReport(config, path)
        config.pluginmanager.register(config.stash[_REPORT_KEY], "equiv-report-json")


def pytest_collection_modifyitems(config, items):
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def _outcome(report) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def _first_lines(text: str, n: int = 6) -> str:
    return "\n".join(str(text).strip().splitlines()[:n])


class JsonReport:
    """Collects one record per test from its reports (works under xdist: only reports are used).

    The property suite adds ``equiv_*`` user properties (property name, counterexample, repro,
    example counts); other tests get what their reports say."""

    def __init__(self, config, path):
        self.config = config
        self.path = path
        self.records: dict = {}

    def pytest_runtest_logreport(self, report):
        rec = self.records.setdefault(report.nodeid, {
            "nodeid": report.nodeid, "property": None, "outcome": "passed", "duration": 0.0,
            "message": None, "counterexample": None, "repro": None, "examples": None,
            "first_failure": None})
        rec["duration"] = round(rec["duration"] + float(report.duration or 0.0), 4)
        for key, value in report.user_properties:
            if key.startswith("equiv_"):
                rec[key[len("equiv_"):]] = value
        outcome = _outcome(report)
        if report.when == "call" or outcome in ("error", "skipped") or hasattr(report, "wasxfail"):
            if rec["outcome"] in ("passed", "skipped") or outcome != "passed":
                rec["outcome"] = outcome
        if (report.failed or report.skipped) and rec["message"] is None and report.longrepr is not None:
            crash = getattr(report.longrepr, "reprcrash", None)
            if report.skipped and isinstance(report.longrepr, tuple):
                rec["message"] = str(report.longrepr[2])
            elif crash is not None:
                rec["message"] = _first_lines(crash.message)
            else:
                rec["message"] = _first_lines(str(report.longrepr))
        if hasattr(report, "wasxfail") and report.wasxfail:
            rec["xfail_reason"] = report.wasxfail

    def pytest_sessionfinish(self, session, exitstatus):
        from equiv.atomic import atomic_write

        tests = list(self.records.values())
        counts: dict = {}
        for t in tests:
            counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        options = {name: self.config.getoption(f"equiv_{name}")
                   for name in ("op", "candidate", "device", "dtype", "k", "budget")}
        doc = {"exitstatus": int(exitstatus), "profile": os.environ.get("HYPOTHESIS_PROFILE", "dev"),
               "options": options, "counts": counts, "tests": tests}
        atomic_write(self.path, json.dumps(doc, indent=2, default=str) + "\n")
