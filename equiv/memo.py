"""``memo(maxsize, reduce=None)``: a bounded cache of a function's results that threads share,
each made once. A thread that asks for an entry another thread is making waits for it instead of
making it again (``functools.lru_cache`` would make it twice): an op's judge can make its tables
ahead in other threads while it judges. ``reduce(first argument)`` is what the entry is keyed on
and what the function is called with (a recipe reduced to what the entry depends on). The least
recently used entry goes first; a call that raises leaves no entry, and its waiters get the
exception. ``cache_clear()`` empties it."""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from concurrent.futures import Future


def memo(maxsize: int, reduce=None):
    def wrap(fn):
        lock = threading.Lock()
        entries: OrderedDict = OrderedDict()     # key -> Future

        @functools.wraps(fn)
        def cached(first, *args, **kwargs):
            if reduce is not None:
                first = reduce(first)
            key = (first, args, tuple(sorted(kwargs.items())))
            with lock:
                made = entries.get(key)
                mine = made is None
                if mine:
                    made = entries[key] = Future()
                    while len(entries) > maxsize:
                        entries.popitem(last=False)
                else:
                    entries.move_to_end(key)
            if mine:
                try:
                    made.set_result(fn(first, *args, **kwargs))
                except BaseException as exc:     # noqa: B036 - handed to every waiter, then raised
                    with lock:
                        if entries.get(key) is made:
                            del entries[key]
                    made.set_exception(exc)
                    raise
            return made.result()

        cached.cache_clear = entries.clear
        return cached
    return wrap
