"""How the gate runs the property suite in a subprocess, and how to run it again by hand.

Plan
----
- Where: the caller's working folder, with the caller's environment, so that a candidate given
  as ``kernel.py:fn`` or ``kernel:fn`` (``PYTHONPATH=.``) resolves as it did for the caller. File
  specs are made absolute first, and so are relative ``PYTHONPATH`` entries, so nothing depends
  on the folder after all.
- Shielded from the project it runs in: ``-c`` names the ini shipped beside the suite
  (``equiv/properties/pytest.ini``) and ``--rootdir`` the suite's folder, so no
  ``pytest.ini``/``pyproject.toml`` of the caller's is read; ``--noconftest`` keeps the caller's
  ``conftest.py`` out (pytest reads the one in the invocation folder even past ``--confcutdir``)
  and ``-p equiv.properties.conftest`` loads the suite's own as a plugin;
  ``PYTEST_DISABLE_PLUGIN_AUTOLOAD=1`` with ``-p hypothesispytest -p equiv.pytest.plugin`` loads exactly
  the plugins the suite needs; ``PYTEST_ADDOPTS``/``PYTEST_PLUGINS`` are dropped;
  ``-p no:cacheprovider`` and ``HYPOTHESIS_STORAGE_DIRECTORY`` (``hypothesis_storage``: a folder
  of equiv's disk cache for a quick suite, a temporary one otherwise) leave no
  ``.pytest_cache`` or ``.hypothesis`` behind in the caller's folder.
- The suite is named ``--pyargs equiv.properties``: the installed package, or the checkout.
- The child runs in its own process group; a time-out or an interrupt of the caller kills the
  whole group (a candidate's own worker processes included) before the exception goes on, and
  ``kill_all`` kills every child still running (for the CLI's SIGINT/SIGTERM exit).
- The machine's failures in the suite (its report's ``not_judged`` lines) and the suite running
  past its stage's time-out (equiv's own limit: each call has its own) are noted
  (``equiv.run.faults.note``): the gate is then NOT JUDGED.
- ``repro_line`` is the same command as one shell line (``shlex``), pasteable from the caller's
  folder: environment assignments, ``python -m pytest``, the arguments.
- A gate starts its suite before anything else and reads it last (``staged``): its other stages
  run meanwhile in the gate's process. The child writes to a file, never a pipe that nobody
  reads while those stages run; its ``seconds`` run to its own end. On a host of four cores or
  more a suite may run in shards, processes side by side (``start_properties``), read as one; on
  a smaller one the child gets one thread for its tensor work (``OMP_NUM_THREADS=1``, unless the
  caller set it), or the two processes' threads oversubscribe the cores.
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib.util import find_spec

import numpy as np

from equiv import disk_cache
from equiv.checks import Check, Stage, stage_of
from equiv.memory import admit, allocator_environment
from equiv.run.faults import note
from equiv.run.supervisor import forget_prestarted, prestart
from equiv.timeline import mark

PROFILE_OF_BUDGET = {"quick": "equiv-ci", "full": "equiv-nightly"}
_DROPPED_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


def suite_dir() -> str:
    """The folder of the property suite (``equiv.properties``), installed or checked out."""
    return os.path.dirname(os.path.abspath(find_spec("equiv.properties").origin))   # found, not imported


def pytest_args(options, select: str | None = None) -> list[str]:
    """The pytest arguments (after ``python -m pytest``) of one shielded run of the suite under
    ``options`` (an ``equiv.options.RunOptions``, written whole so that the plugin reads back the
    same options); ``select`` is a ``-k`` expression."""
    where = suite_dir()
    return ["-c", os.path.join(where, "pytest.ini"), "--rootdir", where, "--noconftest",
            "-p", "hypothesispytest", "-p", "equiv.pytest.plugin", "-p", "equiv.properties.conftest",
            "-p", "no:cacheprovider", "-q", "--pyargs", "equiv.properties", *options.pytest_args(),
            f"--hypothesis-seed={options.seed}"] + (["-k", select] if select else [])


def environment(budget: str, base=None, storage: str | None = None) -> dict:
    """The child's environment: the caller's, shielded (module docstring); ``storage`` is where
    Hypothesis keeps its files (``.hypothesis/`` in the caller's folder otherwise)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _DROPPED_ENV}
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else p
                                            for p in env["PYTHONPATH"].split(os.pathsep))
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    allocator_environment(env)
    if cores() < 4:                              # it runs beside the gate's other stages: on a small
        env.setdefault("OMP_NUM_THREADS", "1")   # host two sets of threads oversubscribe (a tree gate: 18 -> 23 s)
    env["HYPOTHESIS_PROFILE"] = PROFILE_OF_BUDGET[budget]
    if storage:
        env["HYPOTHESIS_STORAGE_DIRECTORY"] = storage
    return env


