"""Wall-clock marks of a gate's phases, for the benchmark: ``EQUIV_TIMELINE=FILE``.

Where the variable names a file, ``mark("event")`` appends one line ``PID EPOCH_SECONDS EVENT``
to it (every process of a gate inherits the variable: the command, its property suite, their
candidates' workers); elsewhere it does nothing but one lookup. ``scripts/gate_bench.py`` sets it
and prints, per gate, when each phase began after the command started (the suite started, its
tests began and ended, the gate's own stages, the verdict, the exit). ``read(path)`` gives the
marks back as ``[(pid, seconds, event)]``. One line is one ``write`` of a file opened to append,
so processes writing at once do not tear each other's lines.
"""
from __future__ import annotations

import os
import time

ENV = "EQUIV_TIMELINE"


def mark(event: str) -> None:
    """Append ``PID EPOCH EVENT`` to the file ``EQUIV_TIMELINE`` names (nothing when unset)."""
    path = os.environ.get(ENV)
    if not path:
        return
    line = f"{os.getpid()} {time.time():.4f} {event}\n".encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    except OSError:                              # a mark is an aid: it never stops a gate
        pass


def read(path: str) -> list[tuple[int, float, str]]:
    """The marks in ``path`` as ``[(pid, epoch seconds, event)]``, in the order written."""
    out = []
    with open(path) as f:
        for line in f:
            pid, when, event = line.rstrip("\n").split(" ", 2)
            out.append((int(pid), float(when), event))
    return out
