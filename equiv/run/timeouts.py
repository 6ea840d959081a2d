"""What a time-out value means, and the one default.

Candidates are called in a supervised worker process (``equiv.run``), which is killed when it
does not answer in time; this module only says how long to wait. ``DEFAULT_TIMEOUT_S`` is the
per-call limit of every command, the plugin and the library when none is given (the only place
it is written); ``build_timeout()`` bounds equiv's own stage of building a call's input.
``None``, ``inf`` (``--timeout inf``) and any value past what the platform can wait for
(``threading.TIMEOUT_MAX``, ~292 years) all mean no limit: passing them on would raise
OverflowError in a wait.
"""
from __future__ import annotations

import os
import threading
from equiv.validation import check_float

DEFAULT_TIMEOUT_S = 60.0
BUILD_TIMEOUT_S = 600.0                          # the worker building a call's input (equiv's own stage)
BUILD_TIMEOUT_ENV = "EQUIV_BUILD_TIMEOUT_S"


def build_timeout() -> float | None:
    """The harness's own limit on building one call's input in the worker: ``BUILD_TIMEOUT_S``,
    or ``EQUIV_BUILD_TIMEOUT_S`` seconds when set (a slow host; the tests' hook). Running past it
    is NOT JUDGED, never the candidate's time-out. None: no limit."""
    text = os.environ.get(BUILD_TIMEOUT_ENV)
    if not text:
        return BUILD_TIMEOUT_S
    return parse_timeout(text, BUILD_TIMEOUT_ENV)


def parse_timeout(text, name: str = "timeout") -> float | None:
    """Seconds per call from ``60``, ``"2.5"``, ``"inf"`` or ``None`` (no limit: None)."""
    if text is None or str(text).strip().lower() in ("inf", "none"):
        return None
    try:
        text = float(text)
    except (TypeError, ValueError):
        pass
    value = check_float(name, text, min_value=0.0, exclusive_min=True)
    return None if not value < threading.TIMEOUT_MAX else value


def timeout_text(timeout: float | None) -> str:
    """The command-line form of a parsed time-out (``inf`` for none)."""
    return "inf" if timeout is None else f"{timeout:g}"


def limit_seconds(timeout) -> float | None:
    """The wait in seconds, or None for no limit."""
    if timeout is None:
        return None
    timeout = float(timeout)
    if not timeout < threading.TIMEOUT_MAX:
        return None
    return timeout