def hypothesis_storage(budget: str, tmp: str) -> str:
    """Where the suite's Hypothesis keeps its files: never the caller's folder. A quick suite
    (its profile keeps no example database: ``equiv.pytest.profiles``) uses a folder of equiv's
    disk cache (``equiv.disk_cache``), where Hypothesis keeps what it reads from the source of
    every local module it sees (its constants, parsed once per version of each file; the same
    constants either way, so the same examples); a full suite, whose profile may keep failing
    examples, and any run with the disk cache off use a folder of ``tmp``, removed after the run."""
    if budget == "quick" and disk_cache.enabled():
        try:
            version = hashlib.sha256(f"{sys.version}|{_hypothesis_version()}".encode()).hexdigest()[:16]
            return str(disk_cache.root() / f"hypothesis-{version}")
        except (OSError, RuntimeError, KeyError):    # no home folder: a temporary one
            pass
    return os.path.join(tmp, "hypothesis")


def _hypothesis_version() -> str:
    try:
        from importlib.metadata import version

        return version("hypothesis")
    except Exception:                            # noqa: BLE001 - not installed: the suite says so itself
        return "?"


def repro_line(args, budget: str) -> str:
    """``REPRO: PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 HYPOTHESIS_PROFILE=... python -m pytest ARGS``."""
    assigns = ["PYTEST_DISABLE_PLUGIN_AUTOLOAD=1", f"HYPOTHESIS_PROFILE={PROFILE_OF_BUDGET[budget]}"]
    return "REPRO: " + " ".join(assigns) + " python -m pytest " + shlex.join(args)


@dataclass(frozen=True)
class SuiteRun:
    """One run of the suite: pytest's exit status, the plugin's per-test JSON (None when it was
    not written), the last lines of the output, the REPRO line, and whether it timed out."""

    returncode: int | None
    report: dict | None
    output_tail: str
    repro: str
    timed_out: bool
    duration_s: float

    def to_json(self) -> dict:
        return {"returncode": self.returncode, "timed_out": self.timed_out,
                "duration_s": round(self.duration_s, 3), "repro": self.repro,
                "tests": None if self.report is None else len(self.report.get("tests", []))}


_LIVE: set = set()                              # children running now (gates may run in threads)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def kill_all() -> None:
    """Kill every suite subprocess still running (the CLI calls this on SIGINT/SIGTERM: the
    children sit in their own process groups, so the terminal's signal does not reach them)."""
    for proc in list(_LIVE):
        _kill_group(proc)


