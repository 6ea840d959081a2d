"""What a time-out value means.

Candidates are called in a supervised worker process (``equiv.run``), which is killed when it
does not answer in time; this module only says how long to wait. ``None``, ``inf`` (``--timeout
inf``) and any value past what the platform can wait for (``threading.TIMEOUT_MAX``, ~292 years)
all mean no limit: passing them on would raise OverflowError in a wait.
"""
from __future__ import annotations

import threading


def limit_seconds(timeout) -> float | None:
    """The wait in seconds, or None for no limit."""
    if timeout is None:
        return None
    timeout = float(timeout)
    if not timeout < threading.TIMEOUT_MAX:
        return None
    return timeout
