"""Runners: where a candidate's calls happen, and who owns the verdict when they go wrong.

Plan
----
- ``runner_for(spec, device)`` returns the command's one runner for that candidate (made once
  and reused; every runner is closed at exit). A user's candidate gets a ``WorkerRunner``: its
  calls run in a worker process (``equiv.run.worker``) that this process supervises. Our own
  built-in paths and the mutant zoo may run in-process (``InProcessRunner``) for speed, unless
  ``EQUIV_ISOLATE=always``; a Python callable handed to the API runs in-process too (it already
  lives in the caller's process).
- ``WorkerRunner.call`` sends the input's description and waits at most ``timeout`` seconds.
  ``submit`` sends it and returns at once (a ``Pending``), so the caller can build its own copy
  of the input and compute the reference while the worker builds and calls; ``Pending.result()``
  waits for what is left of the time-out, counted from the worker's ``started`` (the
  system-wide monotonic clock read just before it calls the candidate: building the input is
  not the candidate's time; until then the wait is bounded by ``timeouts.build_timeout()``,
  equiv's own stage: running past it is ``not_judged``, as is the worker killed by SIGKILL
  then, the host's out-of-memory killer's signal). One request is in flight at a time: a
  second ``submit`` first collects the first.
- A ``not_judged`` outcome (``equiv.run.faults``: the machine's failure, not the candidate's) is
  noted under the candidate's spec (``faults.note``, which a gate reads) and later calls of the
  command are not made: the verdict is NOT JUDGED whatever they would say.
  Every abnormal end is an outcome, never an exception here: an exit of any code, a signal, a
  ``BaseException`` from the candidate, no answer in time (then the worker's whole process group
  is killed, SIGKILL if SIGTERM is not enough). The worker restarts on the next call; after a
  hang, or after ``MAX_ABNORMAL`` abnormal ends, later calls are not made (``not_called``), so a
  hanging candidate costs one time-out, not one per example.
- A spec arrives parsed (``equiv.run.spec.CandidateSpec``: a file already absolute); the worker
  is sent the object and imports a module spec with the caller's ``sys.path``. An import that
  raises is a ``CandidateLoadError`` (exit 2); an
  import that exits, is killed or hangs is an abnormal outcome (a failed check, exit 1).
"""
from __future__ import annotations

import atexit
import os
import signal
import subprocess
import sys
import tempfile
import time
from multiprocessing import Pipe

from equiv.errors import CandidateLoadError
from equiv.run import wire
from equiv.run.faults import NOT_JUDGED_PREFIX
from equiv.run.outcome import CallOutcome, Pending, failed, noted
from equiv.run.spec import CandidateSpec
from equiv.memory import allocator_environment
from equiv.run.timeouts import DEFAULT_TIMEOUT_S, build_timeout, limit_seconds

MAX_ABNORMAL = 3
BUILD_LIMIT_HINT = "raise it with EQUIV_BUILD_TIMEOUT_S"
LOAD_TIMEOUT_S = 120.0                           # importing torch and the candidate's module
_RUNNERS: dict = {}
_PRESTARTED: dict = {}                           # (spec, folder, lane) -> a worker started by ``prestart``


