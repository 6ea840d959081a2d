"""pytest plugin (entry point ``pytest11``): options that point the property suite at a candidate.

Installed, this module is loaded into every pytest run of the environment, so it is **inert**
unless the run is an equiv run: equiv's own suite is collected (its conftest calls
``activate``) or an ``--equiv-*`` option is given. In any other run it only adds its options:
it registers no profile, loads none, adds no marker, skips nothing and reads no environment
variable (a host project's ``HYPOTHESIS_PROFILE``, its ``ci`` profile and its ``gpu`` marker are
its own).

Options (defaults are ``None`` so that "given" can be told from "left alone"):
- ``--equiv-candidate SPEC``: judge this candidate (built-in name, pkg.mod:fn, file.py:fn)
  instead of the built-in paths; the known-failure ledger does not apply to it.
- ``--equiv-device cpu|cuda|auto``: where inputs are built and the candidate runs (auto).
- ``--equiv-dtype D[,D...]``: input dtypes the candidate is judged at (float32,bfloat16,float16).
- ``--equiv-k K[,K...]``: the k values the candidate is judged at (default 1); nothing calls it
  at another k.
- ``--equiv-timeout SEC``: per-call time-out of a candidate in its worker (default 60; inf: none).
- ``--equiv-max-gpu-memory BYTES``: the device memory a call may take (``8GiB`` by default,
  ``512MiB``, plain bytes; ``equiv.memory``): larger inputs go in more calls of fewer rows.
- ``--equiv-budget quick|full``: ``quick`` runs a few examples per property (the pre-merge gate),
  ``full`` (default) the example counts of the Hypothesis profile.
- ``--equiv-require batch-invariant``: also require what is otherwise only reported (the GPU
  property ``batch_invariance`` then requires bitwise-equal answers in every batch).
- ``--equiv-report-json FILE``: write one record per test (nodeid, property, outcome, duration,
  message, counterexample, repro, examples) to FILE when the session ends. A test during which
  the machine or the harness failed (``equiv.run.faults``: out of memory, a device busy or lost,
  a harness time-out) has the outcome ``not judged`` and its lines under ``not_judged``; the
  document's ``not_judged`` lists every such line of the run (the gate's verdict is then NOT
  JUDGED). Without pytest-xdist: a worker's notes stay in its process.
In an equiv run, the Hypothesis profiles ``equiv-dev``, ``equiv-ci`` and ``equiv-nightly`` are
registered; ``HYPOTHESIS_PROFILE`` picks one (default ``equiv-dev``), but a profile the host
already loaded (or ``--hypothesis-profile``) is never replaced; equiv's properties still run
under their own deadline and example counts (``equiv.pytest.profiles.suite_settings``). Tests marked ``equiv_gpu`` are
skipped without a CUDA device. Bad option values stop the run with one line naming the value and
the fix. torch is imported only when an option needs it.

The plugin is registered by the entry point as ``equiv``; ``-p equiv.pytest.plugin`` (what the gate
passes, and what works with ``PYTEST_DISABLE_PLUGIN_AUTOLOAD``) registers the same module under
another name, so the first hook that sees the plugin manager blocks the entry point's name.
"""
from __future__ import annotations

import os
import sys

import pytest

from equiv.atomic import check_outputs, write_json
from equiv.errors import UsageError
from equiv.memory import PEAKS_ENV, DEFAULT_MAX_GPU_MEMORY, ask_worker, memory_text, use_budget, write_suite_peaks
from equiv.ops import all_options, get_op, op_names
from equiv.options import BUDGETS, DEFAULTS as _D, DEVICES, RunOptions
from equiv.run import faults
from equiv.run.supervisor import close_all, load_check, runner_for   # no NumPy: ~9 ms on the busy 2-core CPU
from equiv.timeline import mark
from equiv.validation import check_choices

REQUIREMENTS = ("batch-invariant",)
GPU_MARKER = "equiv_gpu"
# The values an option means when it is not given (its parser default is None).
DEFAULTS = {"equiv_candidate": None, "equiv_device": _D["device"], "equiv_dtype": None, "equiv_k": _D["k"],
            "equiv_budget": _D["budget_suite"], "equiv_report_json": None, "equiv_timeout": None,
            "equiv_require": None, "equiv_op": _D["op"], "equiv_max_gpu_memory": memory_text(DEFAULT_MAX_GPU_MEMORY),
            **{f"equiv_{name}": None for name in all_options()}}
_ACTIVE = pytest.StashKey()
_REPORT_KEY = pytest.StashKey()
_LOAD_KEY = pytest.StashKey()
OPTIONS_KEY = pytest.StashKey()
_GATE_SESSION = pytest.StashKey()


