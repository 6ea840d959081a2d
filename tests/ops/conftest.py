"""Fixtures shared by the ops' tests."""
import pytest

from equiv import memory


@pytest.fixture
def budget():
    """Set the process's memory budget for one test (``memory.use_budget``); the default again after it."""
    yield memory.use_budget
    memory.use_budget(None)