def _seconds(timeout) -> float | None:
    return limit_seconds(timeout)


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class WorkerRunner:
    """Calls in a supervised worker process (module docstring)."""

    isolated = True

    def __init__(self, candidate: CandidateSpec, device: str, timeout=DEFAULT_TIMEOUT_S):
        self.candidate, self.spec, self.device, self.timeout = candidate, candidate.text, device, timeout
        self.proc = None
        self.conn = None
        self.log = None                          # the worker's output: a file with no name
        self.calls = 0
        self.abnormal_ends = 0
        self.stopped: str | None = None          # why later calls are not made
        self._loaded_once = False
        self._pending: Pending | None = None      # the request in flight (``submit``)
        self._loading: float | None = None        # when the load was asked, until its reply is read

    # -- the process ------------------------------------------------------------------------------
    def _start(self) -> CallOutcome | None:
        """Start the worker and wait until it has loaded the candidate (``_spawn``, ``_loaded``)."""
        self._spawn()
        return self._loaded()

    def _spawn(self) -> None:
        """Start the worker and ask it to load the candidate; the reply is read by ``_loaded``."""
        parent_conn, child_conn = Pipe(duplex=True)
        fd = child_conn.fileno()
        if self.log is not None:
            self.log.close()
        # Unnamed (unlinked at once): nothing is left behind, even when this process is killed.
        log = self.log = tempfile.TemporaryFile(prefix="equiv-worker-", suffix=".log")
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # above equiv/
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(
            [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
            PYTHONUNBUFFERED="1")
        allocator_environment(env)
        self.proc = subprocess.Popen([sys.executable, "-m", "equiv.run.worker", str(fd)], pass_fds=(fd,),
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                     start_new_session=True)
        child_conn.close()
        self.conn = parent_conn
        self.conn.send(("load", self.candidate, [p for p in sys.path if p]))
        self._loading = time.monotonic()

    def _loaded(self) -> CallOutcome | None:
        """The load's reply: None when the candidate loaded, the abnormal outcome of its import
        (an exit, a signal, a hang), or ``CandidateLoadError`` when the import raised."""
        if self._loading is None:
            return None
        limit = max(_seconds(self.timeout) or 0.0, LOAD_TIMEOUT_S)
        left = max(limit - (time.monotonic() - self._loading), 0.0)
        self._loading = None
        reply = self._receive(left, "while loading the candidate", shown=limit)
        if isinstance(reply, CallOutcome):
            return reply
        tag, message = reply
        if tag == "load_error":
            self._kill()
            raise CandidateLoadError(message)
        if tag == "load_abnormal":
            self._kill()
            return self._abnormal(failed("interrupt", message))
        self._loaded_once = True
        return None

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None
        if proc is None or proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue

    def _log_tail(self, lines: int = 6) -> str | None:
        try:                                     # pread: the worker shares the file's offset
            fd = self.log.fileno()
            size = os.fstat(fd).st_size
            text = os.pread(fd, min(size, 4000), max(0, size - 4000)).decode("utf-8", "replace")
        except (OSError, AttributeError, ValueError):
            return None
        tail = [ln for ln in text.splitlines() if ln.strip()][-lines:]
        return "\n".join(tail) or None

    def _ended(self, when: str) -> CallOutcome:
        code = None
        try:
            code = self.proc.wait(5.0)
        except subprocess.TimeoutExpired:
            pass
        tail = self._log_tail()
        self._kill()
        if code is not None and code < 0:
            return failed("signal", f"was killed by {_signal_name(-code)} {when}", log_tail=tail)
        return failed("exit", f"exited with code {code} {when}" if code is not None
                      else f"closed its connection {when}", log_tail=tail)

    def _receive(self, timeout, when: str, shown=None):
        """The worker's reply, or the outcome of its abnormal end; ``shown`` is the limit named
        in a time-out's message (``timeout`` itself when not given)."""
        shown = timeout if shown is None else shown
        try:
            ready = self.conn.poll(timeout)
        except (OSError, EOFError):
            ready = True
        if not ready:
            tail = self._log_tail()
            self._kill()
            self.stopped = f"the candidate hung on an earlier call (no answer within {shown:g} s {when})"
            return failed("timeout", f"did not return within {shown:g} s {when} (the worker was "
                                     f"killed; raise the limit with --timeout)", log_tail=tail)
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError, ConnectionError):
            return self._ended(when)
        try:
            return wire.loads(data)
        except wire.ReplyError as exc:
            tail = self._log_tail()
            self._kill()                         # its next reply could not be trusted to line up
            return failed("raised", f"sent a reply that could not be read {when}: the reply {exc} "
                                    f"(return tensors or plain values)", log_tail=tail)

    def _abnormal(self, outcome: CallOutcome) -> CallOutcome:
        if outcome.kind == "not_judged":
            self.stopped = f"the candidate {outcome.problem}"
            return noted(self.spec, outcome)
        if outcome.abnormal:
            self.abnormal_ends += 1
            if self.abnormal_ends >= MAX_ABNORMAL and self.stopped is None:
                self.stopped = f"the candidate ended abnormally {self.abnormal_ends} times (last: it {outcome.problem})"
        return outcome

    # -- requests ---------------------------------------------------------------------------------
    def _send(self, message, timeout, when: str) -> Pending:
        """Send one request; its ``Pending`` waits for the reply (or the abnormal end) at most
        ``timeout`` seconds from now. A request still in flight is collected first."""
        if self._pending is not None:
            self._pending.result()
        if self.stopped is not None:
            return Pending(lambda: failed("not_called", f"not called: {self.stopped}"))
        timeout = _seconds(self.timeout if timeout is None else timeout)
        if self._loading is not None:            # started by load_check(wait=False)
            started = self._loaded()
            if started is not None:
                return Pending(lambda: started)
        if self.proc is None or self.proc.poll() is not None:
            self._kill()
            started = self._start()
            if started is not None:
                return Pending(lambda: started)
        self.calls += 1
        self.conn.send(message)
        sent = time.monotonic()
        building = message[0] == "call"          # a call's time-out starts at its "started"

        def collect():
            nonlocal sent, building
            self._pending = None
            try:
                while True:
                    if building:
                        reply = self._building(sent)
                    else:
                        left = None if timeout is None else max(timeout - (time.monotonic() - sent), 0.0)
                        reply = self._receive(left, when, shown=timeout)
                    if building and isinstance(reply, tuple) and reply[:1] == ("started",):
                        stamp = reply[1] if isinstance(reply[1], float) else time.monotonic()
                        building, sent = False, min(max(stamp, sent), time.monotonic())
                        continue
                    break
            except BaseException:                # interrupted: its reply would not line up later
                self._kill()
                raise
            return self._abnormal(reply if isinstance(reply, CallOutcome) else reply[1])

        self._pending = Pending(collect)
        return self._pending

    def _building(self, sent: float):
        """The worker's reply while it builds a call's input (equiv's own stage, not the
        candidate's call): running past ``build_timeout()``, or a SIGKILL then, is ``not_judged``."""
        limit = build_timeout()
        left = None if limit is None else max(limit - (time.monotonic() - sent), 0.0)
        reply = self._receive(left, "while building the input", shown=limit)
        if isinstance(reply, CallOutcome) and reply.kind == "timeout":
            return failed("not_judged", f"{NOT_JUDGED_PREFIX}equiv did not finish building the input within "
                                        f"{limit:g} s (its own stage, not the candidate's call; the worker was "
                                        f"killed; {BUILD_LIMIT_HINT})", log_tail=reply.log_tail)
        if isinstance(reply, CallOutcome) and reply.kind == "signal" and "SIGKILL" in reply.problem:
            return failed("not_judged", f"{NOT_JUDGED_PREFIX}the worker {reply.problem} (the host's out-of-memory "
                                        f"killer, or another process, before the candidate was called)",
                          log_tail=reply.log_tail)
        return reply

    def _request(self, message, timeout, when: str) -> CallOutcome:
        return self._send(message, timeout, when).result()

    def submit(self, inputs, *extra, names=("logits",), timeout=None, context=None) -> Pending:
        """One call in its calling ``context`` (``equiv.run.context``; None: the worker's main
        thread, grad enabled), sent now; ``result()`` waits for it."""
        return self._send(("call", inputs, tuple(extra), self.device, tuple(names), context), timeout,
                          "during the call")

    def call(self, inputs, *extra, names=("logits",), timeout=None, context=None) -> CallOutcome:
        return self.submit(inputs, *extra, names=names, timeout=timeout, context=context).result()

    def probe(self, target: str, payload=None, timeout=None) -> CallOutcome:
        return self._request(("probe", target, payload, self.device), timeout, f"during the probe {target}")

    def settle(self) -> str | None:
        if self._pending is not None:
            self._pending.result()
        if self.proc is None or self.proc.poll() is not None or self.stopped is not None:
            return None
        self.conn.send(("settle",))
        reply = self._receive(30.0, "at the end of the stage")
        if isinstance(reply, CallOutcome):
            return reply.problem
        return reply[1]

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.conn.send(("bye",))
                self.proc.wait(2.0)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                pass
        self._kill()
        if self.log is not None:
            self.log.close()
            self.log = None