def pytest_addoption(parser, pluginmanager):
    own_name = pluginmanager.get_name(sys.modules[__name__])
    if own_name not in (None, "equiv"):          # loaded by -p equiv.pytest.plugin: skip the entry point
        pluginmanager.set_blocked("equiv")
    group = parser.getgroup("equiv", "equiv: numerical-equivalence property suite")
    group.addoption("--equiv-candidate", default=None, metavar="SPEC",
                    help="candidate to judge: built-in path, package.module:function or file.py:function")
    group.addoption("--equiv-device", default=None, choices=DEVICES,
                    help="device for inputs and candidate (default auto: cuda when present)")
    group.addoption("--equiv-dtype", default=None, metavar="DTYPES",
                    help="comma-separated input dtypes to judge at (default: every dtype)")
    group.addoption("--equiv-k", default=None, metavar="K[,K...]",
                    help="the k values the candidate is judged at (default 1); nothing calls it at another k")
    group.addoption("--equiv-timeout", default=None, metavar="SEC",
                    help="per-call time-out of a candidate in its worker, in seconds (default 60; inf: none)")
    group.addoption("--equiv-max-gpu-memory", default=None, metavar="BYTES",
                    help="device memory one call may take, e.g. 8GiB, 512MiB or bytes (default 8GiB): "
                         "larger inputs are sent in more calls of fewer rows")
    group.addoption("--equiv-budget", default=None, choices=BUDGETS,
                    help="quick: a few examples per property (pre-merge gate); full (default): the profile's counts")
    group.addoption("--equiv-require", default=None, metavar="WHAT",
                    help="comma-separated extra requirements: batch-invariant (bitwise equal in every batch)")
    group.addoption("--equiv-op", default=None, choices=op_names(),
                    help="the operation judged: " + "; ".join(f"{n}: {get_op(n).signature}" for n in op_names())
                         + f" (default {_D['op']})")
    for name, o in all_options().items():        # each op's own options (Op.options)
        owners = "/".join(n for n in op_names() if o in get_op(n).options)
        group.addoption(f"--equiv-{name}", default=None, choices=o.choices,
                        help=f"{owners}: {o.help} (default {o.default})")
    group.addoption("--equiv-report-json", default=None, metavar="FILE",
                    help="write one JSON record per test (outcome, counterexample, repro) to FILE")


def option(config, name: str):
    """An equiv option's value, its documented default when it was not given."""
    value = config.getoption(name, None)
    return DEFAULTS.get(name) if value is None else value


def options_given(config) -> list[str]:
    """The ``--equiv-*`` options of this run that were given (of this plugin and the sweep's)."""
    return sorted(name for name, value in vars(config.option).items()
                  if name.startswith("equiv_") and value is not None)


def is_equiv_run(config) -> bool:
    """An ``--equiv-*`` option was given, or one of equiv's suites (a conftest that sets
    ``EQUIV_SUITE = True``) is loaded or has called ``activate``."""
    if config.stash.get(_ACTIVE, False) or options_given(config):
        return True
    return any(getattr(p, "EQUIV_SUITE", False) for p in config.pluginmanager.get_plugins())


def _validate(config) -> None:
    """The equiv options read once (``equiv.options.RunOptions``: every value checked, the spec
    parsed); the candidate's worker starts loading it while pytest collects."""
    try:
        opts = config.stash[OPTIONS_KEY] = RunOptions.from_pytest(config)
        use_budget(opts.max_gpu_memory)
        required = option(config, "equiv_require")
        if required is not None:
            check_choices("--equiv-require", required, REQUIREMENTS)
        path = option(config, "equiv_report_json")
        if path:
            check_outputs({"--equiv-report-json": path})
        if opts.spec is not None:                # imported in its worker: a usage error here
            # the worker loads while pytest collects; pytest_collection_finish reads its answer
            load = (opts.spec, opts.device, opts.timeout)
            load_check(*load, wait=False)
            config.stash[_LOAD_KEY] = load
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def run_options(config):
    """This run's ``RunOptions`` (read by ``_validate`` when the run became an equiv run)."""
    if OPTIONS_KEY not in config.stash:
        _validate(config)
    return config.stash[OPTIONS_KEY]


def pytest_collection_finish(session):
    """The candidate's import, started by ``_validate``: one that raises is a usage error (an
    exit or a hang is the first call's failed outcome, as before)."""
    mark("pytest collected")
    load = session.config.stash.get(_LOAD_KEY, None)
    if load is None:
        return
    try:
        load_check(*load)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None


