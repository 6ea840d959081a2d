"""pytest plugin (entry point ``pytest11``): options that point the property suite at a candidate.

- ``--equiv-candidate SPEC``: judge this candidate (built-in name, pkg.mod:fn, file.py:fn)
  instead of the built-in paths.
- ``--equiv-device cpu|cuda|auto``: where inputs are built and the candidate runs (auto).
- ``--equiv-dtype D[,D...]``: input dtypes the candidate is judged at (float32,bfloat16,float16).
- ``--equiv-k K``: the k the candidate is judged at (default 1).
Hypothesis profiles ``dev``, ``ci`` and ``nightly`` are registered here and picked by the
``HYPOTHESIS_PROFILE`` environment variable (default ``dev``). Heavy imports happen only when a
test asks for the options.
"""
from __future__ import annotations

import os


def pytest_addoption(parser):
    group = parser.getgroup("equiv", "equiv: numerical-equivalence property suite")
    group.addoption("--equiv-candidate", default=None, metavar="SPEC",
                    help="candidate to judge: built-in path, package.module:function or file.py:function")
    group.addoption("--equiv-device", default="auto", choices=("auto", "cpu", "cuda"),
                    help="device for inputs and candidate (default auto: cuda when present)")
    group.addoption("--equiv-dtype", default=None, metavar="DTYPES",
                    help="comma-separated input dtypes to judge at (default: every dtype)")
    group.addoption("--equiv-k", default=1, type=int, metavar="K",
                    help="the k the candidate is judged at (default 1)")


def register_profiles() -> None:
    from hypothesis import HealthCheck, settings

    slow_ok = [HealthCheck.too_slow, HealthCheck.data_too_large]
    settings.register_profile("dev", max_examples=30, deadline=None, suppress_health_check=slow_ok)
    settings.register_profile("ci", max_examples=30, deadline=None, derandomize=True, database=None,
                              print_blob=True, suppress_health_check=slow_ok)
    settings.register_profile("nightly", max_examples=10_000, deadline=None, print_blob=True,
                              suppress_health_check=slow_ok)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device; skipped when none is present")
    try:
        register_profiles()
        from hypothesis import settings

        settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
    except ImportError:                          # hypothesis missing: property tests will say so
        pass


def pytest_collection_modifyitems(config, items):
    import pytest

    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