def _device_key(device) -> str:
    """One name per device: ``cuda`` and ``cuda:0`` (a tensor's ``str(t.device)``) are one GPU
    to a fresh worker, so they share one runner (before: a second worker, seconds to start)."""
    name = str(device)
    return "cuda:0" if name == "cuda" else name


def _in_process(fn, spec: CandidateSpec, device: str):
    """The runner that calls ``fn`` in this process (``equiv.run.invoke.InProcessRunner``)."""
    # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle): invoke imports it, and
    # only a process that calls a candidate in-process pays for it (a gate's start never does)
    from equiv.run.invoke import InProcessRunner

    return InProcessRunner(fn, spec, device)


def runner_for(candidate, device: str = "cpu", timeout=DEFAULT_TIMEOUT_S, op: str | None = None,
               lane: str = ""):
    """The runner of ``candidate`` (a ``CandidateSpec``; a string or callable is parsed for
    ``op``) on ``device`` for this command; another ``lane`` is another runner of the same
    candidate for a stage that runs beside another (``suite.staged``): always a worker of its
    own, a built-in's too, so that each stage's calls reach the candidate in their own process
    and order, never interleaved by threads with another stage's (a candidate whose state
    changes with its calls is judged the same way every run)."""
    spec = CandidateSpec.parse(candidate, op)
    if spec.kind == "callable":
        return _in_process(spec.fn, spec, str(device))
    key = (spec, _device_key(device), os.getcwd(), lane)
    runner = _RUNNERS.get(key)
    if runner is None:
        runner = _PRESTARTED.pop((spec, os.getcwd(), lane), None)
        if runner is not None:                   # started before the device was resolved
            runner.device = str(device)
        elif spec.trusted and not lane:
            runner = _in_process(spec.load().fn, spec, str(device))
        else:
            runner = WorkerRunner(spec, str(device), timeout)
        _RUNNERS[key] = runner
    if runner.isolated:
        runner.timeout = timeout
    return runner


