"""The tolerance stage's host work, done ahead in other processes: each recipe's values and its
float64 reference, while this process calls the candidate and judges the recipes before it.

Plan
----
- Why: on a host with a fast device the stage is host-bound. Building a recipe's values (NumPy
  normals, then the family's edits) and the reference's row-by-row work cost ~20 s of one core
  over the quick plan, the candidate's calls a few. Both are the same pure functions of the
  recipe (``recipes._host_values``, ``reference.softmax_topk`` on ``coverage.judged_rows``), so
  they can run anywhere, in any order, and give the same bits.
- How: ``Ahead(jobs)`` keeps up to ``3 x workers`` of the stage's ``(recipe, k)`` jobs, in the
  order the stage asks for them, in a pool of spawned processes (fork is unsafe once CUDA is up;
  every process is started at once, with this process's ``__main__`` hidden from them, so that
  a caller's script without a ``__main__`` guard is not run again in each). ``take(recipe, k)``
  gives ``(host values, judged rows, reference)`` once the workers are up (it waits for that
  job), and None before (the caller computes it, as it always could: the pool's start-up never
  holds the stage up). A job the stage skips (a family stops at its first failing recipe) is
  dropped when a later one is taken.
  The reference travels without its rows (``rows=None``): the caller reads them from the values,
  as it would have.
- Both read the disk cache first (``disk_cache``): a warm run's workers read what an earlier run
  wrote, the same bits.
- Any failure of the pool (a worker killed, a result that does not unpickle) makes ``take`` give
  None from then on: the stage goes on in this process, never with a different verdict.
- Workers: ``EQUIV_HOST_WORKERS`` if set (0: none), else the cores this process may use less two
  (the property suite and this process), at most 12; none on a host of three cores or fewer
  (CI's two: the pool would only take cores from the suite).
- Priority: the workers run ``NICE`` steps below the other processes of the gate. The property
  suite and this process are the gate's critical path, one core each, while the workers' NumPy
  threads can fill every core; a worker yields to them and takes the cores they leave. On an
  H100 host (16 cores), the draft quick gate whole command, median of 3 in one run: 14.2 s with
  the workers at the gate's priority, 13.5 s with them at ``NICE`` (the same CPU-seconds:
  162 and 162, spent in a better order).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import types
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import replace

import numpy as np
import torch

from equiv import reference
from equiv.ops.draft_topk import disk_cache
from equiv.ops.draft_topk.coverage import judged_rows
from equiv.ops.draft_topk.recipes import _host_values
from equiv.run.suite import cores

MAX_WORKERS = 12
NICE = 10                                        # the workers' priority below the gate's (docstring)


def workers() -> int:
    """How many processes do the host work ahead (module docstring)."""
    env = os.environ.get("EQUIV_HOST_WORKERS", "").strip()
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            return 0
    n = cores()
    return 0 if n <= 3 else min(MAX_WORKERS, n - 2)


def _init(ready) -> None:
    torch.set_num_threads(2)                     # many workers: each keeps to a little of the host
    if hasattr(os, "nice"):                      # below the suite and the gate (module docstring)
        try:
            os.nice(NICE)
        except OSError:
            pass
    ready.set()


@contextmanager
def _no_main():
    """``__main__`` hidden while processes are spawned: a spawned process imports the parent's
    main script (``python script.py``) before its first job, and a script with no
    ``if __name__ == "__main__"`` guard would run again there."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


def prepare(recipe, k: int):
    """``(host values, judged rows, reference without its rows)`` of one job (a worker's work);
    the reference is the exception it raised, if it raised one."""
    host = disk_cache.values(recipe, lambda: _host_values(recipe))
    x = host.float().numpy() if host.dtype.itemsize < 4 else host.numpy()
    batch, vocab = x.shape
    judged = judged_rows(batch, vocab, seed=recipe.seed or 0)
    try:
        ref = disk_cache.reference(recipe, k, judged, lambda: replace(reference.softmax_topk(
            x if judged.size == batch else np.ascontiguousarray(x[judged]), k), rows=None))
    except Exception as exc:                     # noqa: BLE001 - raised where it is used, as in compare
        ref = exc
    return host, judged, ref


class Ahead:
    """The pool and its window of jobs (module docstring). A context manager; with no workers
    it does nothing and ``take`` gives None."""

    def __init__(self, jobs=(), n_workers: int | None = None):
        self._jobs = list(jobs)
        self._next = 0
        self._futures: OrderedDict = OrderedDict()
        self._pool = None
        n = workers() if n_workers is None else n_workers
        if n > 0:
            try:
                ctx = multiprocessing.get_context("spawn")
                self._ready = ctx.Event()
                self._pool = ProcessPoolExecutor(n, mp_context=ctx, initializer=_init, initargs=(self._ready,))
                self._window = 3 * n
                with _no_main():                 # every process starts at the first n submits
                    for _ in range(n):
                        self._pool.submit(int)
                self._fill()
            except (OSError, RuntimeError):
                self.close()

    def plan(self, jobs) -> "Ahead":
        """Give the jobs, in the order they will be taken (a pool started early, before they
        were known, so that its processes are up when the stage begins)."""
        self._jobs, self._next = list(jobs), 0
        self._futures.clear()
        self._fill()
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self._futures.clear()

    def _fill(self) -> None:
        while self._pool is not None and len(self._futures) < self._window and self._next < len(self._jobs):
            key = self._jobs[self._next]
            self._next += 1
            if key not in self._futures:
                self._futures[key] = self._pool.submit(prepare, *key)

    def take(self, recipe, k: int):
        """The job's ``(host, judged, reference)``, or None (module docstring)."""
        key = (recipe, k)
        if self._pool is None or key not in self._futures:
            return None
        while self._futures:                     # the jobs before this one were skipped
            first, fut = self._futures.popitem(last=False)
            if first == key:
                break
            fut.cancel()
        got = None
        if self._ready.is_set():
            try:
                got = fut.result()
            except Exception:                    # noqa: BLE001 - a broken pool: the stage goes on here
                self.close()
                return None
        else:
            fut.cancel()                         # the workers are starting: the caller does this one
        self._fill()
        return got
