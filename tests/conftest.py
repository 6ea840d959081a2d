"""equiv's own unit tests are an equiv run: profiles, the ``equiv_gpu`` marker (see equiv.plugin)."""
import pytest

from equiv.plugin import activate, register_profiles

EQUIV_SUITE = True
register_profiles()


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    activate(config)