def activate(config) -> None:
    """Make this run an equiv run (idempotent): profiles, marker, option checks, JSON report.

    Called by this plugin when an ``--equiv-*`` option is given, and by the conftest of equiv's
    own suites when they are collected."""
    if config.stash.get(_ACTIVE, False):
        return
    config.stash[_ACTIVE] = True
    config.addinivalue_line("markers", f"{GPU_MARKER}: needs a CUDA device; skipped when none is present")
    config.addinivalue_line("markers", f"equiv_op(name): a property of that operation (default {_D['op']})")
    profile_name = _no_profile
    try:
        # hypothesis: 0.12 s to import (-X importtime); a host project's pytest run need not pay it
        from equiv.pytest.profiles import load_profile, profile_name

        load_profile(config)
    except ImportError:                          # hypothesis missing: property tests will say so
        pass
    _validate(config)
    path = option(config, "equiv_report_json")
    if path:
        config.stash[_REPORT_KEY] = JsonReport(config, path, profile_name)
        config.pluginmanager.register(config.stash[_REPORT_KEY], "equiv-report-json")


@pytest.hookimpl(tryfirst=True)                  # before Hypothesis loads --hypothesis-profile
def pytest_configure(config):
    mark("pytest configured")
    if options_given(config):
        activate(config)


def pytest_sessionfinish(session):
    """In a gate's suite process (``equiv.memory.PEAKS_ENV`` set): its peak memory and its
    worker's, for the gate's JSON; nothing otherwise."""
    mark("pytest tests done")
    if not os.environ.get(PEAKS_ENV) or OPTIONS_KEY not in session.config.stash:
        return
    opts = session.config.stash[OPTIONS_KEY]
    isolated = opts.spec is not None and not opts.spec.trusted
    runner = runner_for(opts.spec, device=opts.device, timeout=opts.timeout) if isolated else None
    write_suite_peaks(ask_worker(runner))
    session.config.stash[_GATE_SESSION] = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """A gate's suite process (``pytest_sessionfinish`` above) leaves as soon as pytest is done
    with it: its report and peaks are written, its summary printed; its candidate's workers are
    closed, the streams flushed, and it exits with pytest's status without the interpreter's
    teardown (torch's, the CUDA context's: ~0.8 s of the suite's wall time on the 2-core CPU, on
    the gate's critical path)."""
    session = config.stash.get(_GATE_SESSION, None)
    if session is None:
        return
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.stop_global_capturing()
    close_all()
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    mark("pytest leaves")
    os._exit(int(session.exitstatus))


def pytest_collection_modifyitems(config, items):
    if not is_equiv_run(config):
        return
    try:
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    for item in items:
        if item.get_closest_marker(GPU_MARKER) is not None:
            item.add_marker(skip)


def _outcome(report) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def _first_lines(text: str, n: int = 6) -> str:
    return "\n".join(str(text).strip().splitlines()[:n])


def _no_profile() -> None:
    return None                                  # Hypothesis is not installed


class JsonReport:
    """Collects one record per test from its reports (works under xdist: only reports are used).

    The property suite adds ``equiv_*`` user properties (property name, counterexample, repro,
    example counts); other tests get what their reports say."""

    def __init__(self, config, path, profile_name=None):
        self.config = config
        self.path = path
        self.profile_name = profile_name or _no_profile   # the Hypothesis profile loaded at the end
        self.records: dict = {}
        self.marks: dict = {}                    # nodeid -> faults.mark() at its setup

    def pytest_runtest_logreport(self, report):
        rec = self.records.setdefault(report.nodeid, {
            "nodeid": report.nodeid, "property": None, "outcome": "passed", "duration": 0.0,
            "message": None, "counterexample": None, "repro": None, "examples": None,
            "first_failure": None})
        rec["duration"] = round(rec["duration"] + float(report.duration or 0.0), 4)
        if report.when == "setup":
            self.marks[report.nodeid] = faults.mark()
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
        lines = faults.since(self.marks.get(report.nodeid, faults.mark()))
        if lines and report.when == "call" and report.failed:   # the machine's failure, not the candidate's
            rec["outcome"], rec["not_judged"] = "not judged", lines

    def pytest_sessionfinish(self, session, exitstatus):
        tests = list(self.records.values())
        counts: dict = {}
        for t in tests:
            counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
        options = {name: option(self.config, f"equiv_{name}")
                   for name in ("op", "candidate", "device", "dtype", "k", "budget")}
        doc = {"exitstatus": int(exitstatus), "profile": self.profile_name(),
               "options": options, "counts": counts, "tests": tests, "not_judged": faults.since(0)}
        write_json(self.path, doc)