def prestart(candidate, op: str | None = None, timeout=DEFAULT_TIMEOUT_S, lane: str = "") -> None:
    """Start the worker that ``runner_for(candidate, device, lane=lane)`` will return, now, before
    this process resolves the device (a gate's start: torch is not imported yet), so that the
    worker imports torch and the candidate while this process does the same: on a host where
    importing torch takes 3.5 s, the two imports one after the other were 3.5 s of every gate of
    a user's candidate, and of the draft gate's MTP stage. The first ``runner_for`` of the same
    candidate, folder and lane takes it, on whatever device; nothing is started for a candidate
    that runs in this process. A spec that does not parse raises, as ``runner_for`` would; a
    load that fails is read, as before, by ``load_check`` or the first call."""
    spec = CandidateSpec.parse(candidate, op)
    if spec.kind == "callable" or (spec.trusted and not lane):
        return
    key = (spec, os.getcwd(), lane)
    if key in _PRESTARTED or any(k[0] == spec and k[2:] == key[1:] for k in _RUNNERS):
        return
    runner = WorkerRunner(spec, None, timeout)
    runner._spawn()
    _PRESTARTED[key] = runner


def forget_prestarted() -> None:
    """Close the workers ``prestart`` started that no ``runner_for`` took (a gate that stopped
    before its calls: a failed load, a device short of memory, an interrupt)."""
    while _PRESTARTED:
        _PRESTARTED.popitem()[1].close()


def load_check(spec, device: str = "cpu", timeout=DEFAULT_TIMEOUT_S, op: str | None = None,
               wait: bool = True) -> CallOutcome | None:
    """Start the candidate's worker now (a usage error raises ``CandidateLoadError`` before any
    work); returns the abnormal outcome of its import, or None when it loaded. ``wait=False``
    returns at once while the worker loads (the caller goes on with its own start-up); a later
    ``load_check`` (or the first call) reads the load's outcome."""
    runner = runner_for(spec, device, timeout, op)
    if not runner.isolated:
        return None
    if runner._loading is not None:
        return runner._loaded() if wait else None
    if runner.proc is not None:
        return None
    if runner.stopped is not None:
        return failed("not_called", f"not called: {runner.stopped}")
    if not wait:
        runner._spawn()
        return None
    return runner._start()


def load_target(candidate, op: str, device: str, timeout):
    """``(target, name, abnormal outcome or None)``: ``candidate`` (a ``CandidateSpec``; a string
    or a callable is parsed for ``op``) loaded where it will run: a callable in this process, a
    built-in by its spec, a user's in its worker (``load_check``); an unloadable spec raises
    ``CandidateLoadError`` (exit 2) first."""
    spec = CandidateSpec.parse(candidate, op)
    if spec.kind == "callable":
        return spec.load(), spec.text, None      # it runs in this process
    if spec.builtin:
        return spec, spec.text, None
    return spec, spec.text, load_check(spec, device, timeout)


def close_all() -> None:
    forget_prestarted()
    for runner in list(_RUNNERS.values()):
        runner.close()
    _RUNNERS.clear()


atexit.register(close_all)
