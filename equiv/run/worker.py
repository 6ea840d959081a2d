"""The worker process: loads one candidate and answers the supervisor's requests.

Started by ``equiv.run.supervisor`` as ``python -m equiv.run.worker FD`` in its own process
session (a Ctrl-C in the terminal reaches the supervisor, which ends the worker), with the
caller's working folder, environment and ``sys.path``. It owns the device: inputs are built here
from their descriptions and only host arrays go back. Requests (tuples over one
``multiprocessing.connection.Connection``):

    ("load", spec, sys_path)             -> ("loaded", None) | ("load_error", message)
                                            | ("load_abnormal", message)
    ("call", inputs, extra, device, names, context)
                                         -> ("started", time.monotonic()) just before the
                                            candidate is called (in ``context``: an
                                            ``equiv.run.context`` name or None), then
                                            ("outcome", CallOutcome)
    ("probe", target, payload, device)   -> ("outcome", CallOutcome)
    ("settle",)                          -> ("settled", problem or None)
    ("bye",)                             -> the process exits 0

Everything the candidate prints goes to a log file whose tail the supervisor reports. A watchdog
thread ends the worker when its supervisor is gone (a candidate stuck in Python code still lets
it run; one stuck in C holding the GIL is killed by the supervisor's time-out instead).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from equiv.errors import CandidateLoadError
from equiv.memory import host_allocator
from equiv.run.load import load
from equiv.run.invoke import CallState, invoke, run_probe, settle
from equiv.timeline import mark
from multiprocessing.connection import Connection


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(3)
        time.sleep(0.5)


def serve(conn) -> None:
    fn = None
    state = CallState()
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        op = msg[0]
        if op == "bye":
            return
        if op == "load":
            _, spec, sys_path = msg                  # spec: a CandidateSpec
            sys.path[:0] = [p for p in sys_path if p not in sys.path]
            try:
                fn = load(spec).fn
            except CandidateLoadError as exc:
                conn.send(("load_error", str(exc)))
                continue
            except BaseException as exc:         # noqa: B036 - SystemExit/KeyboardInterrupt at import
                conn.send(("load_abnormal", f"raised {type(exc).__name__} while importing: {exc}"))
                continue
            conn.send(("loaded", None))
        elif op == "call":
            _, inputs, extra, device, names, context = msg
            conn.send(("outcome", invoke(fn, inputs, extra, device=device, state=state, input_names=names,
                                         context=context,
                                         on_start=lambda: conn.send(("started", time.monotonic())))))
        elif op == "probe":
            _, target, payload, device = msg
            conn.send(("outcome", run_probe(fn, target, payload, device)))
        elif op == "settle":
            conn.send(("settled", settle(state)))
        if state.broken:                         # a faulted CUDA context: start afresh
            conn.close()
            os._exit(4)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    mark("worker start")
    host_allocator()                             # malloc kept its blocks for reuse (equiv.memory)
    conn = Connection(int(argv[0]))
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    try:
        serve(conn)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(0)                                  # skip interpreter teardown (CUDA, threads)


if __name__ == "__main__":
    main()
