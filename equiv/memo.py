"""``memo(maxsize, reduce=None, max_bytes=None)``: a bounded cache of a function's results that
threads share, each made once. A thread that asks for an entry another thread is making waits for
it instead of making it again (``functools.lru_cache`` would make it twice): an op's judge can
make its tables ahead in other threads while it judges. ``reduce(first argument)`` is what the
entry is keyed on and what the function is called with (a recipe reduced to what the entry
depends on). The least recently used entry goes first, when there are more than ``maxsize`` or
when the made entries hold more than ``max_bytes`` (arrays counted by their ``nbytes``, through
tuples, lists, dicts and objects' attributes, as made; the newest entry always stays): a count
alone does not bound memory when one entry is a few KiB at one vocabulary and 100 MiB at
another. A call that raises leaves no entry, and its waiters get the exception.
``cache_clear()`` empties it."""
from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from concurrent.futures import Future


def nbytes(value, _depth: int = 0) -> int:
    """The bytes of the arrays ``value`` holds (module docstring); 0 for anything else."""
    size = getattr(value, "nbytes", None)
    if isinstance(size, int):
        return size
    if _depth > 4:
        return 0
    if isinstance(value, (tuple, list)):
        return sum(nbytes(v, _depth + 1) for v in value)
    if isinstance(value, dict):
        return sum(nbytes(v, _depth + 1) for v in value.values())
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return sum(nbytes(v, _depth + 1) for v in vars(value).values())
    return 0


def memo(maxsize: int, reduce=None, max_bytes: int | None = None):
    def wrap(fn):
        lock = threading.Lock()
        entries: OrderedDict = OrderedDict()     # key -> Future
        sizes: dict = {}                         # key -> bytes, for the entries made

        def evict(keep) -> None:                 # under the lock
            while len(entries) > maxsize or (max_bytes is not None and sum(sizes.values()) > max_bytes):
                old = next((k for k in entries if k != keep and (k in sizes or len(entries) > maxsize)), None)
                if old is None:
                    return
                del entries[old]
                sizes.pop(old, None)

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
                    evict(key)
                else:
                    entries.move_to_end(key)
            if mine:
                try:
                    result = fn(first, *args, **kwargs)
                except BaseException as exc:     # noqa: B036 - handed to every waiter, then raised
                    with lock:
                        if entries.get(key) is made:
                            del entries[key]
                    made.set_exception(exc)
                    raise
                made.set_result(result)
                if max_bytes is not None:
                    with lock:
                        if entries.get(key) is made:
                            sizes[key] = nbytes(result)
                            evict(key)
            return made.result()

        def cache_clear() -> None:
            with lock:
                entries.clear()
                sizes.clear()

        cached.cache_clear = cache_clear
        return cached
    return wrap
