"""Profile every Python process of a gate (the command, its property suite, their workers).

Put this folder first on PYTHONPATH and set EQUIV_PROF_DIR: each process started with it writes
``PID.prof`` (cProfile, main thread) and one line of ``timeline.jsonl`` (pid, parent, argv,
start and end in wall-clock seconds) when it ends, also through ``os._exit`` (the worker's way
out). ``python scripts/profile/report.py DIR`` reads them. A development aid, not shipped.
"""
import os

_DIR = os.environ.get("EQUIV_PROF_DIR")
if _DIR:
    import atexit
    import cProfile
    import json
    import sys
    import time

    _T0 = time.time()
    _PROF = cProfile.Profile()
    _DONE = []

    _SAMPLER = None
    if os.environ.get("EQUIV_SAMPLE_MS"):        # every thread, wall clock (sampler.py)
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from sampler import Sampler
        _SAMPLER = Sampler(_DIR, float(os.environ["EQUIV_SAMPLE_MS"]))

    def _dump():
        if _DONE:
            return
        _DONE.append(1)
        _PROF.disable()
        pid = os.getpid()
        if _SAMPLER is not None:
            _SAMPLER.dump(pid)
        _PROF.dump_stats(os.path.join(_DIR, f"{pid}.prof"))
        with open(os.path.join(_DIR, "timeline.jsonl"), "a") as f:
            f.write(json.dumps({"pid": pid, "ppid": os.getppid(), "argv": sys.argv[:6],
                                "start": _T0, "end": time.time()}) + "\n")

    _real_exit = os._exit

    def _exit(code):
        try:
            _dump()
        finally:
            _real_exit(code)

    os._exit = _exit
    atexit.register(_dump)
    _PROF.enable()
