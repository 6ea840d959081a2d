"""``equiv.memo``: a cache that threads share, each entry made once (the judges make their tables
ahead in other threads). Plan: two threads asking for one entry make it once, the second waits
for the first; the least recently used entry goes first; a call that raises leaves no entry and
its waiter gets the exception; ``reduce`` keys and calls on the reduced argument."""
import threading
import time

import pytest

from equiv.memo import memo


def test_an_entry_asked_by_two_threads_is_made_once():
    calls, started = [], threading.Event()

    @memo(4)
    def slow(x):
        calls.append(x)
        started.set()
        time.sleep(0.2)
        return [x]

    got = []
    first = threading.Thread(target=lambda: got.append(slow(3)))
    first.start()
    started.wait(5)
    second = slow(3)                             # asked while the first thread makes it
    first.join()
    assert calls == [3] and got[0] is second


def test_least_recently_used_goes_first_and_reduce_keys():
    calls = []

    @memo(2, reduce=lambda x: x % 10)
    def f(x, y=0):
        calls.append((x, y))
        return x + y

    assert f(11) == 1 and f(21) == 1 and calls == [(1, 0)]   # both reduced to 1
    f(2)
    f(1)                                         # 1 used last: 2 goes when 3 comes
    f(3)
    f(1)
    assert calls == [(1, 0), (2, 0), (3, 0)]
    f(2)
    assert calls[-1] == (2, 0)                   # made again: it had gone
    assert f(1, y=5) == 6 and calls[-1] == (1, 5)


def test_a_call_that_raises_leaves_no_entry_and_its_waiter_gets_it():
    calls, started = [], threading.Event()

    @memo(4)
    def bad(x):
        calls.append(x)
        started.set()
        time.sleep(0.2)
        raise ValueError(f"no law for {x}")

    errors = []

    def ask():
        try:
            bad(1)
        except ValueError as exc:
            errors.append(str(exc))

    t = threading.Thread(target=ask)
    t.start()
    started.wait(5)
    with pytest.raises(ValueError, match="no law for 1"):
        bad(1)                                   # waits for the first thread's call, gets its error
    t.join()
    assert errors == ["no law for 1"] and calls == [1]
    with pytest.raises(ValueError):
        bad(1)                                   # no entry was left: made again
    assert calls == [1, 1]


def test_the_entries_are_bounded_by_their_bytes_and_the_newest_stays():
    import numpy as np

    from equiv.memo import nbytes

    calls = []

    @memo(24, max_bytes=1000)
    def law(n):
        calls.append(n)
        return {"table": np.zeros(n, dtype=np.uint8), "meta": (np.zeros(1, dtype=np.uint8), "name")}

    law(400), law(401), law(402)                 # 1206 bytes: 400 goes first
    law(401), law(402)
    assert calls == [400, 401, 402]
    law(400)
    assert calls[-1] == 400                      # made again
    law(5000)                                    # alone past the bound: kept, the others go
    law(5000)
    assert calls[-1] == 5000 and calls.count(5000) == 1
    law(401)
    assert calls[-1] == 401 and calls.count(401) == 2
    assert nbytes(type("Bank", (), {})) == 0 and nbytes([np.zeros(3), {"a": np.zeros(2)}]) == 40