class SuiteHandle:
    """A property-suite subprocess that has been started; ``wait()`` gives its ``SuiteRun``."""

    def __init__(self, args, budget: str, timeout: float | None):
        self.repro = repro_line(args, budget)
        self.timeout = timeout
        self.t0 = time.perf_counter()
        self._tmp = tempfile.TemporaryDirectory(prefix="equiv-gate-")
        self.report_path = os.path.join(self._tmp.name, "properties.json")
        cmd = [sys.executable, "-m", "pytest", *args, f"--equiv-report-json={self.report_path}"]
        # its output goes to a file, not a pipe: a pipe that nobody reads while the gate's other
        # stages run would stop the suite at its first 64 KiB of output
        self._out = open(os.path.join(self._tmp.name, "output.txt"), "w+", errors="replace")
        self.proc = subprocess.Popen(cmd, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True,
                                     env=environment(budget, storage=hypothesis_storage(budget, self._tmp.name)))
        _LIVE.add(self.proc)
        mark("suite spawned")
        self.t_end = None                        # when it ended (a watcher sees it end; read later)
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        self.proc.wait()
        self.t_end = time.perf_counter()
        mark("suite exited")

    def kill(self) -> None:
        """End the run now (its whole process group) and remove its files."""
        _kill_group(self.proc)
        _LIVE.discard(self.proc)
        self._close()

    def _close(self) -> None:
        self._out.close()
        self._tmp.cleanup()

    @property
    def seconds(self) -> float:
        """How long it ran: from its start to its end (to now, while it runs)."""
        return (self.t_end or time.perf_counter()) - self.t0

    def wait(self) -> SuiteRun:
        """The finished run; the time-out counts from the start, an interrupt kills the group."""
        left = None if self.timeout is None else max(self.timeout - (time.perf_counter() - self.t0), 0.0)
        timed_out = False
        try:
            self.proc.wait(timeout=left)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
            timed_out = True
        except BaseException:                    # an interrupt of the caller: no orphan left behind
            self.kill()
            raise
        finally:
            _LIVE.discard(self.proc)
        ended = self.t_end or time.perf_counter()
        try:
            with open(self.report_path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
        self._out.seek(0)
        tail = "\n".join(self._out.read().strip().splitlines()[-15:])
        self._close()
        return SuiteRun(None if timed_out else self.proc.returncode, report, tail, self.repro, timed_out,
                        ended - self.t0)


def start_suite(options, *, timeout: float | None, select: str | None = None) -> SuiteHandle:
    """Start the suite on ``options.spec`` from the caller's folder (module docstring) and return
    at once: the gate runs its other stages while the properties run."""
    return SuiteHandle(pytest_args(options, select), options.budget, timeout)


def run_suite(options, **kwargs) -> SuiteRun:
    """Run the suite from the caller's folder and wait for it (``start_suite``)."""
    return start_suite(options, **kwargs).wait()


class SuiteGroup:
    """Shards of one suite run side by side (``start_properties``): read as one."""

    def __init__(self, handles):
        self.handles = list(handles)

    @property
    def seconds(self) -> float:
        return max(h.seconds for h in self.handles)

    def kill(self) -> None:
        for h in self.handles:
            h.kill()


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def start_properties(options, *, stage_timeout: float, select: str | None = None, shards=()):
    """Start the property suite under ``options`` in a subprocess (``equiv.run.suite``: the
    caller's folder, shielded from its pytest config); ``property_checks(handle)`` reads it.
    ``shards``: ``-k`` expressions that split the suite into parts run in processes of their
    own, side by side, on a host of four cores or more (each part's start-up is paid again, so
    on fewer cores the suite runs whole); together they must select every test once."""
    if len(shards) < 2 or cores() < 4:
        return start_suite(options, timeout=stage_timeout, select=select)
    return SuiteGroup(start_suite(options, timeout=stage_timeout,
                                  select=f"({select}) and ({part})" if select else part) for part in shards)


def stage_limit(limit: float, timeout: float | None) -> float:
    """The property stage's time-out: ``limit``, or four calls' ``timeout`` and two minutes when
    that is longer (each call has its own time-out)."""
    return limit if timeout is None else max(limit, 4 * timeout + 120)


def start_gate_suite(target, stages, *, limit: float, timeout: float | None, select: str, make_options,
                     **options):
    """``(suite or None, stage time-out)`` for a gate of ``options["op"]``: the property suite on
    ``target`` started now when ``stages`` asks for it (``target`` a spec as given, before this
    process imports torch or loads it; a callable is judged in this process and the suite gets
    none), under ``make_options(spec, timeout=, **options)`` (``equiv.options.RunOptions.make``,
    handed down: it sits a floor above ``equiv.run``; the suite resolves the device and the op's
    options as this process does). Then a user's candidate's worker starts loading it
    (``equiv.run.supervisor.prestart``: its import of torch beside this process's) and the gate's
    admission check runs (``equiv.memory.admit``: a device short of memory kills the suite and
    the worker, and raises). The stage's time-out: ``stage_limit``."""
    stage_timeout = stage_limit(limit, timeout)
    suite = None
    if "properties" in stages:
        run = make_options(target if not callable(target) else None, timeout=timeout, **options)
        suite = start_properties(run, stage_timeout=stage_timeout, select=select)
    with killed_on_error(suite):
        if not callable(target):                 # a user's candidate: its worker loads beside this process
            prestart(target, options["op"], timeout)
        admit()
    return suite, stage_timeout


@contextmanager
def killed_on_error(suite):
    """Kill ``suite`` (a started suite, or None) and the workers started ahead that no runner took
    (``equiv.run.supervisor.prestart``) when the block raises (an interrupt included)."""
    try:
        yield
    except BaseException:
        if suite is not None:
            suite.kill()
        forget_prestarted()
        raise


def verifier_stages(suite, stage_timeout: float, loaded, stages, statistics, progress=None
                    ) -> tuple[list[Check], list[Stage]]:
    """A verifier gate's checks and stages, its property suite ``suite`` started first
    (``start_gate_suite``): when the verifier did not load (``loaded``, its abnormal outcome),
    the suite killed, one failed ``load`` check and every stage not run; else
    ``statistics(name, checks so far)`` beside the suite (``staged``)."""
    if loaded is not None:
        if suite is not None:
            suite.kill()
        return ([Check("load", "load", False, f"the verifier {loaded.problem}", outcome=loaded.kind)],
                [Stage(n, "not run", why="the verifier could not be loaded") for n in stages])
    return staged(stages, suite, stage_timeout, statistics, progress)


def property_checks(handle, stage_timeout: float) -> tuple[list[Check], Stage]:
    """Wait for the started suite and turn each of its tests into a check (a ``SuiteGroup``'s
    shards into one stage)."""
    if isinstance(handle, SuiteGroup):
        parts = [property_checks(h, stage_timeout) for h in handle.handles]
        checks = [c for got, _ in parts for c in got]
        ran = [st.ran or {} for _, st in parts]
        merged = {"tests": sum(r.get("tests", 0) for r in ran),
                  "skipped": [x for r in ran for x in r.get("skipped", [])],
                  "examples": {k: v for r in ran for k, v in r.get("examples", {}).items()}}
        merged["summary"] = _summary(merged["examples"], merged["skipped"]) + f" ({len(parts)} processes side by side)"
        if not checks:
            return [], Stage("properties", "not applicable", why="every property test was skipped: "
                             + "; ".join(merged["skipped"][:3]), ran=merged)
        return checks, stage_of("properties", checks, merged)
    run = handle.wait()
    repro, tail = run.repro, run.output_tail
    if run.timed_out:                            # equiv's own stage limit (each call has its own)
        line = (f"the property suite did not finish within {stage_timeout:g} s (equiv's own stage limit; "
                f"each call of the candidate answered within its time-out)")
        note("properties", line)
        c = Check("properties", "properties", False, line, repro=repro, outcome="not_judged")
        return [c], stage_of("properties", [c])
    for line in (run.report or {}).get("not_judged") or ():
        note("properties", line)                 # the suite's calls that the machine failed
    if run.report is None:
        c = Check("properties", "properties", False, f"pytest exited {run.returncode} without a report",
                  counterexample=tail, repro=repro)
        return [c], stage_of("properties", [c])
    tests, returncode = run.report, run.returncode
    records = tests.get("tests", tests) if isinstance(tests, dict) else tests
    checks, skipped, examples = [], [], {}
    for t in records:
        outcome = t.get("outcome")
        prop = t.get("property") or t.get("nodeid", "?").split("::")[-1]
        if outcome == "skipped":
            skipped.append(f"{prop}: {(t.get('message') or 'skipped').strip().splitlines()[0][:160]}")
            continue
        name = "property:" + prop
        passed = outcome == "passed"
        examples[prop] = examples.get(prop, 0) + int(t.get("examples") or 0)
        detail = "held" if passed else (t.get("message") or outcome or "failed").strip().splitlines()[0][:300]
        checks.append(Check("properties", name, passed, detail, subject=prop,
                            inputs=None if passed else _raw_input(t.get("raw")),
                            evidence={"fixture": t["fixture"]} if not passed and t.get("fixture") else None,
                            counterexample=None if passed else t.get("counterexample"),
                            repro=None if passed else (t.get("repro") or repro),
                            duration_s=float(t.get("duration") or 0.0),
                            outcome=None if passed else t.get("call_kind"),
                            recipe=None if passed else t.get("recipe"),
                            parts=() if passed else tuple(t.get("parts") or ()),
                            cause=None if passed else t.get("cause")))
    failed = [c for c in checks if not c.passed]
    if returncode not in (0, 1) or (returncode == 0) == bool(failed):
        checks.append(Check("properties", "properties", False, f"pytest exited {returncode}, which its "
                            f"{len(failed)} failing record(s) do not explain (an interrupted or "
                            f"crashed run)", counterexample=tail, repro=repro))
    ran = {"tests": len(checks), "skipped": skipped, "examples": examples,
           "summary": _summary(examples, skipped)}
    if not checks:
        return [], Stage("properties", "not applicable", why="every property test was skipped: "
                         + "; ".join(skipped[:3]), ran=ran)
    return checks, stage_of("properties", checks, ran)


def staged(stages, suite, stage_timeout: float, run, progress=None, beside=()) -> tuple[list[Check], list[Stage]]:
    """The checks and stages of ``stages`` (in the order asked), with the property suite ``suite``
    (started by the caller before anything else, or None) running beside the others: each other
    stage is ``run(name, checks so far)`` -> ``(checks, Stage)`` in this process, in the order
    asked, and the suite is read last, so a gate's time is the longer of the two, not their sum.
    The stages named in ``beside`` (when another stage runs too) start at once in threads of
    their own and run beside the rest (their ``checks so far``: none); the caller gives each its
    own candidate's worker (``runner_for(..., lane=)``), since a worker serves one call at a time.
    A stage's seconds are its own wall time (the suite's from its start to its end, not to when it
    was read); an exception or an interrupt kills the suite before it goes on."""
    order = [n for n in stages if n != "properties"] + (["properties"] if suite is not None else [])
    by_name, so_far = {}, []
    side = [n for n in order if n in beside] if len([n for n in order if n != "properties"]) > 1 else []
    pool = ThreadPoolExecutor(len(side), thread_name_prefix="equiv-stage") if side else None

    def one(name, earlier):
        t0 = time.perf_counter()
        mark(f"stage {name} start")
        got, st = run(name, earlier)
        mark(f"stage {name} end")
        return got, st, time.perf_counter() - t0

    started_beside: dict = {}
    try:
        started_beside.update((name, pool.submit(one, name, [])) for name in side)
        for i, name in enumerate(order):
            if progress:
                progress(i, len(stages), name)
            if name == "properties":
                mark("stage properties start")
                got, st, seconds = *property_checks(suite, stage_timeout), suite.seconds
                mark("stage properties end")
                suite = None
            elif name in started_beside:
                got, st, seconds = started_beside.pop(name).result()
            else:
                got, st, seconds = one(name, list(so_far))
            so_far += got
            by_name[name] = (got, replace(st, seconds=round(seconds, 3)))
    finally:
        if pool is not None:                     # an exception or an interrupt: not waited for
            pool.shutdown(wait=not started_beside, cancel_futures=True)
        if suite is not None:
            suite.kill()
    names = [n for n in stages if n in by_name]
    return [c for n in names for c in by_name[n][0]], [by_name[n][1] for n in names]


def _summary(examples: dict, skipped: list) -> str:
    return f"{sum(examples.values())} examples in {len(examples)} properties" + (
        f"; {len(skipped)} skipped" if skipped else "")


def _raw_input(record):
    """A failing test's element-level input (the plugin's ``raw`` record: the values as drawn and
    the dtype they were built in) as ``{"values": float32 [B, V], "dtype": str}``, or None."""
    if not isinstance(record, dict) or "values" not in record:
        return None
    values = np.array(record["values"], dtype=np.float64)
    if values.ndim != 2 or not values.size:
        return None
    return {"values": values.astype(np.float32), "dtype": str(record.get("dtype", "float32"))}
