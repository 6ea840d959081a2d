"""Call a candidate with a wall-clock limit.

A candidate that hangs must become a failed check with the reason, not a hung gate. Python cannot
kill a thread, so the call runs in a daemon thread: on time-out the caller gets ``CallTimeout``
and moves on, and the stuck thread dies with the process (daemon threads do not block exit).
A time-out of ``inf`` means no limit.
"""
from __future__ import annotations

import threading

from equiv.errors import EquivError


class CallTimeout(EquivError, TimeoutError):
    """The candidate did not return within the limit."""


def limit_seconds(timeout: float | None) -> float | None:
    """The wait in seconds, or None for no limit: ``None``, ``inf`` (``--timeout inf``) and any
    value past what the platform can wait for (``threading.TIMEOUT_MAX``, ~292 years) all mean
    no limit; passing them on would raise OverflowError in ``Thread.join``."""
    if timeout is None or not timeout < threading.TIMEOUT_MAX:
        return None
    return float(timeout)


def call_with_timeout(fn, args=(), timeout: float | None = None):
    """``fn(*args)``, re-raising its exception; ``CallTimeout`` after ``timeout`` seconds
    (``None`` or ``inf``: no limit)."""
    timeout = limit_seconds(timeout)
    if timeout is None:
        return fn(*args)
    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:             # re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="equiv-candidate-call", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise CallTimeout(f"the candidate did not return within {timeout:g} s (per-call time-out; "
                          f"raise it with --timeout)")
    if "error" in box:
        raise box["error"]
    return box["value"]
