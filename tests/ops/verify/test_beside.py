"""``beside.ahead``: the judges' tables made in other threads keep nothing alive of their own; what
stays is what the functions' caches keep (bounded). Holding every job's result kept every case's
laws alive until the judge ended: 16 GiB in the 275 cases of a quick tree plan for a verifier
that declares ``drafts = "any"`` (the gate was killed by the host's out-of-memory killer)."""
from __future__ import annotations

import gc
import threading
import time
import weakref

from equiv.ops.verify.beside import ahead, draw_and_judge


class _Law:
    """Stands for a case's laws: large, and made by a job."""


def test_a_job_made_ahead_holds_nothing_once_it_has_run():
    made, ran = [], threading.Event()

    def job():
        law = _Law()
        made.append(weakref.ref(law))
        ran.set()
        return law

    with ahead([job]):
        assert ran.wait(10)
        deadline = time.monotonic() + 5
        while made[0]() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.01)
        assert made[0]() is None, "the ahead pool still holds the job's result"


def test_cases_are_drawn_in_order_and_judged_in_order_beside():
    seen = []
    drawn = draw_and_judge([1, 2, 3], lambda c: type("D", (), {"problem": None, "c": c})(),
                           lambda case, d: seen.append((case, d.c)))
    assert [d.c for d in drawn] == [1, 2, 3] and seen == [(1, 1), (2, 2), (3, 3)]
