"""pytest plugin for nightly sweeps over every GPU of a host with pytest-xdist.

Registered through the ``pytest11`` entry point ``equiv_sweep``; inert unless the run is an equiv
run (``equiv.pytest.plugin.is_equiv_run``: equiv's suite collected or an ``--equiv-*`` option given), so
a host project's ``-n auto`` and its workers' ``CUDA_VISIBLE_DEVICES`` are left alone. The xdist
hook is an optional hook: without pytest-xdist installed, pytest runs as if this plugin were not
there.

- ``-n auto`` means one worker per visible GPU (``pytest_xdist_auto_num_workers``); with no GPU,
  one worker per CPU core. Each worker is pinned to one GPU: the controller counts the GPUs once
  and passes the count down in ``EQUIV_SWEEP_GPUS``; worker ``gwN`` sets
  ``CUDA_VISIBLE_DEVICES`` to GPU ``N % count`` before anything initialises CUDA, so ``cuda``
  in the suite means that worker's own GPU. A ``CUDA_VISIBLE_DEVICES`` list set by the caller is
  respected (worker N takes its N-th entry).
- ``--equiv-shards S`` runs each ``@given`` test S times (independent random streams under the
  ``nightly`` profile): many small items instead of a few long ones, so xdist's work stealing keeps
  the slowest worker close to the fastest.
- ``--equiv-sweep-json FILE`` (controller side) merges what every worker did into one record:
  per worker its busy seconds, items and Hypothesis examples; totals; examples per second of
  wall time; and the balance (slowest worker's busy time over the fastest's). Example counts come
  from the ``equiv_examples`` user property the property suite records per test, or else from
  the statistics Hypothesis attaches to each test's teardown report.
"""
from __future__ import annotations

import os
import re
import time

import pytest

from equiv.atomic import check_outputs, write_json
from equiv.errors import UsageError
from equiv.pytest.plugin import is_equiv_run

_GPU_ENV = "EQUIV_SWEEP_GPUS"
_STATS_KEY = "_hypothesis_stats"
# "97 passing examples, 1 failing examples, 2 invalid examples" (Hypothesis <= 6.16x) or
# "97 passing, 1 failing, and 2 invalid test cases" (later releases): both wordings are read.
_EXAMPLES = re.compile(r"(\d+) passing(?: examples)?, (\d+) failing(?: examples)?, (?:and )?(\d+) invalid")


def pytest_addoption(parser):
    group = parser.getgroup("equiv", "equiv: numerical-equivalence property suite")
    group.addoption("--equiv-shards", type=int, default=None, metavar="S",
                    help="run each Hypothesis test S times as separate items (balances xdist workers; default 1)")
    group.addoption("--equiv-sweep-json", default=None, metavar="FILE",
                    help="write per-worker throughput and balance of this run as JSON")


def _gpu_count() -> int:
    try:
        # torch: 2.9 s to import (-X importtime, busy 2-core CPU; ~1.2 s idle)
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except ImportError:
        return 0


@pytest.hookimpl(optionalhook=True)              # a hook of pytest-xdist, which may be absent
def pytest_xdist_auto_num_workers(config):
    if not is_equiv_run(config):
        return None                              # xdist's own rule decides
    n = _gpu_count()
    return n if n > 0 else (os.cpu_count() or 1)


def pytest_configure(config):
    if not is_equiv_run(config):
        return
    # An xdist worker's config carries ``workerinput``; the environment variable does not say
    # as much: a pytest run started inside a worker's test (a subprocess, or pytest.main) inherits it.
    worker = getattr(config, "workerinput", {}).get("workerid")
    if worker is None:
        if getattr(config.option, "numprocesses", None):
            os.environ[_GPU_ENV] = str(_gpu_count())   # inherited by the workers xdist starts
        path = config.getoption("equiv_sweep_json", None)
        if path:
            try:
                check_outputs({"--equiv-sweep-json": path})
            except UsageError as exc:
                raise pytest.UsageError(str(exc)) from None
            config.pluginmanager.register(_SweepRecorder(config), "equiv-sweep-recorder")
        return
    n_gpus = int(os.environ.get(_GPU_ENV, "0") or 0)
    if n_gpus > 0:
        index = int(worker.lstrip("gw") or 0)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        choices = visible.split(",") if visible else [str(i) for i in range(n_gpus)]
        os.environ["CUDA_VISIBLE_DEVICES"] = choices[index % len(choices)]


def pytest_generate_tests(metafunc):
    shards = metafunc.config.getoption("equiv_shards", None) or 1
    if shards > 1 and hasattr(metafunc.function, "hypothesis"):
        metafunc.fixturenames.append("equiv_shard")
        metafunc.parametrize("equiv_shard", range(shards), ids=lambda s: f"shard{s}")


def count_examples(stats_text: str) -> int:
    """Examples Hypothesis ran for one test, summed over phases, from its statistics text."""
    return sum(int(a) + int(b) + int(c) for a, b, c in _EXAMPLES.findall(stats_text or ""))


class _SweepRecorder:
    """Controller-side accounting of every worker's reports (xdist forwards them here)."""

    def __init__(self, config):
        self.config = config
        self.start = time.perf_counter()
        self.workers: dict = {}
        self.counted: set = set()

    def pytest_runtest_logreport(self, report):
        node = getattr(report, "node", None)
        worker = getattr(getattr(node, "gateway", None), "id", None) or "main"
        w = self.workers.setdefault(worker, {"busy_s": 0.0, "items": 0, "examples": 0, "failed": 0})
        w["busy_s"] += float(report.duration or 0.0)
        if report.when == "call":
            w["items"] += 1
            w["failed"] += int(report.failed)
            # the property suite's runner records its own count (it drives Hypothesis itself)
            counted = dict(report.user_properties).get("equiv_examples")
            if counted is not None:
                w["examples"] += int(counted)
                self.counted.add(report.nodeid)
        elif report.nodeid not in self.counted:
            # plain @given tests: Hypothesis attaches its statistics to the teardown report
            w["examples"] += count_examples(report.__dict__.get(_STATS_KEY, ""))

    def pytest_sessionfinish(self, session):
        wall = time.perf_counter() - self.start
        busy = [w["busy_s"] for w in self.workers.values() if w["items"]]
        examples = sum(w["examples"] for w in self.workers.values())
        record = {
            "wall_s": round(wall, 3),
            "workers": {k: {**v, "busy_s": round(v["busy_s"], 3)} for k, v in sorted(self.workers.items())},
            "n_workers": len(busy),
            "gpus": int(os.environ.get(_GPU_ENV, "0") or 0),
            "examples": examples,
            "examples_per_s": round(examples / wall, 2) if wall > 0 else None,
            "balance_slowest_over_fastest": round(max(busy) / min(busy), 3) if busy and min(busy) > 0 else None,
        }
        write_json(self.config.getoption("equiv_sweep_json"), record)
