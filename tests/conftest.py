"""equiv's own unit tests are an equiv run: profiles, the ``equiv_gpu`` marker (see equiv.pytest.plugin)."""
import os
import shutil
import tempfile

import pytest

from equiv.pytest.plugin import activate
from equiv.pytest.profiles import register_profiles

EQUIV_SUITE = True
_OWN_CACHE = None                                # the cache folder this process made (pytest_configure)
register_profiles()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # the gates of this session keep their disk cache (equiv/disk_cache.py, every op's) in a
    # folder of their own, small, removed when the session ends (by the process that made it, not
    # by pytest-xdist's workers, which inherit it): never the user's
    global _OWN_CACHE
    if "EQUIV_CACHE_DIR" not in os.environ:
        _OWN_CACHE = os.environ["EQUIV_CACHE_DIR"] = tempfile.mkdtemp(prefix="equiv-cache-")
        os.environ.setdefault("EQUIV_CACHE_MAX_MB", "512")
    activate(config)


def pytest_unconfigure(config):
    if _OWN_CACHE is not None:
        shutil.rmtree(_OWN_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def equiv_only_path(tmp_path_factory):
    """A folder that holds only a link to this checkout's ``equiv`` package: on PYTHONPATH it makes
    equiv importable in a subprocess without the checkout's top-level ``reference``/``properties``
    folders (as an installed equiv is), so a host project's own modules of those names are seen."""
    import os

    import equiv

    shim = tmp_path_factory.mktemp("equiv-only")
    os.symlink(os.path.dirname(os.path.realpath(equiv.__file__)), shim / "equiv")
    return str(shim)


@pytest.fixture(autouse=True)
def _seeded_global_rngs():
    """Every test starts from the same global RNG state, so a test that draws with
    ``torch.randn``/``np.random`` without a generator sees the same numbers on every run (one
    such draw once failed CI on about one seed in twenty: tests/ops/draft_topk/test_ulp.py)."""
    import random

    import numpy as np

    random.seed(0)
    np.random.seed(0)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(0)
